"""MPI worker for tests/test_hardening.py: ``hardening.py MODE ARGS...``; rank 0 prints
``<MODE> OK`` at the end. Every mode is valid at the N its test uses.

rss NAME KIND      100 calls, each with a fresh 16 MiB receive buffer (KIND numpy or
                   bytearray): resident memory stays flat, no registration outlives its call.
mismatch NAME A B  the last rank passes B bytes per peer, the others A (after three calls of
                   A on every rank, so a lane may be armed): every rank raises MismatchError
                   naming the calls, within the timeout, and the Communicator is unusable.
policy             N=2: calls at and above policy.SHM_LIMIT, algorithm left to the policy
                   (shm_pap against cma_pap): MismatchError on both.
family             N=2: shm_pap against pap_direct on first use: an error within the timeout
                   on both, nothing left in /dev/shm.
beyond             N=2, cma_pap: rank 1 sends 8 bytes per peer from a buffer that ends where
                   an inaccessible page begins, rank 0 expects 16: MismatchError, never a read
                   past rank 1's buffer (that would be EFAULT).
setup_missing NAME the last rank never comes to NAME's first call: the others name it within
                   the timeout; nothing left in /dev/shm.
threads_one        two threads on one Communicator: the second call raises at once.
threads_two        two Communicators, one thread each, calls overlapping (THREAD_MULTIPLE).
unclosed COUNT [NAME]  COUNT Communicators made and dropped without close(), one call each.
gave_up NAME       N=3: rank 2 never calls; rank 1 gives up before rank 0 calls: rank 0's
                   error blames rank 2 alone.
cma_rank           N=2, cma_pap: a read from a process that is gone names its rank.
hier_dies NAME PHASE  N=4 as 2 nodes of 2: rank 3 (a non-master) freezes, as if dead, in its
                   second call's gather (before it posts) or scatter: the others name it within
                   the timeout (those of the other node through its master, who gave up for
                   want of it) and leave nothing in /dev/shm; then rank 0 kills it.
exit_broken NAME   the last rank never calls; the others time out and exit without close(),
                   the last rank exits too: MPI_Finalize must come at once (atexit closes
                   what is left without hanging).
dies STEP          rank 0 (the node segment's creator) freezes at set-up step STEP, as if dead:
                   the others name it within the timeout and leave nothing in /dev/shm; then
                   rank 1 kills it (mpiexec ends the job).
"""
import os
import sys
import threading
import time

import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.dirname(__file__))
import pattern  # noqa: E402

import papcoll  # noqa: E402
from papcoll import context  # noqa: E402
from papcoll.node import segment  # noqa: E402
from papcoll.algorithms.policy import SHM_LIMIT  # noqa: E402

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
TIMEOUT = float(os.environ.get("PAPCOLL_TIMEOUT", "60"))
calls = 0


def fresh(nbytes):
    """(send, want) naming (call, source, destination, word) for a call of nbytes per peer."""
    global calls
    calls += 1
    return (pattern.send_bytes(rank, size, calls, nbytes),
            pattern.recv_bytes(rank, size, calls, nbytes))


def resident():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def leftovers(pids=None):
    """Names in /dev/shm that papcoll created from this job's processes (``pids``, or gathered
    now: a collective)."""
    pids = world.allgather(os.getpid()) if pids is None else pids
    return [n for n in os.listdir(segment.SHM_DIR)
            if n.startswith(tuple(f"{segment.PREFIX}{p}-" for p in pids))]


def expect(error, fn, *words):
    """Run fn(); it must raise ``error`` whose message holds every one of ``words``, within
    TIMEOUT (+ margin). Returns the error."""
    start = time.monotonic()
    try:
        fn()
    except error as err:
        took = time.monotonic() - start
        assert took < TIMEOUT + 3, f"rank {rank}: {error.__name__} after {took:.1f} s"
        for word in words:
            assert word in str(err), f"rank {rank}: {word!r} not in {err}"
        return err
    raise AssertionError(f"rank {rank}: no {error.__name__}")


def unusable(pc):
    expect(papcoll.CommunicatorStateError, lambda: pc.Alltoall(*fresh(8)), "unusable")


def rss(name, kind):
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
    print(f"RSS rank {rank}: {before >> 20} MiB after 10 calls, grew {grew >> 20} MiB in 100 "
          f"more; {held} registration(s) held", flush=True)
    assert grew < 48 << 20, f"rank {rank}: resident memory grew by {grew >> 20} MiB"
    assert held <= (1 if kind == "numpy" else 0), held


def mismatch(name, a, b):
    odd = size - 1
    pc = papcoll.Communicator(world)
    for _ in range(3):                               # the same shape on every rank: a lane
        send, want = fresh(a)
        recv = np.empty_like(send)
        pc.Alltoall(send, recv, algorithm=name)
        assert np.array_equal(recv, want)
    nbytes = b if rank == odd else a
    send = np.zeros(size * nbytes, np.uint8)
    err = expect(papcoll.MismatchError,
                 lambda: pc.Alltoall(send, np.empty_like(send), algorithm=name),
                 "calls disagree", f"with {a} bytes per peer", f"with {b} bytes per peer")
    assert err.ranks and all(r != rank for r in err.ranks), err.ranks
    assert rank != odd or err.ranks[0] != odd
    unusable(pc)
    pc.close()


