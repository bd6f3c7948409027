"""The calls the arrival benchmark can time (``--variant``), each as a :class:`Case`: the specs
a call takes, how to clear the receive side, and whether it holds what it must.

* ``alltoall``: blocks of SIZE bytes per peer.
* ``v``: Alltoallv of bytes with random counts per pair, uniform in [0, 2 x SIZE] (mean SIZE),
  drawn alike on every rank from the seed, blocks packed in rank order.
* ``w``: Alltoallw, one step of a pencil FFT: a complex128 array of SIZE^3 elements held as
  slabs of SIZE/N planes goes to pencils (3-D subarray datatypes on both sides, one per
  peer); SIZE must be a multiple of N.
* ``persistent``: ``alltoall``'s call as one persistent request per algorithm (made at the
  first call, untimed in the benchmarks' warm-up; MPI's own ``Alltoall_init`` for ``mpi``),
  started and waited for.
"""
import numpy as np
from mpi4py import MPI

from .arrival_measure import block_value, buffers

VARIANTS = ("alltoall", "v", "w", "persistent")


class Case:
    """One variant's buffers at one size: ``send`` and ``recv`` are the specs passed to the
    call, ``clear()`` empties the receive side, ``ok()`` checks it, ``bytes`` is what this
    rank receives, ``free()`` frees the datatypes made."""

    def __init__(self, send, recv, data, want, types=()):
        self.send, self.recv, self.data, self.want, self.types = send, recv, data, want, types
        self.bytes = data.nbytes

    def clear(self):
        self.data[...] = 0

    def ok(self):
        return np.array_equal(self.data, self.want)

    def free(self):
        for t in self.types:
            t.Free()


def case(variant, rank, nprocs, size, seed=1):
    if variant in ("alltoall", "persistent"):
        send, recv, want = buffers(rank, nprocs, size)
        return Case(send, recv, recv, want)
    if variant == "v":
        counts = np.random.default_rng([seed, size]).integers(0, 2 * size + 1, (nprocs, nprocs))
        out, into = counts[rank], counts[:, rank]
        send = np.concatenate([np.full(out[q], block_value(rank, q), np.uint8)
                               for q in range(nprocs)])
        want = np.concatenate([np.full(into[q], block_value(q, rank), np.uint8)
                               for q in range(nprocs)])
        recv = np.zeros_like(want)
        return Case([send, out.tolist()], [recv, into.tolist()], recv, want)
    if variant == "w":
        if size % nprocs:
            raise ValueError(f"--variant w: the grid edge {size} is not a multiple of {nprocs}")
        p = size // nprocs
        cplx = MPI.C_DOUBLE_COMPLEX
        planes = np.arange(size * size * size, dtype=np.complex128).reshape(size, size, size)
        slab = np.ascontiguousarray(planes[rank * p:(rank + 1) * p])
        want = np.ascontiguousarray(planes[:, rank * p:(rank + 1) * p])
        sends = [cplx.Create_subarray([p, size, size], [p, p, size], [0, q * p, 0]).Commit()
                 for q in range(nprocs)]
        recvs = [cplx.Create_subarray([size, p, size], [p, p, size], [q * p, 0, 0]).Commit()
                 for q in range(nprocs)]
        recv = np.zeros_like(want)
        layout = ([1] * nprocs, [0] * nprocs)
        return Case([slab, layout, sends], [recv, layout, recvs], recv, want, sends + recvs)
    raise ValueError(f"unknown variant {variant!r}; one of {VARIANTS}")


def caller(pc, name, variant):
    """How the benchmark calls ``name`` for ``variant``: ``mpi`` as an mpi4py program calls its
    MPI library (on the same communicator, no papcoll code in the way), everything else --
    ``auto`` too -- through papcoll.Communicator."""
    if variant == "persistent":
        init = (lambda s, r: MPI.Intracomm.Alltoall_init(pc, s, r)) if name == "mpi" else \
            (lambda s, r: pc.Alltoall_init(s, r, algorithm=name))
        return Persistent(init)
    method = {"alltoall": "Alltoall", "v": "Alltoallv", "w": "Alltoallw"}[variant]
    if name == "mpi":
        plain = getattr(MPI.Intracomm, method)
        return lambda send, recv: plain(pc, send, recv)
    mine = getattr(pc, method)
    return lambda send, recv: mine(send, recv, algorithm=name)


class Persistent:
    """A call as a persistent request on its buffers, made at the first call on them (and
    made again, the old one freed, for other buffers); ``free()`` frees it."""

    def __init__(self, init):
        self.init, self.request, self.buffers = init, None, None

    def __call__(self, send, recv):
        self.started(send, recv).Wait()

    def started(self, send, recv):
        """The request on these buffers, started."""
        if self.buffers is None or self.buffers[0] is not send or self.buffers[1] is not recv:
            self.free()
            self.request, self.buffers = self.init(send, recv), (send, recv)
        self.request.Start()
        return self.request

    def free(self):
        if self.request is not None:
            self.request.Free()
            self.request = self.buffers = None
