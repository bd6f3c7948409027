"""MPI worker: blame in a hierarchical call falls on the rank really missing (N=4 as 2 nodes of
2). Rank 0, a master, freezes (SIGSTOP, as if dead) in call CALL once it has posted its blocks;
rank 2, the other master, arrives a second late, so it gives up only after rank 1 -- the
non-master on the frozen master's node -- has reached its deadline. Rank 1 waits for remote
blocks, which reach it only through its master: it must name rank 0 (and may name rank 2,
which has not given up yet either).

    blame.py ALGORITHM

Every survivor prints ``BLAME rank r: missing [...]``; rank 1 prints ``BLAME OK`` when it named
rank 0. Survivors leave with os._exit (MPI_Finalize would wait for the frozen rank).
"""
import os
import signal
import sys
import time

import numpy as np
from mpi4py import MPI

import papcoll
from papcoll.algorithms import shm_direct

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
name, CALL, BLOCK = sys.argv[1], 3, 64
assert size == 4, "N=4 as 2 nodes of 2"

if rank == 0:
    finish = shm_direct.ShmDirect.finish

    def freezing(self, *args):
        if self.ctx.calls == CALL:
            os.kill(os.getpid(), signal.SIGSTOP)
        return finish(self, *args)
    shm_direct.ShmDirect.finish = freezing

# Rank 0 traces, so that its calls take the Python path, where it freezes; the others' repeated
# calls run natively (the algorithm's plan), whose waits must blame as the Python path's do.
pc = papcoll.Communicator(world, trace="phases" if rank == 0 else False)
send = np.full(size * BLOCK, rank, np.uint8)
recv = np.empty_like(send)
for call in range(1, CALL + 1):
    if call == CALL and rank == 2:
        time.sleep(1.0)
    try:
        pc.Alltoall(send, recv, algorithm=name)
    except papcoll.PapcollTimeoutError as err:
        os.write(1, f"BLAME rank {rank}: missing {err.missing} gave up {err.gave_up}: {err}\n"
                    .encode())
        if rank == 1 and 0 in err.missing:
            os.write(1, b"BLAME OK\n")
        break
time.sleep(2.0)          # let the others report: a process leaving without MPI_Finalize ends
                         # the job (hydra)
os._exit(0)
