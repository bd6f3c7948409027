"""MPI worker for the cached plans (native/papcoll_call.c): shm_pap's, or those of the
algorithm PAPCOLL_ALGORITHM names (``mpi``: MPI_Alltoall; ``pap_direct``: the one-sided
engine's copy-based calls; ``shm_direct``, ``pap_shm_direct``: the hierarchical call in C, with
PAPCOLL_NODE_SIZE making several nodes); valid at any N on one node, and at any N of several
nodes for the hierarchical ones. Calls of a planned shape must skip
papcoll's Python path and still deliver exactly what MPI_Alltoall does, MPI.IN_PLACE and
[buf, datatype] specs included; every call the plan cannot serve (a changed format or
datatype, a read-only or overlapping buffer, other spec forms) must fall back to the full path
and get its result or its error. Rank 0 prints PLAN OK."""
import os
import sys
import time

import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.dirname(__file__))
import pattern

import papcoll
from papcoll import api

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
NBYTES = 40          # bytes per peer: a multiple of every item size below
full_path = 0        # calls that went through papcoll's Python path


def counting(parse):
    def wrapper(*args):
        global full_path
        full_path += 1
        return parse(*args)
    return wrapper


api.parse_alltoall = counting(api.parse_alltoall)
calls = 0


def data(dtype=np.uint8):
    """Fresh send data naming (call, source, destination, index), the receive buffer, and what
    MPI_Alltoall itself delivers for it."""
    global calls
    calls += 1
    send = pattern.send_bytes(rank, size, calls, NBYTES)
    want = np.empty_like(send)
    world.Alltoall(send, want)
    assert np.array_equal(want, pattern.recv_bytes(rank, size, calls, NBYTES))
    return send.view(dtype), np.zeros(size * NBYTES, np.uint8).view(dtype), want


def expect(path, fn):
    """Run fn() and check which path it took: 'plan' or 'full'."""
    before = full_path
    fn()
    took = "full" if full_path > before else "plan"
    assert took == path, f"rank {rank}: call {calls} took the {took} path, not the {path} one"


def raises(error, text, fn):
    try:
        fn()
    except error as err:
        assert text in str(err), err
        return
    raise AssertionError(f"rank {rank}: call {calls} did not raise {error.__name__}")


