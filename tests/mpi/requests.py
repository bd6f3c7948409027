"""MPI worker for tests/test_requests.py: ``requests.py persistent|nonblocking|misuse ALGORITHM``.

persistent: Alltoall_init, Alltoallv_init (IN_PLACE too) and Alltoallw_init (a strided type)
    started STARTS times each with the send data changed between starts, every result checked
    against MPI's own call on the same data (the v and w forms where the algorithm serves
    them); Startall/Waitall over two Communicators; two zero-copy requests of one Communicator
    started in turn (over verbs, each by its own plan at every start). Prints PERSISTENT ok.
nonblocking: Ialltoall, Ialltoallv and Ialltoallw at several sizes, Tested in a loop while the
    process computes (and waits a random time first), against MPI's; papcoll.waitall over a
    papcoll request and an MPI one. Prints NONBLOCKING ok.
misuse: a Start of an active request, a Start of a nonblocking one, Free while active, any use
    after Free (BufferSpecError); a blocking call while a request is active, of a shape a plan
    holds (CommunicatorStateError, no plan run); resizing a buffer under a persistent request (Python's
    BufferError); then the Communicator still works. Prints MISUSE ok.
absent: the last rank never starts its persistent request (and sleeps past the timeout): the
    others' Wait raises PapcollTimeoutError naming it, within PAPCOLL_TIMEOUT and a slack, and a
    nonblocking Test loop the same. Prints ABSENT <rank> <missing>.
dropped: requests dropped without Wait -- an Ialltoall, a started persistent one, an inactive
    one -- are completed (and freed) by the next call, whose data and theirs match MPI's; a
    request still held and active keeps the next call out; close() completes a dropped
    Ialltoall and a held one within the timeout, frees everything (its private communicator, no
    papcoll memory mapped or in /dev/shm) and a later Start, Test or Wait raises
    CommunicatorStateError (Free is accepted). Prints DROPPED ok.
dropped_absent: after a first call, the last rank never starts the Ialltoall the others drop
    (all of them then close); their close() raises MismatchError (it is at close) or
    PapcollTimeoutError naming it, within PAPCOLL_TIMEOUT and a slack, and still closes: nothing
    left mapped or in /dev/shm on any rank. Prints DROPPED_ABSENT <rank> <missing>.
"""
import gc
import os
import random
import sys
import time
import weakref

import numpy as np
from mpi4py import MPI

import papcoll
from papcoll.callcache import CAPACITY
from papcoll.errors import BufferSpecError, CommunicatorStateError

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
mode, algorithm = sys.argv[1], sys.argv[2]
STARTS = int(sys.argv[3]) if len(sys.argv) > 3 else 1000


def fill(buf, salt):
    """Elements that say source, destination, index and the start they belong to."""
    n = buf.size // size
    for q in range(size):
        buf[q * n:(q + 1) * n] = (rank * 100_000 + q * 1000 + np.arange(n) + salt) % 2**31