def policy():
    pc = papcoll.Communicator(world)
    small = SHM_LIMIT // size                   # rank 0 at the limit, the others above it
    nbytes = small * (1 if rank == 0 else 2)
    send = np.zeros(size * nbytes, np.uint8)
    expect(papcoll.MismatchError, lambda: pc.Alltoall(send, np.empty_like(send)),
           f"shm_pap with {small} bytes per peer", f"cma_pap with {2 * small} bytes per peer")
    pc.close()


def family():
    pc = papcoll.Communicator(world)
    name = "shm_pap" if rank == 0 else "pap_direct"
    send = np.zeros(size * 8, np.uint8)
    err = expect(papcoll.PapcollError, lambda: pc.Alltoall(send, np.empty_like(send),
                                                           algorithm=name))
    print(f"FAMILY rank {rank}: {type(err).__name__}: {err}", flush=True)
    pc.close()
    world.Barrier()
    assert leftovers() == []


def beyond():
    import ctypes
    import mmap
    page = mmap.PAGESIZE
    area = mmap.mmap(-1, 2 * page)
    libc = ctypes.CDLL(None, use_errno=True)
    base = ctypes.addressof(ctypes.c_char.from_buffer(area))
    assert libc.mprotect(ctypes.c_void_p(base + page), page, 0) == 0   # PROT_NONE
    nbytes = 16 if rank == 0 else 8
    if rank == 1:                                    # ends where the guard page begins
        send = np.frombuffer(area, np.uint8, size * nbytes, page - size * nbytes)
    else:
        send = np.zeros(size * nbytes, np.uint8)
    pc = papcoll.Communicator(world)
    expect(papcoll.MismatchError,
           lambda: pc.Alltoall(send, np.empty(size * nbytes, np.uint8), algorithm="cma_pap"),
           "cma_pap with 8 bytes per peer", "cma_pap with 16 bytes per peer")
    pc.close()


def setup_missing(name):
    last = size - 1
    pc = papcoll.Communicator(world)
    if rank != last:
        send = np.zeros(size * 64, np.uint8)
        err = expect(papcoll.PapcollTimeoutError,
                     lambda: pc.Alltoall(send, np.empty_like(send), algorithm=name))
        assert last in err.missing, err
    world.Barrier()                                  # the last rank comes only now
    pc.close()
    assert leftovers() == []


def threads_one():
    pc = papcoll.Communicator(world)
    send, want = fresh(8)
    recv = np.empty_like(send)
    if rank == 1:
        time.sleep(1.0)                              # rank 0's first call waits for me
        pc.Alltoall(send, recv)
    elif rank == 0:
        first = threading.Thread(target=pc.Alltoall, args=(send, recv))
        first.start()
        time.sleep(0.2)
        start = time.monotonic()
        expect(papcoll.CommunicatorStateError, lambda: pc.Alltoall(*fresh(8)),
               "in use by another thread")
        assert time.monotonic() - start < 0.1
        first.join()
    if rank < 2:
        assert np.array_equal(recv, want)
    pc.close()


def threads_two():
    assert MPI.Query_thread() == MPI.THREAD_MULTIPLE
    pcs = [papcoll.Communicator(world), papcoll.Communicator(world)]   # made in one order
    names = ["shm_pap", "pap_direct"]
    errors = []

    def run(pc, name, salt):
        try:
            for call in range(1, 201):
                send = pattern.send_bytes(rank, size, call * 2 + salt, 24)
                recv = np.empty_like(send)
                pc.Alltoall(send, recv, algorithm=name)
                assert np.array_equal(recv, pattern.recv_bytes(rank, size, call * 2 + salt, 24))
        except BaseException as err:                 # reported by the main thread
            errors.append(err)

    workers = [threading.Thread(target=run, args=(pc, name, salt))
               for salt, (pc, name) in enumerate(zip(pcs, names))]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors, errors
    for pc in pcs:
        pc.close()


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


def gave_up(name):
    """Rank 2 never calls; rank 1 calls at once and gives up after 1 s; rank 0 calls only then.
    Rank 0's error must blame rank 2, never rank 1: rank 1 came, and gave up on its own."""
    if rank == 1:
        os.environ["PAPCOLL_TIMEOUT"] = "1"          # read when the Communicator is made
    pc = papcoll.Communicator(world)
    send = np.zeros(size * 64, np.uint8)
    if rank == 1:
        expect(papcoll.PapcollTimeoutError,
               lambda: pc.Alltoall(send, np.empty_like(send), algorithm=name))
    elif rank == 0:
        time.sleep(2)
        err = expect(papcoll.PapcollTimeoutError,
                     lambda: pc.Alltoall(send, np.empty_like(send), algorithm=name))
        assert err.missing == [2], err
        print(f"GAVE_UP rank 0: {err}", flush=True)
    world.Barrier()
    pc.close()


