"""MPI worker for tests/test_peer_failures.py: ``peer_failures.py MODE ARGS...``; rank 0
prints ``<MODE> OK`` at the end. A peer that never comes, is gone, freezes or gives up is
named -- the right one -- within the timeout, and nothing is left in /dev/shm. Every mode is
valid at the N its test uses.

setup_missing NAME the last rank never comes to NAME's first call: the others name it within
                   the timeout; nothing left in /dev/shm.
gave_up NAME       N=3: rank 2 never calls; rank 1 gives up before rank 0 calls: rank 0's
                   error blames rank 2 alone.
cma_rank           N=2, cma_pap: a read from a process that is gone names its rank.
late_word          N=2: rank 1 is told that rank 0 gave up (as a node's flags may tell) 0.3 s
                   before rank 0 sends its give-up, a MismatchError: the error rank 1 makes
                   waits for the message and is that MismatchError, with its reason.
dies STEP          rank 0 (the node segment's creator) freezes at set-up step STEP, as if dead:
                   the others name it within the timeout and leave nothing in /dev/shm; then
                   rank 1 kills it (mpiexec ends the job).
held               N=3, pap_direct: rank 2 comes to MPI's window creation (MPI_Win_allocate)
                   twice the timeout late, as if stopped between the meeting before it and the
                   call: every rank leaves MPI only then, and each raises the error of a wait
                   MPI cannot attribute (missing None), none naming a rank that gave up.
hier_dies NAME PHASE  N=4 as 2 nodes of 2: rank 3 (a non-master) freezes, as if dead, in its
                   second call's gather (before it posts) or scatter: the others name it within
                   the timeout (those of the other node through its master, who gave up for
                   want of it) and leave nothing in /dev/shm; then rank 0 kills it.
"""
import os
import sys
import time

import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.dirname(__file__))
from worker import expect, fresh, leftovers, main, rank, size, world  # noqa: E402

import papcoll  # noqa: E402


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
    left = leftovers(pids)
    print(f"DIES rank {rank}: {err}; leftovers {left}", flush=True)
    assert left == [], left
    survivors.Barrier()
    if rank == 1:
        print("DIES OK", flush=True)
        os.kill(pids[victim], signal.SIGKILL)
    time.sleep(30)                                   # mpiexec ends us now that a rank died


def held():
    import types
    from papcoll.transport import mpi_rma
    timeout = float(os.environ["PAPCOLL_TIMEOUT"])
    if rank == 2:
        real = MPI.Win.Allocate

        def late(*args, **kwargs):
            time.sleep(2 * timeout)
            return real(*args, **kwargs)
        names = {k: getattr(MPI, k) for k in dir(MPI) if not k.startswith("__")}
        mpi_rma.MPI = types.SimpleNamespace(**{**names, "Win": types.SimpleNamespace(
            **{k: getattr(MPI.Win, k) for k in ("Create", "Create_dynamic")}, Allocate=late)})
    pc = papcoll.Communicator(world)
    send, want = fresh(64)
    recv = np.empty_like(send)
    start = time.monotonic()
    try:
        pc.Alltoall(send, recv, algorithm="pap_direct")
        raise AssertionError(f"rank {rank}: the call did not fail")
    except papcoll.PapcollTimeoutError as err:
        took = time.monotonic() - start
        assert err.missing is None and not err.gave_up, err
        assert "inside MPI's blocking call" in str(err), err
        assert 2 * timeout <= took < 3 * timeout + 3, took
    pc.close()
    assert leftovers() == []
    world.Barrier()
    if rank == 0:
        print("HELD OK", flush=True)


def hier_dies(name, phase):
    import signal
    from papcoll.algorithms import shm_direct
    victim, pids = 3, world.allgather(os.getpid())
    survivors = world.Split(0 if rank != victim else MPI.UNDEFINED, rank)
    freeze = lambda: os.kill(os.getpid(), signal.SIGSTOP)
    if rank == victim:         # traced: its calls take the algorithm's path, not a plan's
        pc = papcoll.Communicator(world, trace="phases")
        algo, calls = shm_direct.ShmDirect, {"lists_for": [], "finish": []}

        def stopping(name, when):    # call 2: before its post (gather), or after it (scatter)
            real = getattr(algo, name)

            def stop(self, *args):
                calls[name].append(1)
                if len(calls[name]) == 2 and phase == when:
                    freeze()
                return real(self, *args)
            setattr(algo, name, stop)
        stopping("lists_for", "gather")      # a round's schedule, just before its begin
        stopping("finish", "scatter")        # after begin: its post is out
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


main({"setup_missing": setup_missing, "gave_up": gave_up, "cma_rank": cma_rank,
      "late_word": late_word, "dies": dies, "held": held, "hier_dies": hier_dies})
