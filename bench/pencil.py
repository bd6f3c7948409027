"""A distributed FFT's transposes: shapes that alternate, as a real program's do --

    mpiexec -n 4 python -m papcoll run -m papcoll.bench.pencil plain --grid 64   # unmodified
    mpiexec -n 4 python -m mpi4py -m papcoll.bench.pencil plain --grid 64        # MPI's own
    mpiexec -n 4 python -m mpi4py -m papcoll.bench.pencil explicit --algorithm mpi --grid 64

A GRID^3 complex128 array is held in pencils over a 2-D process grid (MPI.Compute_dims: 2 x 2
at N = 4), as mpi4py-fft holds it. A step's forward transform moves this rank's z-pencil to a
y-pencil among the ranks of its grid row (a ``Sub`` communicator), then to an x-pencil among
those of its grid column; the backward transform moves it back. Each transpose is one Alltoallw of 3-D subarray datatypes
(one per peer, counts 1, displacements 0), and a backward one swaps its forward one's send and
receive types: four shapes per step, two per sub-communicator, alternating. No local FFT runs,
so the time is the transposes' and the data must come back bit for bit (every element holds
its global index).

``plain`` is an unmodified mpi4py program: this module imports papcoll only in ``explicit``
(``python -m mpi4py bench/pencil.py plain`` loads none of it). ``explicit`` calls
``papcoll.Communicator(sub).Alltoallw(..., algorithm=NAME)`` and, in alternate rounds on the
same communicators, mpi4py's ``MPI.Comm.Alltoallw``. Rank 0 prints one line: the median round's
time per step in the transposes (delays excluded), the slowest rank's; in explicit mode also
the ratio to mpi4py and rank 0's call-cache hits and misses. After the timed rounds every
buffer is cleared and one step is run and checked; explicit mode also checks a transpose
against MPI's own.
"""
import argparse
import sys
import time

import numpy as np
from mpi4py import MPI

WARMUP = 2          # untimed steps per row: papcoll sets up and keeps its plans in the first


def parse(argv):
    parser = argparse.ArgumentParser(prog="python -m papcoll.bench.pencil",
                                     description="pencil FFT transposes: alternating Alltoallw")
    parser.add_argument("how", choices=("plain", "explicit"))
    parser.add_argument("--grid", type=int, default=64,
                        help="edge of the array, a multiple of both process-grid sides "
                             "(default 64)")
    parser.add_argument("--algorithm", default="mpi",
                        help="explicit: papcoll's algorithm, or auto (default mpi)")
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds (default 7)")
    parser.add_argument("--steps", type=int, default=10, help="steps per round (default 10)")
    parser.add_argument("--delay", type=float, default=0.0, metavar="US",
                        help="before each transpose every rank sleeps uniform [0, US] "
                             "microseconds, drawn from --seed and its rank: arrival's "
                             "MIF x t_msg given directly (default 0: none)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the delays (default 1)")
    args = parser.parse_args(argv)
    if min(args.grid, args.rounds, args.steps) < 1 or args.delay < 0:
        parser.error("--grid, --rounds and --steps must be >= 1, --delay >= 0")
    return args


def global_index(n, ranges):
    """The elements of the n^3 array in ``ranges`` (one per axis): real part the C-order
    global index, imaginary part n^3 minus it."""
    i, j, k = np.ix_(*(np.arange(r.start, r.stop) for r in ranges))
    g = ((i * n + j) * n + k).astype(np.float64)
    return g + 1j * (n ** 3 - g)


def subarrays(shape, axis, parts):
    """``shape`` cut along ``axis`` into ``parts`` equal pieces: a committed type for each."""
    piece = list(shape)
    piece[axis] //= parts
    return [MPI.C_DOUBLE_COMPLEX.Create_subarray(
        shape, piece, [q * piece[axis] if d == axis else 0 for d in range(3)]).Commit()
        for q in range(parts)]


