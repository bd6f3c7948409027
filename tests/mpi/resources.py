"""MPI worker for tests/test_resources.py: ``resources.py MODE ARGS...``; rank 0 prints
``<MODE> OK`` at the end. What a Communicator holds is given back: memory, Communicators
never closed, and a broken one left open at exit.

rss NAME... KIND   100 calls, each with a fresh 16 MiB receive buffer (KIND numpy or
                   bytearray): resident memory stays flat, no registration outlives its call.
                   Several algorithms in turn, one job (its start-up is costly when emulated).
unclosed COUNT [NAME]  COUNT Communicators made and dropped without close(), one call each.
orders NAME        objects dropped in every order, never closed: a Communicator before its
                   requests (which still complete right), requests dropped active (one before
                   a call, one with their Communicator), and one left at exit with a
                   persistent request started; the
                   test then finds no papcoll segment in /dev/shm and no crash.
exit_broken NAME   the last rank never calls; the others time out and exit without close(),
                   the last rank exits too: MPI_Finalize must come at once (atexit closes
                   what is left without hanging).
"""
import gc
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import pattern  # noqa: E402
from worker import expect, fresh, main, rank, size, world  # noqa: E402

import papcoll  # noqa: E402
from papcoll import context  # noqa: E402


def resident():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def rss(*args):
    *names, kind = args
    for name in names:
        rss_of(name, kind)


def rss_of(name, kind):
    nbytes = (16 << 20) // size
    send = pattern.send_bytes(rank, size, 1, nbytes)
    want = pattern.recv_bytes(rank, size, 1, nbytes)
    with papcoll.Communicator(world) as pc:
        for i in range(110):
            recv = np.empty(size * nbytes, np.uint8) if kind == "numpy" else bytearray(size * nbytes)
            pc.Alltoall(send, recv, algorithm=name)
            got = np.frombuffer(recv, np.uint8)
            assert got[::4096].tolist() == want[::4096].tolist() and got[-1] == want[-1], i
            if i == 9:
                before = resident()
            del recv, got
        grew = resident() - before
        transport = pc._context().algorithms[name].exchange.transport
        cache = transport.cache if hasattr(transport, "cache") else transport._local.exposed
        held = len(cache)
    print(f"RSS {name} rank {rank}: {before >> 20} MiB after 10 calls, grew {grew >> 20} MiB in 100 "
          f"more; {held} registration(s) held", flush=True)
    assert grew < 48 << 20, f"{name}, rank {rank}: resident memory grew by {grew >> 20} MiB"
    assert held <= (1 if kind == "numpy" else 0), (name, held)


def unclosed(count, name=None):
    start = time.monotonic()
    for i in range(count):
        send, want = fresh(8)
        recv = np.empty_like(send)
        papcoll.Communicator(world).Alltoall(send, recv, algorithm=name)
        assert np.array_equal(recv, want), i
    took = time.monotonic() - start
    left = len(context._dropped) + len(context._open)
    print(f"UNCLOSED rank {rank}: {count} in {took:.1f} s, {left} left open", flush=True)
    assert left <= 1, left


def exit_broken(name):
    pc = papcoll.Communicator(world)
    send = np.zeros(size * 64, np.uint8)
    pc.Alltoall(send, np.empty_like(send), algorithm=name)
    world.Barrier()
    if rank != size - 1:
        expect(papcoll.PapcollTimeoutError,
               lambda: pc.Alltoall(send, np.empty_like(send), algorithm=name))
    world.Barrier()
    globals()["left_open"] = pc                      # never closed: MPI_Finalize's business


def orders(name):
    requests = name if name in ("mpi", "pap_direct") else "auto"   # those that serve them

    def call(pc=None):
        send, want = fresh(4)
        recv = np.empty_like(send)
        if pc is not None:                           # a blocking call: the node's segments
            pc.Alltoall(send, recv, algorithm=name)
            assert np.array_equal(recv, want)
        return send, recv, want

    pc = papcoll.Communicator(world)                 # dropped before its requests
    call(pc)
    (s1, r1, w1), (s2, r2, w2) = call(), call()
    persistent = pc.Alltoall_init(s1, r1, algorithm=requests)
    nonblocking = pc.Ialltoall(s2, r2, algorithm=requests)
    del pc
    gc.collect()
    nonblocking.Wait()
    persistent.Start()
    persistent.Wait()
    assert np.array_equal(r1, w1) and np.array_equal(r2, w2)
    del persistent, nonblocking
    gc.collect()

    pc = papcoll.Communicator(world)                 # requests dropped active, then it
    persistent = pc.Alltoall_init(*call()[:2], algorithm=requests)
    persistent.Start()
    del persistent
    gc.collect()
    call(pc)                                         # the dropped call completes first
    nonblocking = pc.Ialltoall(*call()[:2], algorithm=requests)
    del nonblocking, pc
    gc.collect()

    pc = papcoll.Communicator(world)                 # left at exit, a request started
    call(pc)
    send, recv, want = call()
    persistent = pc.Alltoall_init(send, recv, algorithm=requests)
    persistent.Start()
    persistent.Wait()
    assert np.array_equal(recv, want)
    persistent.Start()
    globals()["left"] = (pc, persistent)             # the interpreter's exit closes them


main({"rss": rss, "orders": orders, "unclosed": lambda count, *name: unclosed(int(count), *name),
      "exit_broken": exit_broken})
