"""MPI worker for tests/test_topology.py: emulated nodes (PAPCOLL_NODE_SIZE=k) follow the
process, not the communicator. Run on 4 processes with PAPCOLL_NODE_SIZE=2: world ranks {0, 1}
and {2, 3} are the two emulated nodes, and every communicator of these processes must see them
so -- the rows and columns of a 2 x 2 grid (Split by rank % 2 and by rank // 2, as a pencil
FFT's Sub communicators are), and a communicator whose ranks order the world's 0, 2, 1, 3 (its
nodes hold non-consecutive ranks). Each is crowded exactly when the job's 4 processes
outnumber the machine's cores. On each, Alltoall by the algorithms valid there against MPI's
own, on data naming source, destination and index, at a small and a large (CMA) block size.
Rank 0 prints SUBNODES OK."""
import os

import numpy as np
from mpi4py import MPI

import papcoll

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
K = 2
assert size == 4, "run on 4 processes"


def expected_nodes(comm):
    """The ranks of ``comm`` grouped by their world rank // K, nodes ordered by lowest rank."""
    worlds = comm.allgather(rank)
    groups = {}
    for r, w in enumerate(worlds):
        groups.setdefault(w // K, []).append(r)
    return sorted(groups.values())


def values(src, dst, n):
    return src * 10 ** 9 + dst * 10 ** 7 + np.arange(n, dtype=np.int64)


def check(pc, label):
    topo = pc._ctx.topology
    want = expected_nodes(pc)
    assert topo.nodes == want, (label, rank, topo.nodes, want)
    assert topo.emulated
    # One machine: crowded by the job's 4 processes where they outnumber its cores, whatever
    # this communicator holds (a row of 2 on 2 cores shares them with the other row).
    assert topo.crowded == topo.crowded_anywhere == (size > (os.cpu_count() or 1)), label
    worlds = pc.allgather(rank)
    for node in topo.nodes:           # one emulated node of the world per node, whole
        assert len({worlds[r] // K for r in node}) == 1, (label, topo.nodes, worlds)
    n_nodes = len(topo.nodes)
    algorithms = ["mpi", "pap_direct"] + (["pap_shm_direct", "shm_direct"] if n_nodes > 1
                                          else ["shm_pap"])
    n = pc.Get_size()
    for words in (3, 40_000):         # 24 B, 320 KB per peer (above CMA_BLOCK)
        send = np.concatenate([values(rank, worlds[q], words) for q in range(n)])
        want = np.empty_like(send)
        pc.Alltoall(send, want, algorithm="mpi")
        MPI.Intracomm.Alltoall(pc, send, want)          # MPI's own call on this communicator
        assert np.array_equal(want, np.concatenate(
            [values(worlds[q], rank, words) for q in range(n)])), label
        for name in algorithms:
            for _ in range(3):         # the full path, then the plan
                got = np.full_like(send, -1)
                pc.Alltoall(send, got, algorithm=name)
                assert np.array_equal(got, want), (label, name, words, rank)
                assert pc.chosen == name, (pc.chosen, name)
    return n_nodes


pc = papcoll.Communicator(world)
made = {
    "world": pc,
    "rows (rank % 2)": pc.Split(rank % 2, rank),
    "columns (rank // 2)": pc.Split(rank // 2, rank),
    "permuted (0, 2, 1, 3)": pc.Split(0, [0, 2, 1, 3][rank]),
    "plain Split, then Communicator": papcoll.Communicator(world.Split(rank % 2, rank)),
}
nodes = {label: check(comm, label) for label, comm in made.items()}
assert nodes == {"world": 2, "rows (rank % 2)": 2, "columns (rank // 2)": 1,
                 "permuted (0, 2, 1, 3)": 2, "plain Split, then Communicator": 2}, nodes
assert made["permuted (0, 2, 1, 3)"]._ctx.topology.nodes == [[0, 2], [1, 3]]
for label, comm in made.items():
    comm.close()
    if label != "world":
        comm.Free()

world.Barrier()
if rank == 0:
    print("SUBNODES OK", flush=True)
