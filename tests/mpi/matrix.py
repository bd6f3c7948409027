"""MPI worker: every registered algorithm against MPI_Alltoall on the same inputs.

Run as ``mpiexec -n N python -m mpi4py tests/mpi/matrix.py [ALGORITHM...]`` (all algorithms by
default). Valid at any N. Rank 0 prints one PASS line per algorithm, or SKIP with the reason for
one that cannot run on this topology; any mismatch raises, and ``-m mpi4py`` then aborts every
rank.
"""
import os
import random
import sys
import time

import numpy as np
from mpi4py import MPI
from mpi4py.util.dtlib import from_numpy_dtype

sys.path.insert(0, os.path.dirname(__file__))
import pattern  # noqa: E402

import papcoll  # noqa: E402
from papcoll import transport  # noqa: E402

if os.environ.get("PAPCOLL_TEST_BROKEN"):
    import broken  # noqa: F401,E402  (registers deliberately wrong algorithms)

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
QUICK = bool(os.environ.get("PAPCOLL_TEST_QUICK"))  # fewer cases, for emulated RDMA
SIZES = [0, 1, 7, 8, 4096, 65537, 1 << 20]           # bytes per peer
DTYPES = [np.uint8, np.float64] if QUICK else [np.uint8, np.int32, np.float64, np.complex128]
FORMS = ("plain", "in_place") if QUICK else ("plain", "typed", "counted", "in_place")
GUARD = 32                                           # bytes after the message that must stay intact
calls = 0                                            # every call's data carries its number


def next_call():
    global calls
    calls += 1
    return calls


def check(name, got, want, nbytes, what):
    if not np.array_equal(got, want):
        raise AssertionError(f"{name}, rank {rank}, {what}: {pattern.explain(got, want, nbytes)}")


def one_call(pc, name, count, dtype, form):
    """One Alltoall of ``count`` elements of ``dtype`` per peer, compared with MPI_Alltoall."""
    call = next_call()
    nbytes = count * np.dtype(dtype).itemsize
    src = pattern.send_bytes(rank, size, call, nbytes)
    want = pattern.recv_bytes(rank, size, call, nbytes)
    recv = np.full(size * nbytes + GUARD, 0xA5, np.uint8)
    body = recv[:size * nbytes]
    mpitype = from_numpy_dtype(dtype)
    if form == "in_place":
        body[:] = src
        pc.Alltoall(MPI.IN_PLACE, body.view(dtype), algorithm=name)
    elif form == "plain" and dtype is np.uint8:      # bytearray and memoryview
        pc.Alltoall(bytearray(src.tobytes()), memoryview(body), algorithm=name)
    elif form == "plain":
        pc.Alltoall(src.view(dtype), body.view(dtype), algorithm=name)
    elif form == "typed":
        pc.Alltoall([src.view(dtype), mpitype], [body.view(dtype), mpitype], algorithm=name)
    else:  # [buf, count, datatype] on buffers longer than the message
        longer = np.concatenate([src, np.full(GUARD, 0x5A, np.uint8)])
        pc.Alltoall([longer.view(dtype), count, mpitype], [recv.view(dtype), count, mpitype],
                    algorithm=name)
    reference = np.empty(size * nbytes, np.uint8)
    world.Alltoall(src, reference)
    what = f"{form}, {count} x {np.dtype(dtype)} per peer"
    check(name, reference, want, nbytes, f"MPI_Alltoall itself, {what}")
    check(name, body, reference, nbytes, what)
    check(name, recv[size * nbytes:], np.full(GUARD, 0xA5, np.uint8), nbytes, f"guard, {what}")


def matrix(pc, name):
    cases = 0
    for dtype in DTYPES:
        counts = sorted({s // np.dtype(dtype).itemsize for s in SIZES} | {3})
        for count in counts:
            for form in FORMS:
                one_call(pc, name, count, dtype, form)
                cases += 1
    return cases


def repeated(pc, name, ncalls):
    """Back-to-back calls, varying sizes (same on every rank), random arrival delays."""
    shared = random.Random(1234)
    mine = random.Random(rank * 7919 + 1)
    for _ in range(ncalls):
        nbytes = shared.choice([0, 1, 3, 8, 13, 256, 1000, 4099, 16384, 70001])
        if mine.random() < 0.5:
            time.sleep(mine.random() * 1e-3)
        call = next_call()
        recv = np.empty(size * nbytes, np.uint8)
        if shared.random() < 0.25:
            recv[:] = pattern.send_bytes(rank, size, call, nbytes)
            pc.Alltoall(MPI.IN_PLACE, recv, algorithm=name)
        else:
            pc.Alltoall(pattern.send_bytes(rank, size, call, nbytes), recv, algorithm=name)
        check(name, recv, pattern.recv_bytes(rank, size, call, nbytes), nbytes,
              f"repeated call {call}, {nbytes} bytes per peer")
    return ncalls


def streak(pc, name, ncalls):
    """Back-to-back calls of one shape (fresh buffers, fresh data, random arrival delays): the
    calls an algorithm's plan serves after the first."""
    mine = random.Random(rank * 104729 + 3)
    for nbytes in (24, 4099):
        for _ in range(ncalls // 2):
            if mine.random() < 0.5:
                time.sleep(mine.random() * 1e-3)
            call = next_call()
            recv = np.empty(size * nbytes, np.uint8)
            pc.Alltoall(pattern.send_bytes(rank, size, call, nbytes), recv, algorithm=name)
            check(name, recv, pattern.recv_bytes(rank, size, call, nbytes), nbytes,
                  f"streak call {call}, {nbytes} bytes per peer")
    return ncalls


def runnable(pc, names):
    """The names whose algorithm can run on this topology; rank 0 reports the others as SKIP."""
    usable = []
    for name in names:
        reason = papcoll.algorithms[name].unsupported(pc._context())   # same on every rank
        if reason is None:
            usable.append(name)
        elif rank == 0:
            print(f"SKIP {name}: {reason}", flush=True)
    return usable


def main():
    ncalls = int(os.environ.get("PAPCOLL_TEST_CALLS", "200"))
    if rank == 0:
        print(f"matrix: N={size}, transport {transport.choose()}", flush=True)
    with papcoll.Communicator(world) as pc:
        names = runnable(pc, sys.argv[1:] or sorted(papcoll.algorithms))
        for name in names:
            t0 = time.perf_counter()
            cases = matrix(pc, name)
            done = repeated(pc, name, ncalls) + streak(pc, name, ncalls // 2)
            world.Barrier()
            if rank == 0:
                print(f"PASS {name}: {cases} cases + {done} repeated calls "
                      f"({time.perf_counter() - t0:.1f} s)", flush=True)
        # All algorithms in turn on one Communicator: epochs of one must not confuse another.
        mixed = random.Random(99)
        for _ in range(max(len(names), 1) * 10):
            repeated(pc, mixed.choice(names), 1)
    if rank == 0:
        print(f"PASS mixed: {len(names) * 10} calls alternating {len(names)} algorithms", flush=True)


try:
    main()
except BaseException as err:
    # One line per rank that failed, whatever its traceback's length: -m mpi4py then aborts the
    # job, and the first rank's abort may cut the others' tracebacks short.
    print(f"RANK {rank} FAILED: {type(err).__name__}: {err}", flush=True)
    time.sleep(1)        # the other ranks' errors reach the output before the abort
    raise
