"""MPI worker for tests/test_shm.py: ``segment.py close|kill``.

close: every process writes its own control word and region, then checks everyone else's; the
    name must already be gone from /dev/shm; close() twice.
kill: the last rank kills itself with SIGKILL while the segment is mapped (mpiexec then ends
    the others); the test checks that /dev/shm keeps nothing.
"""
import os
import signal
import sys

from mpi4py import MPI

from papcoll.node import segment as shm
from papcoll.progress import Deadline

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
print(f"PID {rank} {os.getpid()} ", flush=True)
creator = world.bcast(os.getpid(), root=0)

seg = shm.Segment(world, 2 * shm.LINE, 3 * shm.PAGE, Deadline(30))
world.Barrier()             # rank 0 unlinks once all have attached: by now for sure
assert not [n for n in os.listdir(shm.SHM_DIR) if n.startswith(f"{shm.PREFIX}{creator}-")]
seg.words(shm.LINE)[rank] = 100 + rank
seg.region(rank)[:] = rank + 1
world.Barrier()
if sys.argv[1] == "kill" and rank == size - 1:
    os.kill(os.getpid(), signal.SIGKILL)
for peer in range(size):
    assert seg.words(shm.LINE)[peer] == 100 + peer
    assert (seg.region(peer) == peer + 1).all()
world.Barrier()
seg.close()
seg.close()
print(f"SEGMENT ok {rank}", flush=True)
