"""A plain mpi4py program, run by tests/test_runner.py both as ``python -m mpi4py
unmodified.py`` and as ``python -m papcoll run unmodified.py``: it never imports papcoll.

``unmodified.py [fail]``: Alltoall on COMM_WORLD (twice), COMM_SELF, and on communicators
made by Dup, Split, Split_type, Create, Create_group, Create_cart and its Sub (one call each:
ALLTOALLS per rank), checked against data that names source, destination and index; one
Alltoallv, one Alltoallw of a strided type on the Cartesian Sub, an Ialltoall and a persistent
Alltoall_init (MPI's under the runner too), and one unbound ``MPI.Comm.Alltoall``. Each rank prints ``RESULT rank types
checksum``. ``fail``: the last rank raises after its first call."""
import sys
import zlib

import numpy as np
from mpi4py import MPI

ALLTOALLS = 10
world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
crc = 0


def check(comm, count=5):
    """One Alltoall on ``comm`` of ``count`` float64 per peer, checked."""
    global crc
    me, n = comm.Get_rank(), comm.Get_size()
    send = (me * 1e6 + np.arange(n)[:, None] * 1e3 + np.arange(count)).ravel()
    recv = np.empty_like(send)
    comm.Alltoall(send, recv)
    want = (np.arange(n)[:, None] * 1e6 + me * 1e3 + np.arange(count)).ravel()
    assert np.array_equal(recv, want), (type(comm).__name__, me, recv, want)
    crc = zlib.crc32(recv.tobytes(), crc)


check(world)
if sys.argv[1:] == ["fail"] and rank == size - 1:
    raise RuntimeError("this rank fails on purpose")
check(world, 1001)
check(MPI.COMM_SELF)
made = [world.Dup(), world.Split(rank % 2, -rank), world.Split_type(MPI.COMM_TYPE_SHARED),
        world.Create(world.Get_group()), world.Create_group(world.Get_group().Excl([]))]
cart = world.Create_cart([size], periods=[True])
row = cart.Sub([True])
for comm in made + [cart, row]:
    check(comm)
counts = np.arange(size, dtype="i4") + rank          # Alltoallv: rank r sends r + q to q
send = np.full(int(counts.sum()), rank, "i4")
recv_counts = np.array([q + rank for q in range(size)], "i4")
recv = np.empty(int(recv_counts.sum()), "i4")
world.Alltoallv([send, counts], [recv, recv_counts])
assert np.array_equal(recv, np.repeat(np.arange(size, dtype="i4"), recv_counts))
vec = MPI.INT64_T.Create_vector(2, 1, 3).Commit()   # Alltoallw: elements 0 and 3 of 4 per peer
n = row.Get_size()
send = (np.arange(4 * n) + 100 * rank).astype("i8")
recv = np.full(4 * n, -1, "i8")
spec = ([1] * n, [32 * q for q in range(n)])
row.Alltoallw([send, spec, [vec] * n], [recv, spec, [vec] * n])
for q in range(n):
    assert list(recv[4 * q:4 * q + 4]) == [100 * q + 4 * row.Get_rank(), -1, -1,
                                           100 * q + 4 * row.Get_rank() + 3], recv
vec.Free()
crc = zlib.crc32(recv.tobytes(), crc)
send = np.arange(size, dtype="i8") + 10 * rank
recv = np.empty_like(send)
world.Ialltoall(send, recv).Wait()
assert np.array_equal(recv, np.arange(size) * 10 + rank)
request = world.Alltoall_init(send, recv)
for _ in range(3):
    request.Start()
    MPI.Request.Waitall([request])
assert np.array_equal(recv, np.arange(size) * 10 + rank)
request.Free()
send = np.full(size, rank, "i8")
recv = np.empty_like(send)
MPI.Comm.Alltoall(world, send, recv)                # unbound: MPI's own, not counted
assert np.array_equal(recv, np.arange(size))
types = ",".join(type(c).__name__ for c in [world, made[0], made[1], cart, row])
for comm in made + [row, cart]:
    comm.Free()
print(f"RESULT {rank} {types} {crc:08x}", flush=True)
