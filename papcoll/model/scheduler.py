"""calibrate's measures of flags in shared memory: ``flag``, a store until another core sees
it, and ``wake``, what the scheduler adds to a wait where processes outnumber cores
(params.py). Each process waits in C (native.Flags), as papcoll's calls do."""
import time
from contextlib import contextmanager

import numpy as np
from mpi4py import MPI

from .. import native
from .timing import usual


@contextmanager
def shared_flags(node):
    """One flag a process of ``node`` (one machine), a cache line apart, in memory they share,
    each side waiting in C (native.Flags); freed after."""
    win = MPI.Win.Allocate_shared(64 * node.Get_size() if node.Get_rank() == 0 else 0, 8,
                                  comm=node)
    try:
        buf, _ = win.Shared_query(0)
        yield native.Flags(np.frombuffer(buf, np.uint64)[::8])
    finally:
        win.Free()


def flag_time(node, timeout):
    """Half the usual round trip of a flag between ranks 0 and 1 of ``node`` (one machine)."""
    me = node.Get_rank()
    with shared_flags(node) as flags:
        node.Barrier()
        times = []
        for k in range(1, 201):
            start = time.perf_counter()
            if me == 0:
                flags.store(0, k)
                ok = flags.wait_ge(1, k, timeout)
            else:
                ok = flags.wait_ge(0, k, timeout)
                flags.store(1, k)
            if not ok:
                raise TimeoutError("model calibrate: the flag's partner never answered")
            times.append(time.perf_counter() - start)
        node.Barrier()
    return usual(times) / 2


def wake_time(node, flag, timeout, rounds=600):
    """What a wait that has to wait adds where processes outnumber cores: rounds in which every
    process of ``node`` (one machine) raises its flag and waits for all the others', as every
    process of a call waits for the others; on rank 0, the mean of the quickest 95 % of rounds,
    less ``flag``. A round needs every process on a core, so where they outnumber the cores it
    pays the scheduler; where they do not, it is about ``flag``. The mean, since the model
    charges it to every wait that waits and so adds it up; rounds are either quick (all on a
    core) or a scheduler's slice, and the median jumped between the two from run to run. The
    slowest 5 % are another program's preemptions, not the scheduler's usual cost."""
    n, me = node.Get_size(), node.Get_rank()
    with shared_flags(node) as flags:
        node.Barrier()
        times = []
        for k in range(1, rounds + 1):
            start = time.perf_counter()
            flags.store(me, k)
            if not all(flags.wait_ge(q, k, timeout) for q in range(n) if q != me):
                raise TimeoutError("model calibrate: a process of rank 0's machine stopped "
                                   "raising its flag")
            times.append(time.perf_counter() - start)
        node.Barrier()
    return None if me else max(0.0, usual(times) - flag)
