"""The CMA cost model (Chakraborty et al., "Contention-aware kernel-assisted MPI collectives"):

    t = alpha + n beta + l gamma_c ceil(n / s)

alpha: syscall + access check; beta: per byte copied; l: lock and pin one page; s: page size;
gamma_c: how much longer pinning takes with c processes reading one process at once.

    mpiexec -n 3 python -m mpi4py -m papcoll.bench cma-model

Rank 0 is the process everyone reads (it sleeps); readers time process_vm_readv calls with
native.cma_probe (its header: on Linux a 0-byte local iovec returns before pinning anything, so
1-byte local iovecs isolate the steps), taking medians of --reps calls:

    T1 = 0-byte local, 1-byte remote            syscall only
    T2 = 1-byte local, 1-byte remote            alpha = T2
    T3 = 1-byte local, remote of N pages        l = (T3 - T2) / N    (pins N pages, copies 1 B)
    T4 = N pages local and remote               beta = (T4 - T3) / (N s)

gamma_c = (T3 with c readers at once - T2) / (T3 with one reader - T2), for c = 1 .. ranks - 1,
each reader on its own pages of rank 0 (both in the same loop, so gamma_1 = 1). Readers only
contend while they run at once: with more readers than free cores gamma_c says little. The
aggregate throughput of c readers copying N pages each (all bytes over the wall time of the
batch) gives the throttle factor: the c that moves the most bytes per second. Both kinds of
memory are probed:
numpy arrays as users allocate them (large ones may get transparent huge pages) and 4 KiB pages.
"""
import datetime
import json
import mmap
import os
import platform
import time
from pathlib import Path

import numpy as np
from mpi4py import MPI

from papcoll import native

from .arrival_measure import idle_barrier

THP = "/sys/kernel/mm/transparent_hugepage/enabled"


def add_arguments(parser):
    parser.add_argument("--pages", type=int, default=256,
                        help="N: pages per probe, at most 1024 (default 256)")
    parser.add_argument("--reps", type=int, default=200, help="calls per probe (default 200)")
    parser.add_argument("--out", type=Path, default=Path("results"),
                        help="folder for the JSON result (default results/)")
    parser.add_argument("--name", help="file stem (default cma-model-n<N>-<date-time>)")


def target_memory(kind, nbytes):
    """rank 0's memory to be read: 'numpy' as a user allocates it, or '4k' pages only."""
    if kind == "numpy":     # at least 8 MiB, as numpy madvises huge pages from 4 MiB on
        memory = np.empty(max(nbytes, 8 << 20), np.uint8)
    else:
        pages = mmap.mmap(-1, nbytes)
        pages.madvise(mmap.MADV_NOHUGEPAGE)
        memory = np.frombuffer(pages, np.uint8)
    memory[:] = 1                       # fault every page in: CMA pins resident pages
    return memory


def median_ns(times):
    return float(np.median(times))


def probe(pid, address, pages, reps, local_bytes, remote_bytes):
    local = None if local_bytes == 0 else np.zeros(local_bytes, np.uint8)
    return median_ns(native.cma_probe(pid, address, remote_bytes, local=local, reps=reps))


