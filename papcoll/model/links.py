"""calibrate's measures of links between a pair of ranks: MPI's point-to-point (LogGP and its
eager limit) and papcoll's own transport (LogGP by where its writes land, and over verbs a
write's completion). Each side of a pair calls; rank 0 gets the values, with the measurement
that gave each (calibrate.py's conventions: usual times, one-way as half a round trip)."""
import errno
import os
import time

import numpy as np
from mpi4py import MPI

from ..native import xport
from ..progress import Deadline
from ..transport import open_transport
from .timing import timed, usual

SMALL, MID, BIG = 8, 64 << 10, 1 << 20
# 256 B: Open MPI 5's shared memory sends up to 256 B inline (btl_sm_max_inline_send) and
# waits for the receiver from 512 B
EAGER_SIZES = [SMALL, 256] + [1 << k for k in range(10, 21)]
BATCH = 16                             # writes in a row: the peer's receives and my queue allow
BATCHES = 4                            # g's batches (one alone read 1.3 us and 5.8 us here)
LATE = 5e-3                            # a peer's delay that shows a call waiting for it
                                       # (or a few one-way times where the link is slower)
LINK_BUDGET, LINK_LEAST = 1.0, 10      # a size's round trips: as many as fit in 1 s where
                                       # the link is slow (the pair: 50 ms each), 10 at least


