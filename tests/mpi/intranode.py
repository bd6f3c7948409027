"""MPI worker for tests/test_intranode.py: ``intranode.py ALGORITHM``.

The last rank calls Alltoall in a loop and is frozen (SIGSTOP) at a random moment, maybe in
the middle of a call; to its peers it has died. They must get a PapcollTimeoutError naming it
within PAPCOLL_TIMEOUT, and close their Communicator without hanging. Then rank 0 kills it
(SIGKILL), which makes mpiexec end the job; the test checks /dev/shm afterwards.
"""
import os
import random
import signal
import sys
import threading
import time

import numpy as np
from mpi4py import MPI

import papcoll
from papcoll.node import segment as shm

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
victim = size - 1
name = sys.argv[1]
pids = world.allgather(os.getpid())
if rank == 0:
    print("PIDS " + " ".join(map(str, pids)) + " ", flush=True)
survivors = world.Split(0 if rank != victim else MPI.UNDEFINED, rank)

pc = papcoll.Communicator(world)
nbytes = 64 if name == "shm_pap" else 1 << 16
send = np.full(size * nbytes, rank, np.uint8)
recv = np.empty_like(send)
pc.Alltoall(send, recv, algorithm=name)
world.Barrier()

if rank == victim:
    delay = random.Random(os.getpid()).uniform(0.05, 0.3)
    threading.Timer(delay, os.kill, (os.getpid(), signal.SIGSTOP)).start()
    while True:
        pc.Alltoall(send, recv, algorithm=name)

calls = 0
while True:
    start = time.monotonic()
    try:
        pc.Alltoall(send, recv, algorithm=name)
    except papcoll.PapcollTimeoutError as err:
        print(f"TIMEOUT rank {rank} missing {err.missing} after {time.monotonic() - start:.2f} s"
              f" and {calls} calls ", flush=True)
        break
    assert (recv.reshape(size, nbytes) == np.arange(size, dtype=np.uint8)[:, None]).all()
    calls += 1
pc.close()
left = [n for n in os.listdir(shm.SHM_DIR) if n.startswith(tuple(f"{shm.PREFIX}{p}-" for p in pids))]
print(f"CLOSED rank {rank} leftovers {left} ", flush=True)
survivors.Barrier()
if rank == 0:
    os.kill(pids[victim], signal.SIGKILL)
time.sleep(30)      # mpiexec ends us now that a rank died