def cma_rank():
    pc = papcoll.Communicator(world)
    send, want = fresh(64)
    recv = np.empty_like(send)
    pc.Alltoall(send, recv, algorithm="cma_pap")
    if rank == 0:
        gone = os.fork()
        if gone == 0:
            os._exit(0)
        os.waitpid(gone, 0)
        pc._context().algorithms["cma_pap"].pids[1] = gone
        expect(papcoll.TransportError, lambda: pc.Alltoall(*fresh(64), algorithm="cma_pap"),
               "rank 1", "No such process")
    else:
        expect(papcoll.PapcollTimeoutError, lambda: pc.Alltoall(*fresh(64), algorithm="cma_pap"),
               "gave up")
    pc.close()


def late_word():
    """A give-up seen on a node's shared flags before its message arrives (the flag is raised
    after the message is sent): the error waits for the message, for its reason."""
    from papcoll import rendezvous
    comm = world.Dup()
    if rank == 0:
        time.sleep(0.3)
        rendezvous.give_up(comm, papcoll.MismatchError("calls disagree: a test", [0]))
    else:
        err = rendezvous.not_coming(comm, "a test wait", [0], [0], int)
        assert isinstance(err, papcoll.MismatchError) and "a test" in str(err), repr(err)
    world.Barrier()
    rendezvous.forget(comm)
    comm.Free()


def dies(step):
    import signal
    from papcoll import rendezvous
    victim, pids = 0, world.allgather(os.getpid())
    survivors = world.Split(0 if rank != victim else MPI.UNDEFINED, rank)
    if rank == victim:
        meet = rendezvous.exchange

        def freezing(comm, what, *args, **kwargs):
            if what == step:
                os.kill(os.getpid(), signal.SIGSTOP)
            return meet(comm, what, *args, **kwargs)
        rendezvous.exchange = freezing
        papcoll.Communicator(world)
        raise AssertionError("the victim came back")
    err = expect(papcoll.PapcollTimeoutError, lambda: papcoll.Communicator(world))
    assert err.missing == [victim], err
    survivors.Barrier()
    left = [n for n in os.listdir(segment.SHM_DIR)
            if n.startswith(tuple(f"{segment.PREFIX}{p}-" for p in pids))]
    print(f"DIES rank {rank}: {err}; leftovers {left}", flush=True)
    assert left == [], left
    survivors.Barrier()
    if rank == 1:
        print("DIES OK", flush=True)
        os.kill(pids[victim], signal.SIGKILL)
    time.sleep(30)                                   # mpiexec ends us now that a rank died


def hier_dies(name, phase):
    import signal
    from papcoll.node.board import NodeBoard
    victim, pids = 3, world.allgather(os.getpid())
    survivors = world.Split(0 if rank != victim else MPI.UNDEFINED, rank)
    freeze = lambda: os.kill(os.getpid(), signal.SIGSTOP)
    if rank == victim:
        pc = papcoll.Communicator(world, trace="phases")
        if phase == "gather":
            post, posts = NodeBoard.post, []
            NodeBoard.post = lambda board, *a: (posts.append(1), len(posts) == 2 and freeze(),
                                                post(board, *a))
        else:
            trace = pc._context().trace
            mark, marks = trace.phase, []
            trace.phase = lambda what: (marks.append(what), marks.count("scatter") == 2
                                        and what == "scatter" and freeze(), mark(what))
    else:
        pc = papcoll.Communicator(world)
    send, want = fresh(8)
    for call in range(1, 100):
        recv = np.empty_like(send)
        try:
            pc.Alltoall(send, recv, algorithm=name)
        except papcoll.PapcollTimeoutError as err:
            assert rank != victim and err.missing == [victim], err
            print(f"HIER_DIES rank {rank} call {call}: {err}", flush=True)
            break
        assert np.array_equal(recv, want), call
    pc.close()
    survivors.Barrier()
    assert leftovers(pids) == []
    survivors.Barrier()
    if rank == 0:
        print("HIER_DIES OK", flush=True)
        os.kill(pids[victim], signal.SIGKILL)
    time.sleep(30)                                   # mpiexec ends us now that a rank died


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


mode, args = sys.argv[1], sys.argv[2:]
{"rss": rss, "mismatch": lambda name, a, b: mismatch(name, int(a), int(b)), "policy": policy,
 "family": family, "beyond": beyond, "setup_missing": setup_missing, "threads_one": threads_one,
 "threads_two": threads_two, "unclosed": lambda count, *name: unclosed(int(count), *name),
 "gave_up": gave_up, "cma_rank": cma_rank, "late_word": late_word, "dies": dies, "exit_broken": exit_broken,
 "hier_dies": hier_dies}[mode](*args)
world.Barrier()
if rank == 0:
    print(f"{mode.upper()} OK", flush=True)
