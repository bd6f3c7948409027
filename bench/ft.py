"""The NAS FT kernel (NPB 3.x) in numpy, slab-decomposed, its transposes done by papcoll.Alltoall.

    mpiexec -n 4 python -m mpi4py -m papcoll.bench ft --class A --algorithm mpi [--json PATH]

FT solves a 3-D heat equation spectrally: forward 3-D FFT of a random field once, then per
iteration multiply by exp(-4 alpha pi^2 |k|^2), inverse 3-D FFT and a checksum verified against
NPB's published values. Two slab layouts, C order with x fastest like NPB's Fortran arrays:

  real space  (nz/N, ny, nx)  this rank's z-planes: x and y FFTs and the checksum are local;
  spectral    (nz, ny/N, nx)  this rank's y-range of every plane: z FFT and evolve are local.

One alltoall moves between them (one per 3-D FFT, as in NPB's 1-D layout); the block for peer p
is (my z-planes) x (p's y-range), nx*ny*nz/N^2 complex128, contiguous in the send buffer.
"""
import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
from mpi4py import MPI

import papcoll
from papcoll.algorithms import AUTO
from papcoll.outfile import out_file

_REFERENCE = json.loads(Path(__file__).with_name("npb_ft_reference.json").read_text())
CLASSES = _REFERENCE["classes"]

# NPB's generator: x <- A*x mod 2^46, returning x*2^-46.
A = 5 ** 13
SEED = 314159265
MOD46 = 1 << 46
_MASK46 = np.uint64(MOD46 - 1)
ALPHA = 1e-6


def randlc(x, a=A):
    """One step of NPB's randlc: the next state and its value x*2^-46 in (0, 1)."""
    x = a * x % MOD46
    return x, x / MOD46          # exact: x < 2^46 fits a double's mantissa


def stream(offset, count, seed=SEED):
    """Numbers offset..offset+count-1 of NPB's stream from ``seed`` (number 0 is the first one
    vranlc returns, seed*A mod 2^46), computed without stepping through the ones before."""
    x = np.empty(count, np.uint64)
    x[0] = seed * pow(A, offset + 1, MOD46) % MOD46      # pow jumps ahead by repeated squaring
    n, step = 1, A                                       # invariant: step = A^n mod 2^46
    while n < count:                                     # doubling: x[n+i] = x[i] * A^n
        k = min(n, count - n)
        # uint64 products wrap modulo 2^64, a multiple of 2^46, so the low 46 bits are exact.
        np.multiply(x[:k], np.uint64(step), out=x[n:n + k])
        x[n:n + k] &= _MASK46
        n, step = n + k, step * step % MOD46
    return x * 2.0 ** -46


def initial_conditions(nx, ny, nz, z0, nzl):
    """NPB's u0 on z-planes z0..z0+nzl-1. NPB fills u(nx, ny, nz) x fastest from one stream,
    real then imaginary part, so this slab is the stream from number 2*nx*ny*z0 on."""
    plane = 2 * nx * ny
    return stream(plane * z0, plane * nzl).view(np.complex128).reshape(nzl, ny, nx)


