"""What the workers that run one mode per job share (tests/mpi/resources.py, mismatch.py,
peer_failures.py, threads.py): the world, data that names its call, an error expected within
the timeout, papcoll's names left in /dev/shm, and the run of the mode ``sys.argv`` names."""
import os
import sys
import time

from mpi4py import MPI

import pattern

from papcoll.node import segment

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
TIMEOUT = float(os.environ.get("PAPCOLL_TIMEOUT", "60"))
calls = 0


def fresh(nbytes):
    """(send, want) naming (call, source, destination, word) for a call of nbytes per peer."""
    global calls
    calls += 1
    return (pattern.send_bytes(rank, size, calls, nbytes),
            pattern.recv_bytes(rank, size, calls, nbytes))


def leftovers(pids=None):
    """Names in /dev/shm that papcoll created from this job's processes (``pids``, or gathered
    now: a collective)."""
    pids = world.allgather(os.getpid()) if pids is None else pids
    return [n for n in os.listdir(segment.SHM_DIR)
            if n.startswith(tuple(f"{segment.PREFIX}{p}-" for p in pids))]


def expect(error, fn, *words):
    """Run fn(); it must raise ``error`` whose message holds every one of ``words``, within
    TIMEOUT (+ margin). Returns the error."""
    start = time.monotonic()
    try:
        fn()
    except error as err:
        took = time.monotonic() - start
        assert took < TIMEOUT + 3, f"rank {rank}: {error.__name__} after {took:.1f} s"
        for word in words:
            assert word in str(err), f"rank {rank}: {word!r} not in {err}"
        return err
    raise AssertionError(f"rank {rank}: no {error.__name__}")


def main(modes):
    """Run the mode ``sys.argv[1]`` names (``modes``: name -> function) with the arguments after
    it; then rank 0 prints ``<MODE> OK``."""
    mode, args = sys.argv[1], sys.argv[2:]
    modes[mode](*args)
    world.Barrier()
    if rank == 0:
        print(f"{mode.upper()} OK", flush=True)
