"""MPI worker (the two-host fabric, N=4): MPI's own Alltoall, nothing of papcoll's, over the
network its environment chose (scripts/vm-init: SOFTROCE_VM_MPI_ENV_*). Every byte is checked
against its source, destination and index, and rank 0 prints the networks the kernel's
counters saw the calls use (bench/fabric.py): ``NETWORKS SIZE NETWORKS``. Every rank prints
``DONE RANK`` before MPI_Finalize, so that a job which prints all of them and still does not
end hung in MPI_Finalize.

It imports neither numpy nor papcoll, and loads bench/fabric.py (standard library only) by its
path: in the emulated guests those imports cost about 15 s of CPU per rank, most of such a job.
"""
import importlib.util
from pathlib import Path

from mpi4py import MPI

spec = importlib.util.spec_from_file_location(
    "fabric", Path(__file__).resolve().parents[2] / "bench" / "fabric.py")
fabric = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fabric)

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
CYCLE = bytes(range(251))


def pattern(src, dst, n):
    """Byte i of the block from src to dst: (src * 31 + dst * 7 + i) % 251."""
    start = (src * 31 + dst * 7) % 251
    return (CYCLE * (n // 251 + 2))[start:start + n]


for nbytes in (8, 65536):
    send = bytearray(b"".join(pattern(rank, q, nbytes) for q in range(size)))
    want = b"".join(pattern(q, rank, nbytes) for q in range(size))
    recv = bytearray(len(send))
    networks = fabric.used(world, lambda s, r: world.Alltoall(s, r), send, recv)
    if recv != want:
        first = next(i for i, (a, b) in enumerate(zip(recv, want)) if a != b)
        raise AssertionError(f"rank {rank}, {nbytes} B: wrong bytes, first at {first}")
    if rank == 0:
        print(f"NETWORKS {nbytes} {fabric.describe(networks)}", flush=True)
world.Barrier()
print(f"DONE {rank}", flush=True)