def persistent():
    rng = random.Random(5)
    with papcoll.Communicator(world) as pc:
        for block in (1, 37, 5000):
            send = np.zeros(block * size, np.int32)
            recv, want = np.zeros((2, block * size), np.int32)
            req = pc.Alltoall_init(send, recv, algorithm=algorithm)
            other = np.zeros_like(recv)
            for k in range(STARTS if block == 1 else STARTS // 10):
                fill(send, k)
                world.Alltoall(send, want)
                time.sleep(rng.random() * 1e-4 * ((rank + k) % size))
                req.Start()
                req.Wait()
                assert np.array_equal(recv, want), (block, k)
                if k % 5 == 4:    # another call between starts: it writes advert records too
                    pc.Alltoall(send, other, algorithm=algorithm)
                    assert np.array_equal(other, want), (block, k)
            req.Free()
        if algorithm == "auto" or pc._context().algorithm_class(algorithm).variable:
            variable(pc)
        # two Communicators' requests in flight at once
        with papcoll.Communicator(world.Dup()) as other:
            a, b = np.zeros((2, size), np.int64)
            src = np.arange(size, dtype=np.int64) + 10 * rank
            reqs = [pc.Alltoall_init(src, a, algorithm=algorithm),
                    other.Alltoall_init(src, b, algorithm=algorithm)]
            papcoll.Request.Startall(reqs)
            papcoll.Request.Waitall(reqs)
            assert list(a) == list(b) == [10 * q + rank for q in range(size)], (a, b)
            for r in reqs:
                r.Free()
        alternating(pc)
        if algorithm in ("pap_direct", "mpi", "auto"):    # its 6 B calls leave a plan
            pinned(pc)
        # nothing keeps a freed request's buffers: not it, its plan, its advert records
        for block in (1, 5000):
            big = np.arange(size * block, dtype=np.int32)
            out = np.zeros_like(big)
            refs = [weakref.ref(big), weakref.ref(out)]
            req = pc.Alltoall_init(big, out, algorithm=algorithm)
            for _ in range(3):
                req.Start()
                req.Wait()
            req.Free()
            del big, out, req
            gc.collect()
            assert all(ref() is None for ref in refs), block
    print("PERSISTENT ok", flush=True)


def variable(pc):
    """Alltoallv (counts that differ by direction; in place, symmetric counts) and Alltoallw
    (a strided type), persistent."""
    counts = [(rank * 3 + q * 5) % 7 for q in range(size)]
    into = [(q * 3 + rank * 5) % 7 for q in range(size)]
    send = np.zeros(sum(counts), np.float64)
    recv, want = np.zeros((2, sum(into)), np.float64)
    req = pc.Alltoallv_init([send, counts], [recv, into], algorithm=algorithm)
    sym = [(rank + q) % 4 for q in range(size)]
    inplace, inplace_want = np.zeros((2, sum(sym)), np.float64)
    req2 = pc.Alltoallv_init(MPI.IN_PLACE, [inplace, sym], algorithm=algorithm)
    vec = MPI.DOUBLE.Create_vector(2, 1, 2).Commit()
    wsend, wrecv, wwant = np.zeros((3, 4 * size), np.float64)
    spec = ([1] * size, [32 * q for q in range(size)])
    req3 = pc.Alltoallw_init([wsend, spec, [vec] * size], [wrecv, spec, [vec] * size],
                             algorithm=algorithm)
    for k in range(STARTS // 10):
        send[:] = np.arange(send.size) + 1000 * rank + k
        world.Alltoallv([send, counts], [want, into])
        req.Start()
        req.Wait()
        assert np.array_equal(recv, want), k
        inplace[:] = np.arange(inplace.size) * (rank + 1) + k
        inplace_want[:] = inplace
        world.Alltoallv(MPI.IN_PLACE, [inplace_want, sym])
        req2.Start()
        while not req2.Test():
            pass
        assert np.array_equal(inplace, inplace_want), k
        wsend[:] = np.arange(wsend.size) + 10 * rank + k
        wwant[:] = wrecv[:] = -1
        world.Alltoallw([wsend, spec, [vec] * size], [wwant, spec, [vec] * size])
        papcoll.Request.Startall([req3])
        papcoll.Request.Waitall([req3])
        assert np.array_equal(wrecv, wwant), k
    for r in (req, req2, req3):
        r.Free()
    vec.Free()


def alternating(pc):
    """Two persistent requests of zero-copy blocks on one Communicator, started in turn (each
    start's advert records replace the other's at every peer), then a blocking call between
    them. Over verbs each request starts by its own plan (registrations it owns) at every
    start, none declined."""
    block = 5000
    sends = [np.zeros(block * size, np.int32) for _ in range(2)]
    recvs, wants = np.zeros((2, 2, block * size), np.int32)
    reqs = [pc.Alltoall_init(s, r, algorithm=algorithm) for s, r in zip(sends, recvs)]
    algo = pc._context().algorithm(algorithm) if size > 1 and algorithm != "auto" else None
    own = getattr(algo, "scheme_of", lambda _: None)(recvs[0].nbytes // size) is not None \
        and algo.exchange.transport.name == "verbs"
    for k in range(12):
        i = k % 2 if k < 8 else k // 2 % 2      # in turn, then each twice in a row
        fill(sends[i], 7 * k + i)
        world.Alltoall(sends[i], wants[i])
        reqs[i].Start()
        reqs[i].Wait()
        assert np.array_equal(recvs[i], wants[i]), (i, k)
        if k == 9:
            other = np.zeros_like(recvs[0])
            pc.Alltoall(sends[i], other, algorithm=algorithm)
            assert np.array_equal(other, wants[i]), k
        if own:
            assert reqs[i]._call._kept.plan is not None, (i, k)
    for req in reqs:
        req.Free()


def pinned(pc):
    """A persistent request's call object (the plan its init left) is pinned: more shapes
    than the cache holds evict every other plan, never it, and the bound counts only the
    unpinned; its Starts still run by it. Freed, it is evicted down to the bound."""
    cache, site = pc._ctx.cache, ("a", algorithm)
    send = np.arange(3 * size, dtype=np.int16) + 100 * rank
    recv = np.zeros_like(send)
    req = pc.Alltoall_init(send, recv, algorithm=algorithm)
    held = [plan for plan in cache.plans(site) if plan.pins]
    assert held or size == 1 or algorithm == "auto", cache.plans(site)
    for n in range(1, CAPACITY + 3):         # bytes per peer: planned over verbs too (inline)
        block = np.zeros(n * size, np.int8)
        pc.Alltoall(block, np.zeros_like(block), algorithm=algorithm)
    assert all(plan in cache.plans(site) for plan in held), held
    assert len(cache) == CAPACITY + len(held), len(cache)
    req.Start()
    req.Wait()
    assert list(recv) == [100 * q + 3 * rank + i for q in range(size) for i in range(3)], recv
    req.Free()
    assert not any(plan.pins for plan in cache.plans(site))
    assert len(cache) <= CAPACITY, len(cache)


def compute(ms):
    """About ``ms`` ms of work that needs the CPU."""
    m = np.random.default_rng(rank).random((64, 64))
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        m = m @ m
        m /= np.abs(m).max() + 1
    return m


def nonblocking():
    rng = random.Random(rank)
    with papcoll.Communicator(world) as pc:
        for block in (0, 8, 4097, 70_000, 300_000):
            for _ in range(3):
                send = np.arange(block * size, dtype=np.uint8) * (rank + 1)
                recv, want = np.zeros((2, block * size), np.uint8)
                world.Alltoall(send, want)
                time.sleep(rng.random() * 0.002)
                req = pc.Ialltoall(send, recv, algorithm=algorithm)
                tests = 0
                while not req.Test():
                    compute(0.2)
                    tests += 1
                assert np.array_equal(recv, want), block
                req.Wait()                      # complete: returns at once
        counts = [(rank + q) % 3 * 1000 for q in range(size)]
        into = [(q + rank) % 3 * 1000 for q in range(size)]
        send = np.arange(sum(counts), dtype=np.int16)
        recv, want = np.zeros((2, sum(into)), np.int16)
        world.Alltoallv([send, counts], [want, into])
        req = pc.Ialltoallv([send, counts], [recv, into], algorithm=algorithm)
        while not req.Test():
            compute(0.1)
        assert np.array_equal(recv, want)
        vec = MPI.SHORT.Create_vector(2, 1, 3).Commit()
        spec = ([1] * size, [12 * q for q in range(size)])
        wsend = np.arange(6 * size, dtype=np.int16) + rank
        wrecv, wwant = np.full((2, 6 * size), -1, np.int16)
        world.Alltoallw([wsend, spec, [vec] * size], [wwant, spec, [vec] * size])
        req = pc.Ialltoallw([wsend, spec, [vec] * size], [wrecv, spec, [vec] * size],
                            algorithm=algorithm)
        req.Wait()
        assert np.array_equal(wrecv, wwant)
        vec.Free()
        # papcoll's waitall over a papcoll request and an MPI one
        other = world.Dup()
        a, b = np.zeros((2, size), np.int32)
        src = np.arange(size, dtype=np.int32) + 10 * rank
        papcoll.waitall([pc.Ialltoall(src, a, algorithm=algorithm), other.Ialltoall(src, b)])
        assert list(a) == list(b) == [10 * q + rank for q in range(size)], (a, b)
        other.Free()
    print("NONBLOCKING ok", flush=True)


def refused(what, error, call):
    try:
        call()
    except error as err:
        assert what in str(err), (what, str(err))
        return
    raise AssertionError(f"not refused: {what}")


def misuse():
    with papcoll.Communicator(world) as pc:
        send = np.arange(size, dtype=np.int32)
        recv = np.zeros(size, np.int32)
        for _ in range(2):          # a plan for this shape, whose Entry must still refuse
            pc.Alltoall(send, recv)
        hits = pc._ctx.cache.hits
        req = pc.Alltoall_init(send, recv, algorithm=algorithm)
        req.Start()
        refused("is active", BufferSpecError, req.Start)
        refused("is active", CommunicatorStateError, lambda: pc.Alltoall(send, recv))
        assert pc._ctx.cache.hits == hits
        refused("is active", CommunicatorStateError, lambda: pc.Ialltoall(send, recv))
        refused("Wait for it first", BufferSpecError, req.Free)
        req.Wait()
        req.Free()
        for verb in (req.Start, req.Wait, req.Test, req.Free):
            refused("was freed", BufferSpecError, verb)
        nb = pc.Ialltoall(send, recv, algorithm=algorithm)
        refused("not persistent", BufferSpecError, nb.Start)
        nb.Wait()
        buf = bytearray(4 * size)
        out = bytearray(4 * size)
        held = pc.Alltoall_init([buf, MPI.INT], [out, MPI.INT], algorithm=algorithm)
        refused("", BufferError, lambda: buf.extend(b"0000"))     # cannot move under it
        held.Free()
        buf.extend(b"0000")                                      # released by Free
        pc.Alltoall(send, recv, algorithm=algorithm)
        assert list(recv) == [rank] * size, recv
    print("MISUSE ok", flush=True)


def absent():
    from papcoll import config
    from papcoll.errors import PapcollTimeoutError
    timeout = config.timeout()
    pc = papcoll.Communicator(world)
    send = np.arange(size * 5000, dtype=np.int32)
    recv = np.zeros_like(send)
    req = pc.Alltoall_init(send, recv, algorithm=algorithm)
    if rank == size - 1:
        time.sleep(timeout + 3)
        print(f"ABSENT {rank} -", flush=True)
        return
    start = time.monotonic()
    try:
        req.Start()
        if rank % 2:
            req.Wait()
        else:
            while not req.Test():
                compute(0.1)
        missing = "none"
    except PapcollTimeoutError as err:
        missing = err.missing
    took = time.monotonic() - start
    assert took < timeout + 5, took
    print(f"ABSENT {rank} {missing}", flush=True)


def named(call, block):
    """(send, want) of an int64 Alltoall of ``block`` elements per peer, every element naming
    its call, source, destination and index; ``want`` is MPI's Alltoall of ``send``."""
    index = np.arange(block, dtype=np.int64)
    send = np.concatenate([(call << 48) | (rank << 40) | (q << 32) | index for q in range(size)])
    want = np.empty_like(send)
    world.Alltoall(send, want)
    assert np.array_equal(want, np.concatenate([(call << 48) | (q << 40) | (rank << 32) | index
                                                for q in range(size)]))
    return send, want


def mapped():
    """papcoll's shared memory this process maps, and its names in /dev/shm of this job."""
    from papcoll.node import segment
    with open("/proc/self/maps") as maps:
        held = [line for line in maps if segment.PREFIX in line]
    pids = world.allgather(os.getpid())
    return held + [n for n in os.listdir(segment.SHM_DIR)
                   if n.startswith(tuple(f"{segment.PREFIX}{p}-" for p in pids))]


def dropped():
    from papcoll import config
    timeout = config.timeout()
    block = 3000                  # 24 KB a peer: zero-copy where the copy threshold is lower
    with papcoll.Communicator(world) as pc:
        for k, kind in enumerate(("nonblocking", "persistent", "inactive")):
            send, want = named(3 * k + 1, block)
            recv = np.zeros_like(send)
            if kind == "nonblocking":
                pc.Ialltoall(send, recv, algorithm=algorithm)         # dropped at once
            else:
                req = pc.Alltoall_init(send, recv, algorithm=algorithm)
                if kind == "persistent":
                    req.Start()
                del req
            later, later_want = named(3 * k + 2, block)
            out = np.zeros_like(later)
            time.sleep(0.01 * rank)
            pc.Alltoall(later, out, algorithm=algorithm)
            assert np.array_equal(out, later_want), kind
            assert kind == "inactive" or np.array_equal(recv, want), kind
            again, again_want = named(3 * k + 3, block)          # a request after it, too
            pc.Ialltoall(again, out, algorithm=algorithm).Wait()
            assert np.array_equal(out, again_want), kind
        held = pc.Ialltoall(send, recv, algorithm=algorithm)
        refused("is active", CommunicatorStateError, lambda: pc.Alltoall(send, out))
        held.Wait()
    pc = papcoll.Communicator(world)
    ctx = pc._context()
    send, want = named(10, block)
    recv = np.zeros_like(send)
    pc.Ialltoall(send, recv, algorithm=algorithm)                 # dropped, then close
    start = time.monotonic()
    pc.close()
    assert time.monotonic() - start < timeout, time.monotonic() - start
    assert pc.closed and ctx.comm == MPI.COMM_NULL and np.array_equal(recv, want)
    assert not mapped(), mapped()
    pc = papcoll.Communicator(world)
    send, want = named(11, block)
    recv = np.zeros_like(send)
    buf, out = bytearray(8 * size), bytearray(8 * size)
    idle = pc.Alltoall_init([buf, MPI.INT64_T], [out, MPI.INT64_T], algorithm=algorithm)
    req = pc.Ialltoall(send, recv, algorithm=algorithm)           # held, then close
    time.sleep(0.01 * rank)
    pc.close()
    assert np.array_equal(recv, want)
    for verb in (req.Wait, req.Test, idle.Start, idle.Wait):
        refused("is closed", CommunicatorStateError, verb)
    req.Free()
    idle.Free()
    buf.extend(b"0")                                              # close released it
    assert not mapped(), mapped()
    print("DROPPED ok", flush=True)


def dropped_absent():
    from papcoll import config
    from papcoll.errors import MismatchError, PapcollTimeoutError
    timeout = config.timeout()
    pc = papcoll.Communicator(world)
    send, want = named(1, 3000)
    recv = np.zeros_like(send)
    pc.Alltoall(send, recv, algorithm=algorithm)       # set up: a meeting of every rank
    assert np.array_equal(recv, want)
    start = time.monotonic()
    missing = "none"
    if rank != size - 1:
        pc.Ialltoall(send, recv, algorithm=algorithm)
    try:
        pc.close()
    except MismatchError as err:        # the last rank seen at close, not in the call
        missing = err.ranks
    except PapcollTimeoutError as err:  # or never seen
        missing = err.missing
    took = time.monotonic() - start
    assert took < timeout + 5 and pc.closed, took
    refused("is closed", CommunicatorStateError, lambda: pc.Alltoall(send, recv))
    world.Barrier()
    assert not mapped(), mapped()
    print(f"DROPPED_ABSENT {rank} {missing}", flush=True)


{"persistent": persistent, "nonblocking": nonblocking, "misuse": misuse,
 "absent": absent, "dropped": dropped, "dropped_absent": dropped_absent}[mode]()
