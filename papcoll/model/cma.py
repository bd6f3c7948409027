"""The CMA cost model's measurement (Chakraborty et al., "Contention-aware kernel-assisted MPI
collectives"), shared by ``model calibrate`` and ``papcoll.bench cma-model``:

    t = alpha + n beta + l gamma_c ceil(n / s)

alpha: syscall + access check; beta: per byte copied; l: lock and pin one page; s: page size;
gamma_c: how much longer pinning takes with c processes reading one process at once.

Rank 0 is the process everyone reads (it waits); readers time process_vm_readv calls with
native.cma_probe (its header: on Linux a 0-byte local iovec returns before pinning anything, so
1-byte local iovecs isolate the steps), taking medians of ``reps`` calls:

    T1 = 0-byte local, 1-byte remote            syscall only
    T2 = 1-byte local, 1-byte remote            alpha = T2
    T3 = 1-byte local, remote of N pages        l = (T3 - T2) / N    (pins N pages, copies 1 B)
    T4 = N pages local and remote               beta = (T4 - T3) / (N s)

gamma_c = (T3 with c readers at once - T2) / (T3 with one reader - T2), for c = 1 .. ranks - 1,
each reader on its own pages of rank 0 (both in the same loop, so gamma_1 = 1). Readers only
contend while they run at once: with more readers than free cores gamma_c says little. The
aggregate throughput of c readers copying N pages each (all bytes over the wall time of the
batch) gives the throttle factor: the c that moves the most bytes per second.
"""
import mmap
import os
import time

import numpy as np

from .. import native


def probe(pid, address, reps, local_bytes, remote_bytes):
    """The median ns of ``reps`` reads of ``remote_bytes`` at ``address`` of process ``pid``
    into ``local_bytes``."""
    local = None if local_bytes == 0 else np.zeros(local_bytes, np.uint8)
    return float(np.median(native.cma_probe(pid, address, remote_bytes, local=local, reps=reps)))


def measure(comm, memory, pages, reps, barrier):
    """The model's terms, on rank 0 of ``comm`` (one node): ``memory`` is rank 0's, at least
    (size - 1) x ``pages`` pages, resident, and readable by the others (native.allow_ptrace_any);
    ``barrier()`` waits for every rank. None elsewhere."""
    rank, size = comm.Get_rank(), comm.Get_size()
    n, span = pages, pages * mmap.PAGESIZE
    pid, base = comm.bcast((os.getpid(), memory.ctypes.data) if rank == 0 else None, root=0)
    mine = base + (rank - 1) * span if rank else 0
    result = {}
    if rank == 1:
        t1, t2, t3, t4 = (probe(pid, mine, reps, local, remote)
                          for local, remote in ((0, 1), (1, 1), (1, span), (span, span)))
        result = {"T1_us": t1 / 1e3, "T2_us": t2 / 1e3, "T3_us": t3 / 1e3, "T4_us": t4 / 1e3,
                  "alpha_us": t2 / 1e3, "l_us": (t3 - t2) / n / 1e3,
                  "beta_ns_per_byte": (t4 - t3) / span, "bandwidth_GBps": span / (t4 - t3)}
    barrier()
    pins, copies = {}, {}
    for c in range(1, size):
        barrier()
        if 1 <= rank <= c:
            pins[c] = probe(pid, mine, reps, 1, span)
        barrier()
        if 1 <= rank <= c:              # wall clock of the whole batch: CLOCK_MONOTONIC is
            start = time.monotonic()    # one clock for every process of the machine
            probe(pid, mine, reps, span, span)
            copies[c] = (start, time.monotonic())
        barrier()
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
        throughput[c] = c * reps * span / wall / 1e9
    best = max(throughput, key=throughput.get)
    return {**result, "gamma": gamma, "throughput_GBps": throughput, "throttle": best}
