"""MPI worker for arrival behaviour, run as ``pap.py order ALG...`` or ``pap.py timeout ALG``.

order: the last rank arrives LATE seconds after the others. A PAP-aware algorithm lets the early
    ranks finish every exchange among themselves before it arrives; Direct does not.
timeout: the last rank never calls; the others must raise PapcollTimeoutError naming it within
    the timeout, the Communicator must refuse further calls, and close() must still work, at
    once, on every rank. The
    call that times out has the first call's shape (``same``: an algorithm's plan takes it)
    or a new one (``new``: the full path).
interrupt: the same, but Ctrl-C arrives during the wait: it must get through at once.
hier_order NAME LATE: N=4 as 2 nodes of 2 (PAPCOLL_NODE_SIZE=2); rank LATE (2, the second
    node's master, or 3, a non-master) arrives late. Rank 0 prints, for every early rank, the
    ranks whose blocks it received only after the late arrival. A node's aggregate needs all
    of the node, so blocks from the late rank's node are held up by nature; pap_shm_direct
    must hold up nothing else, shm_direct also holds the late node's own early rank.
handed_on: N=3; rank 1 waits for blocks of rank 2 whose flag rank 0 raises (as a remote
    master's blocks reach a non-master through its own master), and rank 2 has already sent
    its next step's message: that is no disagreement (rank 2 may have finished, rank 0 be slow
    to hand on), while the same message from a rank that raises its flag itself is one.
"""
import os
import signal
import sys
import time
from types import SimpleNamespace

import numpy as np
from mpi4py import MPI

import papcoll
from papcoll import rendezvous
from papcoll.algorithms.intranode import IntraNodeAlgorithm

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
late_rank = size - 1
LATE = 1.0


def late_clock_offset(pingpongs=10):
    """Collective: what to add to my time.monotonic() to get the late rank's. Ranks may run on
    different machines (scripts/softroce-vm --hosts 2), whose monotonic clocks are unrelated.
    From the fastest of a few ping-pongs with the late rank: off by at most half its round trip."""
    stamp = np.zeros(1)
    best = (float("inf"), 0.0)                           # (round trip, offset)
    for peer in range(size):
        for _ in range(pingpongs if peer != late_rank else 0):
            if rank == late_rank:
                world.Recv(stamp, source=peer)
                stamp[0] = time.monotonic()
                world.Send(stamp, dest=peer)
            elif rank == peer:
                sent = time.monotonic()
                world.Send(stamp, dest=late_rank)
                world.Recv(stamp, source=late_rank)
                back = time.monotonic()
                best = min(best, (back - sent, stamp[0] - (sent + back) / 2))
    return best[1] if rank != late_rank else 0.0


def order(name, nbytes):
    with papcoll.Communicator(world, trace=True) as pc:
        send = np.full(size * nbytes, rank, np.uint8)
        recv = np.empty_like(send)
        pc.Alltoall(send, recv, algorithm=name)          # warm-up: set-up cost is not arrival
        offset = late_clock_offset()
        world.Barrier()
        if rank == late_rank:
            time.sleep(LATE)
        arrived = time.monotonic()
        pc.Alltoall(send, recv, algorithm=name)
        assert (recv.reshape(size, nbytes) == np.arange(size)[:, None]).all()
        events = pc.traces[-1]["events"]
    late_arrival = world.bcast(arrived, root=late_rank)
    # Exchanges among early ranks that finished only after the late rank arrived:
    held_up = [(what, peer, round(t + offset - late_arrival, 3)) for what, peer, t in events
               if rank != late_rank and peer != late_rank and what in ("sent", "received")
               and t + offset > late_arrival]
    return world.gather(held_up, root=0)


def hier_order(name, late):
    with papcoll.Communicator(world, trace=True) as pc:
        send = np.full(size * 8, rank, np.uint8)
        recv = np.empty_like(send)
        pc.Alltoall(send, recv, algorithm=name)          # warm-up: set-up cost is not arrival
        world.Barrier()
        if rank == late:
            time.sleep(LATE)
        arrived = time.monotonic()
        pc.Alltoall(send, recv, algorithm=name)
        assert (recv.reshape(size, 8) == np.arange(size)[:, None]).all()
        events = pc.traces[-1]["events"]
    late_arrival = world.bcast(arrived, root=late)
    held = sorted({peer for what, peer, t in events
                   if what == "received" and t > late_arrival and peer != late})
    return world.gather(held if rank != late else None, root=0)


