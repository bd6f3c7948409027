"""MPI worker for the user-facing API; valid at any N. Rank 0 prints API OK."""
import os

import numpy as np
from mpi4py import MPI

import papcoll
from papcoll import api, topology
from papcoll.progress import Deadline

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
send = np.arange(size * 2, dtype=np.int64) + 100 * rank
want = np.empty_like(send)
world.Alltoall(send, want)


def raises(error, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except error as err:
        return str(err)
    raise AssertionError(f"{fn} did not raise {error.__name__}")


with papcoll.Communicator(world, trace=True) as pc:
    assert isinstance(pc, MPI.Intracomm) and pc == world
    assert (pc.Get_rank(), pc.Get_size()) == (rank, size)
    assert pc.bcast(rank * 7, root=size - 1) == (size - 1) * 7       # every other method is MPI's
    recv = np.empty_like(send)
    for name in papcoll.algorithms:
        recv[:] = -1
        why = papcoll.algorithms[name].unsupported(pc._context())
        if why and size > 1:       # one node here: forcing a hierarchical one says why not
            assert name in ("shm_direct", "pap_shm_direct"), (name, why)
            assert "is one node" in raises(papcoll.AlgorithmError, pc.Alltoall, send, recv,
                                           algorithm=name)
            continue
        pc.Alltoall(send, recv, algorithm=name)
        assert np.array_equal(recv, want), name
        assert size == 1 or pc.traces[-1]["algorithm"] == name
    assert "unknown algorithm 'nope'" in raises(papcoll.AlgorithmError, pc.Alltoall, send, recv,
                                                algorithm="nope")
    assert "bytes per peer" in raises(papcoll.BufferSpecError, pc.Alltoall, send, recv[:-size])
    dup = pc.Dup()                                  # a Communicator, set up by Dup itself
    dup.Alltoall(send, recv)
    assert np.array_equal(recv, want) and type(dup) is papcoll.Communicator
    dup.close()
    dup.Free()

pc.close()                                          # a second close is harmless
assert "closed" in raises(papcoll.CommunicatorStateError, pc.Alltoall, send, recv)
plain = papcoll.Communicator(world)                 # a shape its plan serves, then closed:
for _ in range(2):
    plain.Alltoall(send, recv, algorithm="mpi")
cache = plain._ctx.cache
assert cache.hits == 1 and np.array_equal(recv, want), cache.hits
plain.close()
assert "closed" in raises(papcoll.CommunicatorStateError, plain.Alltoall, send, recv,
                          algorithm="mpi")
assert cache.hits == 1 and len(cache) == 0

# Communicators papcoll cannot use: papcoll's own error, naming what it got.
assert "got MPI.COMM_NULL" in raises(papcoll.PapcollError, papcoll.Communicator, MPI.COMM_NULL)
if size > 1:
    half = world.Split(rank % 2, rank)
    inter = half.Create_intercomm(0, world, 1 if rank % 2 == 0 else 0, tag=7)   # leaders 0, 1
    assert "got an inter-communicator" in raises(papcoll.PapcollError, papcoll.Communicator, inter)
    inter.Free()
    half.Free()

# The convenience caches one Communicator per communicator and forgets it when that is freed.
comm = world.Dup()
papcoll.Alltoall(comm, send, recv)
cached = api._cached[comm.handle]
papcoll.Alltoall(comm, MPI.IN_PLACE, recv_inplace := send.copy())
assert api._cached[comm.handle] is cached and np.array_equal(recv_inplace, want)
handle = comm.handle
comm.Free()
assert handle not in api._cached and cached.closed

# Emulated nodes: consecutive ranks in nodes of 2 (the last may be smaller), masters = local rank 0.
private = world.Dup()
topo = topology.discover(private, Deadline(30), node_size=2)
assert topo.nodes == [list(range(s, min(s + 2, size))) for s in range(0, size, 2)], topo.nodes
assert topo.node_of[rank] == rank // 2 and topo.local == topo.nodes[rank // 2]
assert topo.masters == list(range(0, size, 2))
assert topo.ppn == min(2, size)
# One real machine here, its processes free to use the same CPUs: crowded when they outnumber them.
assert topo.crowded == (size > len(os.sched_getaffinity(0)))
# Real nodes: one machine here.
assert topology.discover(private, Deadline(30)).nodes == [list(range(size))]
private.Free()

world.Barrier()
if rank == 0:
    print("API OK", flush=True)