def measure(comm, kind, args):
    """The model's parameters for one kind of memory, complete on rank 1."""
    rank, size = comm.Get_rank(), comm.Get_size()
    page, n = mmap.PAGESIZE, args.pages
    span = n * page
    memory = target_memory(kind, (size - 1) * span) if rank == 0 else None
    pid, base = comm.bcast((os.getpid(), memory.ctypes.data) if rank == 0 else None, root=0)
    mine = base + (rank - 1) * span if rank else 0
    result = {}
    if rank == 1:
        t1 = probe(pid, mine, n, args.reps, 0, 1)
        t2 = probe(pid, mine, n, args.reps, 1, 1)
        t3 = probe(pid, mine, n, args.reps, 1, span)
        t4 = probe(pid, mine, n, args.reps, span, span)
        result = {"T1_us": t1 / 1e3, "T2_us": t2 / 1e3, "T3_us": t3 / 1e3, "T4_us": t4 / 1e3,
                  "alpha_us": t2 / 1e3, "l_us": (t3 - t2) / n / 1e3,
                  "beta_ns_per_byte": (t4 - t3) / span, "bandwidth_GBps": span / (t4 - t3)}
    idle_barrier(comm)
    pins, copies = {}, {}
    for c in range(1, size):
        idle_barrier(comm)
        if 1 <= rank <= c:
            pins[c] = probe(pid, mine, n, args.reps, 1, span)
        idle_barrier(comm)
        if 1 <= rank <= c:              # wall clock of the whole batch: CLOCK_MONOTONIC is
            start = time.monotonic()    # one clock for every process of the machine
            probe(pid, mine, n, args.reps, span, span)
            copies[c] = (start, time.monotonic())
        idle_barrier(comm)
    gathered = comm.gather((pins, copies), root=0)
    result = comm.bcast(result, root=1)
    if rank != 0:
        return None
    t2 = result["T2_us"] * 1e3
    pin = {c: np.mean([g[0][c] for g in gathered if c in g[0]]) for c in range(1, size)}
    gamma = {c: (pin[c] - t2) / (pin[1] - t2) for c in pin}
    throughput = {}                     # all bytes the c readers moved / the time they took
    for c in range(1, size):
        spans = [g[1][c] for g in gathered if c in g[1]]
        wall = max(end for _, end in spans) - min(start for start, _ in spans)
        throughput[c] = c * args.reps * span / wall / 1e9
    best = max(throughput, key=throughput.get)
    return {**result, "gamma": gamma, "throughput_GBps": throughput, "throttle": best}


def thp_setting():
    try:
        with open(THP) as f:
            return f.read().strip()
    except OSError:
        return None


def format_table(result):
    title = (f"# papcoll CMA cost model, {result['nprocs']} ranks ({result['nprocs'] - 1} readers "
             f"of rank 0), N = {result['pages']} pages of {result['page_bytes']} B, "
             f"median of {result['reps']} calls")
    lines = [title, f"# transparent huge pages: {result['thp']}"]
    for kind, m in result["memory"].items():
        lines.append(f"{kind:>6}: alpha {m['alpha_us']:.2f} us (syscall {m['T1_us']:.2f}), "
                     f"l {m['l_us'] * 1e3:.1f} ns/page, beta {m['beta_ns_per_byte'] * 1e3:.1f} "
                     f"ps/B ({m['bandwidth_GBps']:.2f} GB/s)")
        lines.append("        c: " + "  ".join(
            f"{c}: gamma {g:.2f}, {m['throughput_GBps'][c]:.2f} GB/s" for c, g in m["gamma"].items())
            + f"  -> throttle k = {m['throttle']}")
    return "\n".join(lines)


def run(args):
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    if size < 2 or not 1 <= args.pages <= 1024:
        if rank == 0:
            print("papcoll.bench cma-model: needs at least 2 ranks on one node and "
                  "1 <= --pages <= 1024", flush=True)
        comm.Barrier()   # a non-zero exit aborts every rank: not before rank 0 has said why
        return 2
    native.allow_ptrace_any()
    started = datetime.datetime.now()
    memory = {kind: measure(comm, kind, args) for kind in ("numpy", "4k")}
    if rank != 0:
        return 0
    result = {"benchmark": "papcoll CMA cost model", "date": started.isoformat(timespec="seconds"),
              "host": platform.node(), "kernel": platform.release(), "nprocs": size,
              "pages": args.pages, "page_bytes": mmap.PAGESIZE, "reps": args.reps,
              "thp": thp_setting(), "memory": memory,
              "throttle": memory["numpy"]["throttle"]}
    print(format_table(result), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{args.name or f'cma-model-n{size}-{started:%Y%m%d-%H%M%S}'}.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"# wrote {path}", flush=True)
    return 0