def round_trips(pair, nbytes, round_trip, part=1):
    """How many timed round trips of ``nbytes`` a link's measure makes: 50 (8 above 64 KiB), or
    as many as fit in LINK_BUDGET at rank 0's pace, LINK_LEAST at least -- each divided by
    ``part`` where the size is measured in that many parts; both sides make the same (by its
    own clock, one would wait for a message the other never sends). ``round_trip()`` makes
    one, untimed by the caller."""
    start = time.perf_counter()
    round_trip()
    pace = time.perf_counter() - start
    most = (50 if nbytes <= MID else 8) // part
    return pair.bcast(min(most, max(LINK_LEAST // part, int(LINK_BUDGET / part / pace))),
                      root=0)


def one_ways(measure):
    """{size: one-way seconds} of SMALL, MID and BIG, ``measure(nbytes, part)`` giving one
    size's. SMALL, which gives L, in two halves, before the larger sizes and after them, the
    quicker half kept: a transient that slows a whole half is not the link's usual (once in
    six calibrations in one VM, 8 B writes took 15.7 ms a round trip for under a second, where
    the rest of that calibration read 0.1-0.4 ms)."""
    first = measure(SMALL, 2)
    times = {n: measure(n, 1) for n in (MID, BIG)}
    times[SMALL] = min(first, measure(SMALL, 2))
    return times


def pingpong(comm, me, other, nbytes, part=1):
    """Half the usual round trip of ``nbytes`` by MPI Send/Recv between ranks 0 and 1 of
    ``comm`` (every rank of it calls; the same reps on both), in ``part`` of a size's round
    trips (:func:`round_trips`)."""
    a, b = np.zeros(max(nbytes, 1), np.uint8)[:nbytes], np.zeros(max(nbytes, 1), np.uint8)[:nbytes]

    def one():
        if me == 0:
            comm.Send(a, dest=other)
            comm.Recv(b, source=other)
        else:
            comm.Recv(b, source=other)
            comm.Send(a, dest=other)

    return timed(one, round_trips(comm, nbytes, one, part), budget=float("inf")) / 2


def mpi_link(pair, poll):
    """MPI's point-to-point between the pair's two ranks: its LogGP and eager limit; on rank 0,
    ({name: value}, {name: source}); None on rank 1."""
    me, other = pair.Get_rank(), 1 - pair.Get_rank()
    times = one_ways(lambda n, part: pingpong(pair, me, other, n, part))
    small, mid, big = times[SMALL], times[MID], times[BIG]
    posts, batch = [], 64
    for _ in range(5):                         # o: an Isend's post; g: a batch's pace
        if me == 0:
            start = time.perf_counter()
            reqs = [pair.Isend(np.zeros(SMALL, np.uint8), dest=1, tag=i) for i in range(batch)]
            posted = time.perf_counter()
            MPI.Request.Waitall(reqs)
            pair.Recv(np.zeros(1, np.uint8), source=1)
            posts.append(((posted - start) / batch, time.perf_counter() - start - small))
        else:
            for i in range(batch):
                pair.Recv(np.zeros(SMALL, np.uint8), source=0, tag=i)
            pair.Send(np.zeros(1, np.uint8), dest=0)
    # the largest Send that does not wait for its Recv: a rendezvous waits out the receiver's
    # delay, which a barrier's skew (a one-way time) shortens by at most a quarter
    delay, eager = pair.bcast(max(LATE, 4 * small), root=0), 0
    for n in EAGER_SIZES:
        buf = np.zeros(n, np.uint8)
        pair.Barrier()
        if me == 0:
            start = time.perf_counter()
            pair.Send(buf, dest=1)
            waited = time.perf_counter() - start > delay / 2
        else:
            time.sleep(delay)
            pair.Recv(buf, source=0)
            waited = None
        if pair.bcast(waited, root=0):
            break
        eager = n
    if me:
        return None
    o = usual([p for p, _ in posts])
    g = max(o, usual([t for _, t in posts]) / batch)
    G = (big - mid) / (BIG - MID)
    return ({"L": max(0.0, small - o - SMALL * G - poll), "o": o, "g": g, "G": G, "eager": eager},
            {"L": f"half the usual ping-pong round trip of {SMALL} B, less o, its bytes and "
                  f"a poll",
             "o": f"an MPI_Isend's post of {SMALL} B (usual mean over a batch of {batch})",
             "g": f"a batch of {batch} MPI_Isends of {SMALL} B until received, per message",
             "G": f"ping-pong one-way times of {MID} B and {BIG} B: the slope",
             "eager": f"the largest of {SMALL} B, 256 B and powers of two from 1 KiB whose "
                      f"MPI_Send returned before a receiver {delay * 1e3:.0f} ms late posted its "
                      f"Recv (0: none)"})


WHERE = {  # where a link's writes land: the memory papcoll's calls write into
    "inbox": "the transport's own inbox (copy-based calls)",
    "given": "an inbox in memory the caller gives (the hierarchical masters' node segment)",
    "exposed": "a receive buffer the receiver exposed (zero-copy calls)"}


def takes_an_answer(pair, me, one, landed, seq, times):
    """On rank 0, 1 where a write completes (and so its notice goes) only once its target has
    taken it: the target makes no call for a while, and the write waits for it; 0 where it
    completes by itself, in about a round trip (the target's half-way mark). On rank 1, None."""
    late = pair.bcast(max(LATE, 8 * times[SMALL]) if me == 0 else None, root=0)
    pair.Barrier()
    if me:
        time.sleep(late)
        landed(seq[0] + 1)
        seq[0] += 1
        return None
    start = time.perf_counter()
    one(SMALL, complete=True)
    return int(time.perf_counter() - start > late / 2)


def net_link(pair, timeout, where="inbox", with_ack=True):
    """papcoll's transport between the pair's ranks, its writes landing ``where`` (WHERE):
    DATA puts with their notice, a ping-pong on the notice words; on rank 0 (values, sources,
    the transport's poll cost). ``with_ack``: measure ``net_ack`` too, where it applies."""
    me, other = pair.Get_rank(), 1 - pair.Get_rank()
    t = open_transport(pair, np.zeros(BIG, np.uint8) if where == "given" else BIG,
                       Deadline(timeout), owner="model calibrate")
    try:
        x, boards = t.native, t.boards
        poll = timed(x.poll, reps=2000, budget=0.1)
        seq = [0]
        # g's batch: over MPI RMA a peer's puts stay in flight until it answers, and a call
        # has at most 4 of them in flight per peer
        batch = BATCH if where == "inbox" else 4
        dest, at, rkey = xport.TO_INBOX, 0, 0
        if where == "exposed":
            exposed = np.zeros(BIG, np.uint8)
            mine = t.expose(exposed)
            dest = xport.TO_EXPOSED
            at, rkey = pair.sendrecv((mine.address, mine.rkey), dest=other, source=other)

        source = np.ones(BIG, np.uint8)          # (not the inbox: MPICH's puts from inside
                                                 # a window created over it did not complete)

        def one(nbytes, count=1, notice=True, complete=where != "inbox", posts=None):
            """Writes to the peer (with their DATA notice: one of the peer's few posted
            receives each; without, none); ``complete``: waits until they are complete, as a
            notice goes only once its data is complete at the peer, which over MPI RMA into
            memory MPI did not allocate takes the peer's answer; ``posts``: the time of the
            posts and the flush, without the wait, appended there."""
            src = source[:nbytes]
            key = t.source_key(src)
            start = time.perf_counter()
            for _ in range(count):
                seq[0] += notice
                rc = x.put(other, dest, at, rkey, src, key,
                           xport.DATA if notice else -1, seq[0], 1)
                if rc < 0:
                    raise OSError(-rc, f"model calibrate: a put failed ({os.strerror(-rc)})")
            x.flush()
            if posts is not None:
                posts.append(time.perf_counter() - start)
            if complete and (rc := x.complete(timeout)) < 0:
                raise OSError(-rc, f"model calibrate: a write never completed "
                                   f"({os.strerror(-rc)}, {timeout:g} s)")

        def arrived(s):
            """Whether the peer's write ``s`` has landed (its notice), else one poll."""
            if xport.notice_current(int(boards[xport.DATA, s % 2, other]), s):
                return True
            rc = x.poll()
            if rc < 0:                  # a write of mine failed (over verbs: its QP broke)
                raise OSError(-rc, f"model calibrate: the transport failed "
                                   f"({os.strerror(-rc)})")
            return False

        def landed(s):
            limit = time.monotonic() + timeout
            while not arrived(s):
                if time.monotonic() > limit:
                    raise TimeoutError(f"model calibrate: a peer's write never landed "
                                       f"(write {s} into {WHERE[where]}, {timeout:g} s)")

        def round_trip(nbytes, posts=None):
            if me == 0:
                one(nbytes, posts=posts)
                landed(seq[0])
            else:
                landed(seq[0] + 1)
                one(nbytes)

        def one_way(nbytes, part):
            round_trip(nbytes)                  # the first registers the source
            reps = round_trips(pair, nbytes, lambda: round_trip(nbytes), part)
            return timed(lambda: round_trip(nbytes), reps, budget=float("inf")) / 2

        times = one_ways(one_way)
        # o: rank 0's post and flush of a write with its notice, as every write of a call
        # carries one (over MPI RMA the flush puts the notice after the data), in round trips
        # that let the peer take each notice; the wait for completion untimed. g: batches
        # between them, each after round trips in which the last one's completions came back
        # (over verbs the send queue holds 64 writes; in the pair they return 25 ms later)
        posts, batches = [], []
        for _ in range(BATCHES):
            for _ in range(BATCH // BATCHES):
                round_trip(SMALL, posts)
            if me == 0:
                start = time.perf_counter()
                one(SMALL, batch, notice=False, complete=True)
                batches.append(time.perf_counter() - start)
        if me == 0:
            o, g = usual(posts), usual(batches) / batch
        pair.Barrier()
        copied, ack = t.inline, None
        # verbs: the NIC reads a MID B source after the post
        if with_ack and where == "inbox" and copied < MID:
            gaps = []

            def exchange():
                """Both write MID B to each other at once, as an alltoall's processes do: my
                write's completion less the peer's write's landing, on my clock."""
                pair.Barrier()
                one(MID)
                start, back, done = time.perf_counter(), None, None
                while back is None or done is None:
                    if back is None and arrived(seq[0]):
                        back = time.perf_counter()
                    if done is None:
                        rc = x.complete(0)
                        if rc == 0:
                            done = time.perf_counter()
                        elif rc != -errno.ETIMEDOUT:
                            raise OSError(-rc, f"model calibrate: a write failed "
                                               f"({os.strerror(-rc)})")
                    if time.perf_counter() - start > timeout:
                        raise TimeoutError(f"model calibrate: a write of an exchange neither "
                                           f"completed nor landed in {timeout:g} s")
                gaps.append(done - back)

            reps = round_trips(pair, MID, exchange)
            del gaps[:]
            for _ in range(reps):
                exchange()
            # a late start lengthens one side's gap as much as it shortens the other's
            ack = max(0.0, (usual(gaps) + pair.sendrecv(usual(gaps), dest=other,
                                                         source=other)) / 2)
        answered = takes_an_answer(pair, me, one, landed, seq, times)
        x.complete(timeout)
    finally:
        t.close()
    if me:
        return None
    G = (times[BIG] - times[MID]) / (BIG - MID)
    into = f" into {WHERE[where]}"
    values = {"L": max(0.0, times[SMALL] - o - SMALL * G - poll), "o": o, "g": max(o, g), "G": G,
              "answered": answered}
    sources = {"L": f"half the usual round trip of {SMALL} B DATA writes with notice{into} "
                    f"(ping-pong on the notice words), less o, its bytes and a poll",
               "o": f"one {SMALL} B write's post and flush with its notice{into} (rank 0's "
                    f"side of round trips)",
               "g": f"{batch} such writes posted and complete, per write (the usual of "
                    f"{BATCHES} batches)",
               "G": f"one-way times of {MID} B and {BIG} B writes{into}: the slope",
               "answered": f"whether an {SMALL} B write{into} completed only once its target, "
                           f"{LATE * 1e3:.0f} ms (or 8 one-way times) late to make any "
                           f"call, took it"}
    if where == "inbox":
        values["copied"] = copied
        values["ack"] = 0.0 if ack is None else ack
        sources["copied"] = "the transport's own, as opened for two processes (verbs: " \
                            "less above 64 peers, its staging rings' room shared among them)"
        sources["ack"] = ("unused: the transport copies every write at its post" if ack is None
                          else f"both write {MID} B to each other at once, as an alltoall's "
                               f"processes do: a write's completion at its poster less the "
                               f"peer's write's landing there, the usual on each side, their "
                               f"mean (a late start cancels)")
    return values, sources, poll