with papcoll.Communicator(world) as pc:
    # At N = 1 too, where every plan is MPI's (the copy), named as resolved.
    send, recv, want = data()
    expect("full", lambda: pc.Alltoall(send, recv))          # leaves a plan
    assert np.array_equal(recv, want)
    plan = pc._context().cache.plans(("a", None))[0]
    armed = plan.chosen
    assert armed == pc.chosen == os.environ.get("PAPCOLL_ALGORITHM", "shm_pap"), armed
    assert plan.algorithm.name == (armed if size > 1 else "mpi"), plan.algorithm.name
    for _ in range(20):                                      # same shape, fresh buffers
        send, recv, want = data()
        expect("plan", lambda s=send, r=recv: pc.Alltoall(s, r))
        assert np.array_equal(recv, want)
    send, recv, want = data()                                # explicit name: its own plan
    expect("full", lambda: pc.Alltoall(send, recv, algorithm=armed))
    send, recv, want = data()
    expect("plan", lambda: pc.Alltoall(send, recv, algorithm=armed))
    assert np.array_equal(recv, want)

    send, recv, want = data(np.int32)                        # another format: full, re-binds
    expect("full", lambda: pc.Alltoall(send, recv))
    assert np.array_equal(recv.view(np.uint8), want)
    send, recv, want = data(np.int32)                        # bytes to int32: 'B' != 'i'
    raises(papcoll.BufferSpecError, "does not match",
           lambda: pc.Alltoall(bytearray(send.tobytes()), recv))
    send, recv, want = data(np.int32)
    expect("plan", lambda: pc.Alltoall(send, recv))
    assert np.array_equal(recv.view(np.uint8), want)

    send, recv, want = data(np.int32)                        # 2-D, Fortran order: full
    s2, r2 = (np.asfortranarray(a.reshape(size, -1).T) for a in (send, recv))
    # (At N = 1 that is an (n, 1) array, C-contiguous too: the plan's.)
    expect("full" if size > 1 else "plan", lambda: pc.Alltoall(s2, r2))
    assert np.array_equal(np.ascontiguousarray(r2.T).view(np.uint8).ravel(), want)

    send, recv, want = data(np.int32)                        # the full path's errors
    recv.flags.writeable = False
    raises(papcoll.BufferSpecError, "read-only", lambda: pc.Alltoall(send, recv))
    both = np.zeros(2 * size * NBYTES // 4, np.int32)
    raises(papcoll.BufferSpecError, "overlap",
           lambda: pc.Alltoall(both[:size * NBYTES // 4], both[1:size * NBYTES // 4 + 1]))
    raises(papcoll.BufferSpecError, "does not match",
           lambda: pc.Alltoall(send.view(np.float32), recv.copy()))

    send, recv, want = data(np.int32)                        # IN_PLACE: the same shape
    recv[:] = send
    expect("plan", lambda: pc.Alltoall(MPI.IN_PLACE, recv))
    assert np.array_equal(recv.view(np.uint8), want)
    send, recv, want = data(np.float64)                      # a plan bound IN_PLACE...
    recv[:] = send
    expect("full", lambda: pc.Alltoall(MPI.IN_PLACE, recv))
    assert np.array_equal(recv.view(np.uint8), want)
    send, recv, want = data(np.float64)                      # ...serves send/recv calls
    expect("plan", lambda: pc.Alltoall(send, recv))
    assert np.array_equal(recv.view(np.uint8), want)
    raises(papcoll.BufferSpecError, "only valid as sendbuf",
           lambda: pc.Alltoall(send, MPI.IN_PLACE))
    send, recv, want = data(np.float64)                      # [buf, datatype]: own plan
    expect("full", lambda: pc.Alltoall([send, MPI.DOUBLE], [recv, MPI.DOUBLE]))
    assert np.array_equal(recv.view(np.uint8), want)
    send, recv, want = data(np.uint8)                        # the datatype says what the
    expect("plan", lambda: pc.Alltoall((send, MPI.DOUBLE), [recv, MPI.DOUBLE]))   # bytes are
    assert np.array_equal(recv, want)
    send, recv, want = data(np.float64)
    recv[:] = send
    expect("plan", lambda: pc.Alltoall(MPI.IN_PLACE, [recv, MPI.DOUBLE]))
    assert np.array_equal(recv.view(np.uint8), want)
    send, recv, want = data(np.float64)                      # another datatype, or none
    expect("full", lambda: pc.Alltoall([send, MPI.INT64_T], [recv, MPI.INT64_T]))
    assert np.array_equal(recv.view(np.uint8), want)
    send, recv, want = data(np.float64)
    raises(papcoll.BufferSpecError, "does not match",
           lambda: pc.Alltoall([send, MPI.INT64_T], [recv, MPI.DOUBLE]))
    expect("full", lambda: pc.Alltoall([send, MPI.INT64_T], recv.view(np.int64)))
    assert np.array_equal(recv.view(np.uint8), want)
    send, recv, want = data(np.float64)                      # counts: the full path
    expect("full", lambda: pc.Alltoall([send, NBYTES // 8, MPI.DOUBLE],
                                       [recv, NBYTES // 8, MPI.DOUBLE]))
    assert np.array_equal(recv.view(np.uint8), want)

    if os.environ.get("PAPCOLL_ALGORITHM") == "pap_direct" and size > 1:
        # Planned calls between zero-copy ones (PAPCOLL_COPY_THRESHOLD=64): a peer one call
        # ahead has advertised for its next, zero-copy call -- no disagreement.
        rng = np.random.default_rng(calls)
        for i in range(40):
            nbytes = 8 if i % 3 else 128
            send = pattern.send_bytes(rank, size, i, nbytes)
            want, recv = np.empty_like(send), np.zeros_like(send)
            world.Alltoall(send, want)
            if rng.integers(size) == rank:
                time.sleep(float(rng.uniform(0, 2e-3)))
            pc.Alltoall(send, recv)
            assert np.array_equal(recv, want), f"rank {rank}: call {i} of {nbytes} bytes"

world.Barrier()
if rank == 0:
    print("PLAN OK", flush=True)
