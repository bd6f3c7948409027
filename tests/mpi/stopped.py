"""MPI worker for tests/test_cma.py: ``stopped.py ALGORITHM BLOCK`` under PAPCOLL_NODE_SIZE=2,
N = 4: the master of the second node (rank 2) is stopped (SIGSTOP) for 2 s by its neighbour
(rank 3) in the middle of a loop of calls, then continued; with PAPCOLL_TIMEOUT well above
2 s every call must still deliver exactly its blocks (pattern.py) and nobody may raise.
Rank 0 prints STOPPED ok <seconds of the loop>."""
import os
import signal
import sys
import threading
import time

import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.dirname(__file__))
import pattern

import papcoll

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
name, nbytes = sys.argv[1], int(sys.argv[2])
pids = world.allgather(os.getpid())
calls, STOP_AT, STOPPED = 12, 4, 2.0
started = threading.Event()


def stop_the_master():
    started.wait()
    os.kill(pids[2], signal.SIGSTOP)
    time.sleep(STOPPED)
    os.kill(pids[2], signal.SIGCONT)


with papcoll.Communicator(world) as pc:
    if rank == 3:
        helper = threading.Thread(target=stop_the_master)
        helper.start()
    start = time.monotonic()
    for call in range(1, calls + 1):
        send = pattern.send_bytes(rank, size, call, nbytes)
        want = pattern.recv_bytes(rank, size, call, nbytes)
        recv = np.empty_like(want)
        if call == STOP_AT:
            started.set()
        pc.Alltoall(send, recv, algorithm=name)
        assert np.array_equal(recv, want), pattern.explain(recv, want, nbytes)
    took = time.monotonic() - start
    if rank == 3:
        helper.join()
took = world.allreduce(took, op=MPI.MAX)
assert took >= STOPPED, f"the loop took {took:.2f} s: the master was not stopped inside it"
if rank == 0:
    print(f"STOPPED ok {took:.2f}", flush=True)
