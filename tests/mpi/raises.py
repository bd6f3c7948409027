"""A plain mpi4py program (it never imports papcoll), run by tests/test_runner.py: rank 1 ends
with an uncaught error while the others go on to an Alltoall on COMM_WORLD, which it never
joins. ``raises.py WHEN HOW``: WHEN ``first`` (before any Alltoall: the others are setting up
COMM_WORLD's Communicator) or ``later`` (after one: it has a Communicator to close, the others
are in a call); HOW ``raise`` (a RuntimeError naming the rank) or ``exit`` (``sys.exit`` with
that text: status 1)."""
import sys

import numpy as np
from mpi4py import MPI

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
when, how = sys.argv[1:3]
send = np.arange(size, dtype="i8")
recv = np.empty_like(send)
if when == "later":
    world.Alltoall(send, recv)
if rank == 1:
    if how == "exit":
        sys.exit(f"rank {rank} fails on purpose")
    raise RuntimeError(f"rank {rank} fails on purpose")
world.Alltoall(send, recv)
print(f"RESULT rank {rank} finished", flush=True)