def handed_on():
    comm = world.Dup()
    if rank == 2:
        comm.send(("close", None), dest=1, tag=rendezvous.TAG)      # its next meeting
    comm.Barrier()
    if rank == 1:
        waiting = SimpleNamespace(ctx=SimpleNamespace(comm=comm), name="pap_shm_direct")
        loops = SimpleNamespace(missing=lambda: [0], flags=SimpleNamespace(load=lambda q: 0))
        # source 0 brings rank 2's blocks; rank 0 raises its flag
        IntraNodeAlgorithm.elsewhere(waiting, "scatter", loops, 1, [[0, 2]], signalled_by=[0])
        try:
            IntraNodeAlgorithm.elsewhere(waiting, "scatter", loops, 1, [[0, 2]])
            raise AssertionError("a message from a rank that raises its own flag was let by")
        except papcoll.MismatchError as err:
            assert "rank 2 is at 'close'" in str(err), err
    comm.Barrier()
    comm.Free()


def one_call_made(name, shape):
    """A Communicator after one call, and the buffers for the next: of the same ``shape``
    (``same``: an algorithm's plan takes it) or a ``new`` one (the full path)."""
    pc = papcoll.Communicator(world)
    send = np.zeros(size * 16, np.uint8)
    recv = np.empty_like(send)
    pc.Alltoall(send, recv, algorithm=name)
    world.Barrier()
    if shape == "new":
        send = np.zeros(size * 24, np.uint8)
        recv = np.empty_like(send)
    return pc, send, recv


def timeout(name, shape):
    pc, send, recv = one_call_made(name, shape)
    if rank != late_rank:
        start = time.monotonic()
        try:
            pc.Alltoall(send, recv, algorithm=name)
            raise AssertionError(f"{name}: rank {rank} finished without rank {late_rank}")
        except papcoll.PapcollTimeoutError as err:
            elapsed = time.monotonic() - start
            assert err.missing == [late_rank], err
            assert f"[{late_rank}]" in str(err), err
            limit = float(os.environ["PAPCOLL_TIMEOUT"])
            assert elapsed < limit + 2, f"timeout took {elapsed:.1f} s"
            print(f"rank {rank}: {err} ({elapsed:.1f} s)", flush=True)
        try:
            pc.Alltoall(send, recv, algorithm=name)
            raise AssertionError("a broken Communicator accepted another call")
        except papcoll.CommunicatorStateError:
            pass
    world.Barrier()           # the late rank stays out of the call until everyone has given up
    start = time.monotonic()
    pc.close()                # broken ranks release locally; the late one sees they gave up
    pc.close()
    assert time.monotonic() - start < 2, f"close took {time.monotonic() - start:.1f} s"


def interrupt(name, shape):
    """Ctrl-C while waiting for a rank that never comes: KeyboardInterrupt within a fraction
    of a second (long before the timeout), and the Communicator refuses further calls."""
    pc, send, recv = one_call_made(name, shape)
    if rank != late_rank:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        signal.signal(signal.SIGALRM, lambda *_: os.kill(os.getpid(), signal.SIGINT))
        start = time.monotonic()
        try:
            pc.Alltoall(send, recv, algorithm=name)
            raise AssertionError(f"{name}: rank {rank} finished without rank {late_rank}")
        except KeyboardInterrupt:
            elapsed = time.monotonic() - start
            assert elapsed < 1.5, f"Ctrl-C took {elapsed:.1f} s to get through"
        try:
            pc.Alltoall(send, recv, algorithm=name)
            raise AssertionError("an interrupted Communicator accepted another call")
        except papcoll.CommunicatorStateError as err:
            assert "KeyboardInterrupt" in str(err), err
    world.Barrier()
    pc.close()


mode, name = sys.argv[1], sys.argv[2]
if mode == "order":
    for name in sys.argv[2:]:                            # one job for several: a job's start-up
        for nbytes in (8, 65536):                        # is most of its time under emulation
            held = order(name, nbytes)
            if rank == 0:
                held = {r: h for r, h in enumerate(held) if h}
                print(f"ORDER {name} {nbytes}: held up {held if held else 'nothing'}",
                      flush=True)
elif mode == "hier_order":
    held = hier_order(name, int(sys.argv[3]))
    if rank == 0:
        print(f"HELD {name} late {sys.argv[3]}: {held}", flush=True)
elif mode == "handed_on":
    handed_on()
    if rank == 0:
        print("HANDED_ON ok", flush=True)
elif mode == "interrupt":
    interrupt(name, sys.argv[3])
    if rank == 0:
        print(f"INTERRUPT {name} ok", flush=True)
else:
    timeout(name, sys.argv[3] if len(sys.argv) > 3 else "same")
    if rank == 0:
        print(f"TIMEOUT {name} ok", flush=True)
