"""The CMA cost model's measurement (papcoll/model/cma.py says what it measures and how), as a
benchmark on both kinds of memory:

    mpiexec -n 3 python -m mpi4py -m papcoll.bench cma-model

numpy arrays as users allocate them (large ones may get transparent huge pages) and 4 KiB pages.
"""
import datetime
import json
import mmap
import platform
from pathlib import Path

import numpy as np
from mpi4py import MPI

from papcoll import native
from papcoll.model import cma
from papcoll.outfile import out_folder
from papcoll.progress import idle_barrier


THP = "/sys/kernel/mm/transparent_hugepage/enabled"


def add_arguments(parser):
    parser.add_argument("--pages", type=int, default=256,
                        help="N: pages per probe, at most 1024 (default 256)")
    parser.add_argument("--reps", type=int, default=200, help="calls per probe (default 200)")
    parser.add_argument("--out", type=out_folder, default=Path("results"),
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


def measure(comm, kind, args):
    """The model's terms for one kind of memory, on rank 0."""
    size = comm.Get_size()
    memory = (target_memory(kind, (size - 1) * args.pages * mmap.PAGESIZE)
              if comm.Get_rank() == 0 else None)
    return cma.measure(comm, memory, args.pages, args.reps, lambda: idle_barrier(comm))


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