class Pencils:
    """This rank's z-, y- and x-pencils, what they must hold, and the four transposes as
    (sub-communicator index, source, destination, send types, receive types)."""

    def __init__(self, cart, n):
        (p0, p1), (c0, c1) = cart.dims, cart.coords
        # comms[0] joins the ranks of one grid row (size p1), comms[1] of one column (size p0).
        self.comms = [cart.Sub([False, True]), cart.Sub([True, False])]
        a, b = range(c0 * n // p0, (c0 + 1) * n // p0), range(c1 * n // p1, (c1 + 1) * n // p1)
        full = range(n)
        self.want = {"z": global_index(n, (a, b, full)), "y": global_index(n, (a, full, b)),
                     "x": global_index(n, (full, a, b))}
        self.buf = {name: want.copy() for name, want in self.want.items()}
        z, y, x = (self.buf[name].shape for name in "zyx")
        z_out, y_in = subarrays(z, 2, p1), subarrays(y, 1, p1)
        y_out, x_in = subarrays(y, 1, p0), subarrays(x, 0, p0)
        self.types = z_out + y_in + y_out + x_in
        self.forward = [(0, "z", "y", z_out, y_in), (1, "y", "x", y_out, x_in)]
        self.backward = [(1, "x", "y", x_in, y_out), (0, "y", "z", y_in, z_out)]
        self.layouts = [([1] * p1, [0] * p1), ([1] * p0, [0] * p0)]

    def run(self, call, transposes, delay=lambda: None):
        """``call(i, sendspec, recvspec)`` for each transpose, as mpi4py-fft calls Alltoallw;
        the seconds spent in the calls."""
        spent = 0.0
        for i, src, dst, out, into in transposes:
            delay()
            start = time.perf_counter()
            call(i, [self.buf[src], self.layouts[i], out], [self.buf[dst], self.layouts[i], into])
            spent += time.perf_counter() - start
        return spent

    def check(self, call, mpi=None):
        """One step by ``call`` into cleared buffers, each result compared bit for bit with the
        global indices; with ``mpi`` (MPI's own call) its first transpose too."""
        b, want = self.buf, self.want
        b["y"][...] = b["x"][...] = 0
        self.run(call, self.forward)
        _same("forward", (b["y"], want["y"]), (b["x"], want["x"]))
        if mpi is not None:
            i, src, _, out, into = self.forward[0]
            got = np.zeros_like(b["y"])
            mpi(i, [b[src], self.layouts[i], out], [got, self.layouts[i], into])
            _same("MPI's own transpose", (got, b["y"]))
        b["z"][...] = b["y"][...] = 0
        self.run(call, self.backward)
        _same("backward", (b["y"], want["y"]), (b["z"], want["z"]))

    def free(self):
        for t in self.types:
            t.Free()
        for comm in self.comms:
            comm.Free()


def _same(what, *pairs):
    for got, want in pairs:
        if not np.array_equal(got, want):
            wrong = np.flatnonzero(got != want)
            raise AssertionError(f"pencil: {what}: {wrong.size} elements differ, the first at "
                                 f"{wrong[0]}: {got.flat[wrong[0]]} for {want.flat[wrong[0]]}")


def measure(cart, pencils, rows, args):
    """Each row's median round, in seconds per step, the slowest rank's. Rounds alternate
    between the rows; each row draws the same delays."""
    rank = cart.Get_rank()
    rngs = {row: np.random.default_rng([args.seed, rank]) for row in rows}
    times = {row: [] for row in rows}
    step = pencils.forward + pencils.backward
    for call in rows.values():
        for _ in range(WARMUP):
            pencils.run(call, step)
    for _ in range(args.rounds):
        for row, call in rows.items():
            def delay(rng=rngs[row]):
                if args.delay:
                    time.sleep(rng.uniform(0.0, args.delay) * 1e-6)
            cart.Barrier()
            spent = sum(pencils.run(call, step, delay) for _ in range(args.steps))
            times[row].append(spent / args.steps)
    return {row: cart.allreduce(float(np.median(t)), op=MPI.MAX) for row, t in times.items()}


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else argv)
    world = MPI.COMM_WORLD
    dims = MPI.Compute_dims(world.Get_size(), 2)
    if args.grid % dims[0] or args.grid % dims[1]:
        raise SystemExit(f"pencil: --grid {args.grid} is not a multiple of the process grid "
                         f"{dims[0]}x{dims[1]}")
    cart = world.Create_cart(dims)
    pencils = Pencils(cart, args.grid)
    comms = pencils.comms

    def mpi(i, send, recv):
        MPI.Intracomm.Alltoallw(comms[i], send, recv)

    if args.how == "plain":
        rows = {"plain": lambda i, send, recv: comms[i].Alltoallw(send, recv)}
    else:
        import papcoll
        pcs = [papcoll.Communicator(comm) for comm in comms]
        rows = {args.algorithm: lambda i, send, recv: pcs[i].Alltoallw(
            send, recv, algorithm=args.algorithm), "mpi4py": mpi}
    per_step = measure(cart, pencils, rows, args)
    mine = next(iter(rows))
    p0, p1 = cart.dims
    line = (f"pencil {args.how}{'' if mine == 'plain' else ' ' + mine}: N={world.Get_size()} "
            f"({p0}x{p1}), {args.grid}^3 complex128, {args.rounds} rounds of {args.steps} steps"
            f"{f', delays up to {args.delay:g} us' if args.delay else ''}: "
            f"{per_step[mine] * 1e6:.1f} us per step")
    if args.how == "plain":
        pencils.check(rows[mine])
    else:
        pencils.check(rows[mine], mpi)
        line += (f", mpi4py {per_step['mpi4py'] * 1e6:.1f} us "
                 f"({per_step[mine] / per_step['mpi4py']:.3f} x)")
        caches = [getattr(pc._ctx, "cache", None) for pc in pcs]   # None: papcoll before it
        line += ("; no call cache" if None in caches else
                 f"; cache hits {sum(c.hits for c in caches)} "
                 f"misses {sum(c.misses for c in caches)} (rank 0)")
        for pc in pcs:
            pc.close()
    if cart.Get_rank() == 0:
        print(line + "; checked", flush=True)
    pencils.free()
    cart.Free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