def _folded(n, start, count):
    """FFT indices start..start+count-1 of length n as frequencies -n/2..n/2-1 (NPB's indexmap)."""
    i = np.arange(start, start + count)
    return (i + n // 2) % n - n // 2


def twiddle(nx, ny, nz, y0, nyl):
    """exp(-4 alpha pi^2 (ibar^2 + jbar^2 + kbar^2)) on the spectral slab (nz, nyl, nx)."""
    k, j, i = _folded(nz, 0, nz), _folded(ny, y0, nyl), _folded(nx, 0, nx)
    ksq = (k * k)[:, None, None] + (j * j)[None, :, None] + (i * i)[None, None, :]
    return np.exp(-4.0 * ALPHA * math.pi * math.pi * ksq)     # NPB's operation order


class Slabs:
    """This rank's slabs and the two transposes between them.

    NPB's forward FFT is unscaled with e^{+2 pi i jk/n}: numpy's ifft with norm="forward" (which
    drops ifft's 1/n); NPB's inverse is unscaled with e^{-2 pi i jk/n}: numpy's fft.
    ``imbalance`` > 0 sleeps a uniform [0, imbalance] s (rng) before each transpose, so ranks
    reach the alltoall at different times; sleeping leaves the shared cores to the others.
    """

    def __init__(self, nx, ny, nz, rank, nprocs, alltoall):
        self.nx, self.ny, self.nz, self.nprocs = nx, ny, nz, nprocs
        self.nzl, self.nyl = nz // nprocs, ny // nprocs
        self.z0, self.y0 = rank * self.nzl, rank * self.nyl
        self.alltoall = alltoall
        # Kept for the whole run: transports may register them once.
        self.send = np.empty((nprocs, self.nzl, self.nyl, nx), np.complex128)
        self.recv = np.empty_like(self.send)
        self.reset()

    def reset(self, imbalance=0.0, rng=None):
        """Zero the timers; from now on delay each transpose by up to ``imbalance`` s."""
        self.imbalance, self.rng = imbalance, rng
        self.alltoall_time = self.injected = 0.0

    def _exchange(self):
        if self.imbalance > 0:
            delay = self.rng.uniform(0.0, self.imbalance)
            time.sleep(delay)
            self.injected += delay
        start = time.perf_counter()
        self.alltoall(self.send, self.recv)
        self.alltoall_time += time.perf_counter() - start

    def forward(self, u):
        """Real-space slab -> spectral slab, NPB's forward 3-D FFT."""
        xy = np.fft.ifft2(u, axes=(1, 2), norm="forward")
        self.send[...] = xy.reshape(self.nzl, self.nprocs, self.nyl, self.nx).transpose(1, 0, 2, 3)
        self._exchange()
        # Blocks arrive in sender order, i.e. by z-planes: recv already is (nz, nyl, nx).
        return np.fft.ifft(self.recv.reshape(self.nz, self.nyl, self.nx), axis=0, norm="forward")

    def inverse(self, spec):
        """Spectral slab -> real-space slab, NPB's inverse 3-D FFT."""
        # Block p is p's z-planes of my y-range: a contiguous run of (nz, nyl, nx).
        self.send.reshape(self.nz, self.nyl, self.nx)[...] = np.fft.fft(spec, axis=0)
        self._exchange()
        u = self.recv.transpose(1, 0, 2, 3).reshape(self.nzl, self.ny, self.nx)
        return np.fft.fft2(u, axes=(1, 2))

    def checksum(self, u):
        """This rank's part of sum_{j=1..1024} u(j mod nx, 3j mod ny, 5j mod nz)."""
        j = np.arange(1, 1025)
        x, y, z = j % self.nx, 3 * j % self.ny, 5 * j % self.nz
        mine = (z >= self.z0) & (z < self.z0 + self.nzl)
        return complex(u[z[mine] - self.z0, y[mine], x[mine]].sum())


def _alltoall_for(algorithm, comm, persistent=False):
    """papcoll.Alltoall on ``comm`` with ``algorithm`` (None or ``auto``: papcoll's own choice);
    for the baseline ``mpi``, the MPI library's own, called as an mpi4py program calls it;
    ``persistent``: the same as a persistent request (:class:`Persistent`). The name is checked
    here to fail cleanly on every rank (papcoll on one process never looks it up)."""
    if algorithm not in (None, AUTO) and algorithm not in papcoll.algorithms:
        raise ValueError(f"unknown algorithm {algorithm!r}; papcoll has: "
                         f"{', '.join(sorted(papcoll.algorithms))}, or {AUTO} (its own choice)")
    if persistent:
        if algorithm == "mpi":
            return Persistent(comm.Alltoall_init)
        pc = papcoll.api.communicator_of(comm)
        return Persistent(lambda send, recv: pc.Alltoall_init(send, recv, algorithm=algorithm))
    if algorithm == "mpi":
        return comm.Alltoall
    return lambda sendbuf, recvbuf: papcoll.Alltoall(comm, sendbuf, recvbuf, algorithm=algorithm)


class Persistent:
    """The transposes as one persistent alltoall on the slabs' fixed buffers: made by
    ``init(send, recv)`` at the first (untimed) transpose, then started and waited for."""

    def __init__(self, init):
        self.init, self.request = init, None

    def __call__(self, send, recv):
        if self.request is None:
            self.request = self.init(send, recv)
        self.request.Start()
        self.request.Wait()

    def free(self):
        if self.request is not None:
            self.request.Free()


def mops(ntotal, niter, seconds):
    """NPB FT's Mop/s (operation count of ft.f)."""
    ln = math.log(ntotal)
    return 1e-6 * ntotal * (14.8157 + 7.19641 * ln + (5.23518 + 7.21113 * ln) * niter) / seconds


def run_ft(comm, cls, algorithm=None, imbalance=0.0, seed=1, persistent=False):
    """Run NPB FT class ``cls`` on ``comm`` (collective); return the results, the same on every
    rank. ``imbalance``/``seed``: see Slabs; ``persistent``: the transposes are one persistent
    alltoall. Raises ValueError for an unusable class, process count or algorithm, on every
    rank alike."""
    if cls not in CLASSES:
        raise ValueError(f"unknown class {cls!r}; NPB FT classes here: {', '.join(CLASSES)}")
    ref = CLASSES[cls]
    nx, ny, nz, niter = ref["nx"], ref["ny"], ref["nz"], ref["niter"]
    rank, nprocs = comm.Get_rank(), comm.Get_size()
    if nprocs & (nprocs - 1) or ny % nprocs or nz % nprocs:
        raise ValueError(f"class {cls} runs on a power-of-two number of processes that divides "
                         f"ny={ny} and nz={nz} (slab decomposition), not on {nprocs}")
    slabs = Slabs(nx, ny, nz, rank, nprocs, _alltoall_for(algorithm, comm, persistent))

    # Like NPB, set up once untimed so first-touch and first-call costs stay out of the timing.
    slabs.forward(initial_conditions(nx, ny, nz, slabs.z0, slabs.nzl))
    slabs.reset(imbalance, np.random.default_rng([seed, rank]))
    comm.Barrier()
    start = time.perf_counter()
    factor = twiddle(nx, ny, nz, slabs.y0, slabs.nyl)
    spec = slabs.forward(initial_conditions(nx, ny, nz, slabs.z0, slabs.nzl))
    sums = []
    for _ in range(niter):
        spec *= factor                  # cumulative: after t iterations exp(...)^t, as NPB
        u = slabs.inverse(spec)
        sums.append(comm.allreduce(slabs.checksum(u)) / (nx * ny * nz))
    elapsed = time.perf_counter() - start
    if persistent:
        slabs.alltoall.free()

    times = comm.allgather((elapsed, slabs.alltoall_time, slabs.injected))
    seconds = max(t[0] for t in times)
    in_alltoall = [t[1] for t in times]
    expected = [complex(*c) for c in ref["checksums"]]
    errors = [abs((s - e) / e) for s, e in zip(sums, expected)]
    return {
        "benchmark": "FT", "class": cls, "nx": nx, "ny": ny, "nz": nz, "niter": niter,
        "nprocs": nprocs, "algorithm": algorithm, "persistent": persistent,
        "alltoall_calls": niter + 1,
        "block_bytes": slabs.send[0].nbytes,
        "imbalance": imbalance, "imbalance_seed": seed,
        "imbalance_injected_max": max(t[2] for t in times),
        "time": seconds, "mops": mops(nx * ny * nz, niter, seconds),
        "alltoall_time_mean": sum(in_alltoall) / nprocs, "alltoall_time_max": max(in_alltoall),
        "alltoall_time_per_rank": in_alltoall,
        "alltoall_fraction": sum(in_alltoall) / nprocs / seconds,
        "checksums": [[s.real, s.imag] for s in sums],
        "reference": ref["checksums"], "reference_source": _REFERENCE["source"],
        "rel_errors": errors, "epsilon": ref["epsilon"],
        "verified": all(e <= ref["epsilon"] for e in errors),   # a NaN fails too
    }


def report(r):
    """NPB-style text for a run_ft result."""
    algorithm = r["algorithm"] or "papcoll's choice"
    if r["imbalance"] > 0:
        imbalance = (f"sleep uniform in [0, {r['imbalance']:g}] s before each transpose, "
                     f"seed {r['imbalance_seed']}, slept up to "
                     f"{r['imbalance_injected_max']:.4f} s in all per rank")
    else:
        imbalance = "none"
    lines = [
        "", " NAS Parallel Benchmarks FT (NPB 3.x kernel in numpy, alltoall by papcoll)", "",
        f" Size                : {r['nx']:4d}x{r['ny']:4d}x{r['nz']:4d}  (class {r['class']})",
        f" Iterations          : {r['niter']:12d}",
        f" Number of processes : {r['nprocs']:12d}",
        f" Alltoall algorithm  : {algorithm:>12}"
        + ("  (one persistent request)" if r.get("persistent") else ""),
        f" Alltoall block      : {r['block_bytes']:12d} bytes per peer, {r['alltoall_calls']} calls",
        f" Imbalance           : {imbalance}", "",
    ]
    for t, ((re, im), err) in enumerate(zip(r["checksums"], r["rel_errors"]), 1):
        lines.append(f" T = {t:4d}     Checksum = {re:22.12E}{im:22.12E}   rel. error {err:.1e}")
    pct = 100.0 * r["alltoall_fraction"]
    lines += [
        "",
        f" Time in seconds     : {r['time']:12.4f}",
        f" Mop/s total         : {r['mops']:12.2f}",
        f" Mop/s/process       : {r['mops'] / r['nprocs']:12.2f}",
        (f" Time in alltoall    : {r['alltoall_time_mean']:12.4f} s mean over ranks "
         f"({pct:.1f} % of total), max {r['alltoall_time_max']:.4f} s"),
        f" VERIFICATION {'SUCCESSFUL' if r['verified'] else 'UNSUCCESSFUL'}",
    ]
    return "\n".join(lines)


def _seconds(text):
    value = float(text)
    if not 0 <= value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds >= 0, not {text!r}")
    return value


def add_arguments(parser):
    """The ``ft`` subcommand's options."""
    parser.add_argument("--class", dest="cls", choices=list(CLASSES), default="S",
                        help="NPB problem class (default S)")
    parser.add_argument("--algorithm", default=None,
                        help="papcoll algorithm for the transposes, e.g. 'mpi' for MPI's own "
                             f"alltoall (default, or {AUTO}: papcoll's choice)")
    parser.add_argument("--imbalance", type=_seconds, default=0.0, metavar="SECONDS",
                        help="sleep a random uniform [0, SECONDS] on each rank before each "
                             "transpose (default 0)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the imbalance delays")
    parser.add_argument("--persistent", action="store_true",
                        help="make the transposes one persistent alltoall (Alltoall_init; "
                             "MPI's own for --algorithm mpi), started for each")
    parser.add_argument("--json", type=out_file, metavar="PATH",
                        help="also write the results as JSON")


def run(args):
    """Run from parsed options on MPI.COMM_WORLD; rank 0 prints. Exit status 0 iff verified."""
    comm = MPI.COMM_WORLD
    try:
        result = run_ft(comm, args.cls, args.algorithm, args.imbalance, args.seed,
                        args.persistent)
    except ValueError as err:
        if comm.Get_rank() == 0:
            print(f"papcoll.bench ft: error: {err}", file=sys.stderr, flush=True)
        comm.Barrier()   # a non-zero exit aborts every rank: not before rank 0 has said why
        return 2
    if comm.Get_rank() == 0:
        print(report(result), flush=True)
        if args.json:
            args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0 if result["verified"] else 1

