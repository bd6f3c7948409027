"""MPI worker for tests/test_cma.py: ``cma.py primitives|throttle|fallback``.

primitives: every one-to-all and all-to-one primitive of CmaNode, every root, several throttle
    factors, random arrival delays; data checked. Prints PRIMITIVES ok.
throttle: the first reader after the root arrives late; with k = 1 the next reader must wait
    for it, with parallel reads it must not. Prints THROTTLE ok.
fallback: CMA made to fail (EPERM from the test read, or from PR_SET_PTRACER): every process
    learns the same one-line reason, cma_pap declines to run, the policy picks shm_pap.
    Prints FALLBACK <reason>.
hierarchical [refused]: run with PAPCOLL_NODE_SIZE; shm_direct and pap_shm_direct at block sizes
    on both sides of shm_layout.CMA_BLOCK, with and without IN_PLACE, random delays, against
    MPI_Alltoall; a node's blocks above it go by CMA -- or, ``refused`` (PR_SET_PTRACER fails
    on every process), through the board at every size. Prints HIERARCHICAL ok <cma>.
"""
import errno
import random
import sys
import time

import numpy as np
from mpi4py import MPI

import papcoll
from papcoll import native
from papcoll.algorithms import cma_pap, policy, shm_layout
from papcoll.errors import TransportError
from papcoll.node.board import NodeBoard
from papcoll.node.cma import CmaNode
from papcoll.progress import Deadline

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()


def cma_node(timeout=30):
    """A CmaNode over a node board of its own (papcoll makes them per Communicator)."""
    deadline = Deadline(timeout)
    return CmaNode(NodeBoard(world, range(size), deadline), world, deadline, timeout)


def block(src, dst, nbytes, salt):
    return np.full(nbytes, (src * 31 + dst * 7 + salt) % 251, np.uint8)


def primitives():
    node = cma_node()
    assert node.available, node.reason
    delays = random.Random(rank)
    salt = 0
    for nbytes in (1, 4096, 70001):
        for root in range(size):
            for k in (None, 1, 2):
                salt += 1
                send = np.concatenate([block(root, q, nbytes, salt) for q in range(size)])
                recv = np.zeros(nbytes, np.uint8)
                time.sleep(delays.random() * 1e-3)
                node.scatter_read(root, send if rank == root else None, recv, k)
                assert (recv == block(root, rank, nbytes, salt)).all(), ("scatter_read", k)
                recv[:] = 0
                node.scatter_write(root, send if rank == root else None, recv)
                assert (recv == block(root, rank, nbytes, salt)).all(), "scatter_write"

                mine = block(rank, root, nbytes, salt)
                want = np.concatenate([block(q, root, nbytes, salt) for q in range(size)])
                out = np.zeros(size * nbytes, np.uint8) if rank == root else None
                node.gather_write(root, mine, out, k)
                assert rank != root or (out == want).all(), ("gather_write", k)
                out = np.zeros(size * nbytes, np.uint8) if rank == root else None
                node.gather_read(root, mine, out)
                assert rank != root or (out == want).all(), "gather_read"
    node.close()
    node.close()
    print(f"PRIMITIVES ok {rank}", flush=True)


def throttle():
    node = cma_node()
    late, second = 1 % size, 2 % size             # root 0; readers in order 1, 2, ...
    nbytes = 1 << 16
    send = np.zeros(size * nbytes, np.uint8) if rank == 0 else None
    recv = np.zeros(nbytes, np.uint8)
    took = {}
    for k in (1, None):
        world.Barrier()
        start = time.monotonic()
        if rank == late:
            time.sleep(0.3)
        node.scatter_read(0, send, recv, k)
        took[k] = time.monotonic() - start
    node.close()
    if rank == second:
        assert took[1] >= 0.25, f"k=1: the second reader did not wait ({took[1]:.3f} s)"
        assert took[None] < 0.25, f"parallel: the second reader waited ({took[None]:.3f} s)"
    print(f"THROTTLE ok {rank}", flush=True)


def fallback(what):
    def refuse(*args, **kwargs):
        raise TransportError(errno.EPERM, "simulated: Operation not permitted")

    if what == "read" and rank == size - 1:        # one process alone cannot read its peers
        native.cma_read = refuse
    if what == "ptracer":
        native.allow_ptrace_any = refuse
    node = cma_node()
    reasons = world.allgather(node.reason)
    assert not node.available and len(set(reasons)) == 1, reasons
    assert "\n" not in node.reason and "Operation not permitted" in node.reason, node.reason
    try:
        node.scatter_read(0, None, np.zeros(1, np.uint8))
        raise AssertionError("a primitive ran without CMA")
    except TransportError:
        pass
    node.close()
    with papcoll.Communicator(world) as pc:
        ctx = pc._context()
        reason = cma_pap.CmaPap.unsupported(ctx)
        assert reason and reason.startswith("CMA: unavailable"), reason
        assert policy.choose(ctx, 1 << 20) == "shm_pap", policy.choose(ctx, 1 << 20)
        send = np.full(size * 8, rank, np.uint8)
        recv = np.empty_like(send)
        pc.Alltoall(send, recv)                    # chosen by the policy: runs, and right
        assert (recv.reshape(size, 8) == np.arange(size)[:, None]).all()
    if rank == 0:
        print(f"FALLBACK {reason}", flush=True)


def hierarchical(refused):
    if refused:
        native.allow_ptrace_any = lambda: (_ for _ in ()).throw(
            TransportError(errno.EPERM, "simulated: Operation not permitted"))
    rng = random.Random(rank)
    with papcoll.Communicator(world) as pc:
        for name in ("shm_direct", "pap_shm_direct"):
            for block in (24, shm_layout.CMA_BLOCK, shm_layout.CMA_BLOCK + 8, 300_008):
                for in_place in (False, True):
                    items = block // 8           # float64: the source, destination and index
                    send = (rank * 1e9 + np.arange(size)[:, None] * 1e6
                            + np.arange(items)).ravel()
                    want = np.empty_like(send)
                    world.Alltoall(send, want)
                    got = send.copy() if in_place else np.empty_like(send)
                    time.sleep(rng.random() * 0.002)
                    pc.Alltoall(MPI.IN_PLACE if in_place else send, got, algorithm=name)
                    assert np.array_equal(got, want), (name, block, in_place)
            algo = pc._context().algorithms[name]
            assert algo.cma is not refused, (name, algo.cma)
            assert algo.by_cma(300_008) is not refused and not algo.by_cma(shm_layout.CMA_BLOCK)
    if rank == 0:
        print(f"HIERARCHICAL ok {not refused}", flush=True)


mode = sys.argv[1]
if mode == "hierarchical":
    hierarchical(sys.argv[2:] == ["refused"])
elif mode == "primitives":
    primitives()
elif mode == "throttle":
    throttle()
else:
    fallback(sys.argv[2])
