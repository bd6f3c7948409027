"""MPI worker (the two-host fabric, N=4): MPI's own Alltoall, nothing of papcoll's, over the
network its environment chose (scripts/vm-init: SOFTROCE_VM_MPI_ENV_*). Every byte is checked
against its source, destination and index, and rank 0 prints the networks the kernel's
counters saw the calls use (papcoll.bench.fabric): ``NETWORKS SIZE NETWORKS``. Every rank
prints ``DONE RANK`` before MPI_Finalize, so that a job which prints all of them and still does
not end hung in MPI_Finalize.
"""
import numpy as np
from mpi4py import MPI

from papcoll.bench import fabric

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()


def pattern(src, dst, n):
    return ((src * 31 + dst * 7 + np.arange(n)) % 251).astype(np.uint8)


for nbytes in (8, 65536):
    send = np.concatenate([pattern(rank, q, nbytes) for q in range(size)])
    want = np.concatenate([pattern(q, rank, nbytes) for q in range(size)])
    recv = np.zeros_like(send)
    networks = fabric.used(world, lambda s, r: world.Alltoall(s, r), send, recv)
    bad = np.flatnonzero(recv != want)
    assert not bad.size, f"rank {rank}, {nbytes} B: {bad.size} wrong bytes, first at {bad[0]}"
    if rank == 0:
        print(f"NETWORKS {nbytes} {fabric.describe(networks)}", flush=True)
world.Barrier()
print(f"DONE {rank}", flush=True)
