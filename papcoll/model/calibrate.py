"""``mpiexec -n N python -m mpi4py -m papcoll model calibrate --out FILE``: measure the model's
parameters (params.py) on this machine, in the node shape it is launched with
(PAPCOLL_NODE_SIZE emulates nodes as elsewhere), in about a minute at most (a second here,
52-66 s in the emulated two-host pair), and write them with the measurement that gave each.

Rank 0 measures against two partners: ``mate``, the lowest other rank on its own machine
(shared memory, CMA, MPI inside a node), and ``far``, the master of another node (MPI between
nodes, papcoll's transport). Everyone else waits, until the whole job's calls give ``tail``
(extra.py), last. Each time is the usual over repetitions (the mean of the quickest 95 %:
timing.py), except where it says otherwise. A one-way time is half a ping-pong's round trip;
the model's one-way time of a message is o + L + n G + a poll, so L is what is left of it.
Like the benchmarks, it times MPI's own calls, which MPI does not bound: run it where every
rank runs.
"""
import argparse
import errno
import mmap
import os
import sys
import time

import numpy as np
from mpi4py import MPI

from .. import Communicator, native, topology
from ..native import xport
from ..progress import Deadline, idle_barrier
from ..transport import open_transport, transport_class
from . import cma, extra, params, scheduler
from .timing import timed, usual

SETUP = 60.0                           # seconds any set-up collective may take
SMALL, MID, BIG = 8, 64 << 10, 1 << 20
COPIES = [1 << 20, 4 << 20, 16 << 20, 64 << 20]   # copy_G's sizes: from the caches to memory
EAGER_SIZES = [SMALL] + [1 << k for k in range(10, 21)]
BATCH = 16                             # writes in a row: the peer's receives and my queue allow
BATCHES = 5                            # g's batches (one alone read 1.3 us and 5.8 us here)
EAGER_DELAY = 5e-3                     # the receiver's delay that shows a send waiting for
                                       # it, or 4 one-way times where the link is slower
LINK_BUDGET, LINK_LEAST = 1.0, 10      # a size's round trips: as many as fit in 1 s where
                                       # the link is slow (the pair: 50 ms each), 10 at least


def round_trips(pair, nbytes, round_trip):
    """How many timed round trips of ``nbytes`` a link's measure makes: 50 (8 above 64 KiB), or
    as many as fit in LINK_BUDGET at rank 0's pace, LINK_LEAST at least; both sides make
    the same (by its own clock, one would wait for a message the other never sends).
    ``round_trip()`` makes one, untimed by the caller."""
    start = time.perf_counter()
    round_trip()
    pace = time.perf_counter() - start
    most = 50 if nbytes <= MID else 8
    return pair.bcast(min(most, max(LINK_LEAST, int(LINK_BUDGET / pace))), root=0)


def pingpong(comm, me, other, nbytes):
    """Half the usual round trip of ``nbytes`` by MPI Send/Recv between ranks 0 and 1 of
    ``comm`` (every rank of it calls; the same reps on both)."""
    a, b = np.zeros(max(nbytes, 1), np.uint8)[:nbytes], np.zeros(max(nbytes, 1), np.uint8)[:nbytes]

    def one():
        if me == 0:
            comm.Send(a, dest=other)
            comm.Recv(b, source=other)
        else:
            comm.Recv(b, source=other)
            comm.Send(a, dest=other)

    return timed(one, round_trips(comm, nbytes, one), budget=float("inf")) / 2


def mpi_link(pair, poll):
    """MPI's point-to-point between the pair's two ranks: its LogGP and eager limit; on rank 0,
    ({name: value}, {name: source}); None on rank 1."""
    me, other = pair.Get_rank(), 1 - pair.Get_rank()
    small, mid, big = (pingpong(pair, me, other, n) for n in (SMALL, MID, BIG))
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
    delay, eager = pair.bcast(max(EAGER_DELAY, 4 * small), root=0), 0
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
             "eager": f"the largest of {SMALL} B and powers of two from 1 KiB whose MPI_Send "
                      f"returned before a receiver {delay * 1e3:.0f} ms late posted its Recv "
                      f"(0: none)"})


WHERE = {  # where a link's writes land: the memory papcoll's calls write into
    "inbox": "the transport's own inbox (copy-based calls)",
    "given": "an inbox in memory the caller gives (the hierarchical masters' node segment)",
    "exposed": "a receive buffer the receiver exposed (zero-copy calls)"}


def net_link(pair, timeout, where="inbox", ack=True):
    """papcoll's transport between the pair's ranks, its writes landing ``where`` (WHERE):
    DATA puts with their notice, a ping-pong on the notice words; on rank 0 (values, sources,
    the transport's poll cost). ``ack``: measure ``net_ack`` too, where it applies."""
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

        times = {}
        for nbytes in (SMALL, MID, BIG):
            round_trip(nbytes)                  # the first registers the source
            reps = round_trips(pair, nbytes, lambda: round_trip(nbytes))
            times[nbytes] = timed(lambda: round_trip(nbytes), reps, budget=float("inf")) / 2
        # o: rank 0's post and flush of a write with its notice, as every write of a call
        # carries one (over MPI RMA the flush puts the notice after the data), in round trips
        # that let the peer take each notice; the wait for completion untimed
        posts = []
        for _ in range(BATCH):
            round_trip(SMALL, posts)
        if me == 0:
            o = usual(posts)
            g = timed(lambda: one(SMALL, batch, notice=False, complete=True), BATCHES,
                      budget=float("inf")) / batch
        pair.Barrier()
        copied, ack = t.inline, None
        if ack and where == "inbox" and copied < MID:   # verbs: the NIC reads a MID B source late
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
        x.complete(timeout)
    finally:
        t.close()
    if me:
        return None
    G = (times[BIG] - times[MID]) / (BIG - MID)
    into = f" into {WHERE[where]}"
    values = {"L": max(0.0, times[SMALL] - o - SMALL * G - poll), "o": o, "g": max(o, g), "G": G}
    sources = {"L": f"half the usual round trip of {SMALL} B DATA writes with notice{into} "
                    f"(ping-pong on the notice words), less o, its bytes and a poll",
               "o": f"one {SMALL} B write's post and flush with its notice{into} (rank 0's "
                    f"side of round trips)",
               "g": f"{batch} such writes posted and complete, per write (the usual of "
                    f"{BATCHES} batches)",
               "G": f"one-way times of {MID} B and {BIG} B writes{into}: the slope"}
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


def cma_params(node, pages=64, reps=100):
    """The CMA model's parameters (DESIGN.md), measured as cma.py says: the other ranks of
    ``node`` read rank 0's memory. On rank 0 (values, sources); None elsewhere."""
    memory = None
    if node.Get_rank() == 0:
        native.allow_ptrace_any()
        memory = np.ones((node.Get_size() - 1) * pages * mmap.PAGESIZE, np.uint8)
    m = cma.measure(node, memory, pages, reps, lambda: idle_barrier(node))
    if m is None:
        return None
    gamma = [max(1e-3, float(m["gamma"][c])) for c in sorted(m["gamma"])]
    return ({"cma_alpha": m["alpha_us"] * 1e-6, "cma_l": m["l_us"] * 1e-6,
             "cma_beta": m["beta_ns_per_byte"] * 1e-9, "cma_page": mmap.PAGESIZE,
             "cma_gamma": gamma},
            {"cma_alpha": "median process_vm_readv of 1 B local and remote",
             "cma_l": f"the same with {pages} remote pages, less it, per page",
             "cma_beta": f"{pages} pages both sides, less {pages} remote only, per byte",
             "cma_page": "the page size",
             "cma_gamma": "pinning with c readers of rank 0 at once over one reader, c = 1..."})


def local_params():
    """What rank 0 measures alone: copies, entries."""
    a, b = np.ones(COPIES[-1], np.uint8), np.zeros(COPIES[-1], np.uint8)
    t0 = timed(lambda: np.copyto(b[:0], a[:0]), reps=2000, budget=0.1)
    t8 = timed(lambda: np.copyto(b[:SMALL], a[:SMALL]), reps=2000, budget=0.1)
    table = []                   # a copy of n bytes from one buffer into another touches 2 n
    for n in COPIES:
        tn = timed(lambda: np.copyto(b[:n], a[:n]), reps=200 if n <= BIG else 5, budget=0.3)
        table.append([2 * n, (tn - t8) / (n - SMALL)])
    s, r = np.ones(SMALL, np.uint8), np.zeros(SMALL, np.uint8)
    with Communicator(MPI.COMM_SELF) as mine:
        mine.Alltoall(s, r)
        entry = timed(lambda: mine.Alltoall(s, r), reps=2000, budget=0.2)
    mpi_entry = timed(lambda: MPI.COMM_SELF.Alltoall(s, r), reps=2000, budget=0.2)
    copy_o = max(0.0, t8 - t0)
    return ({"copy_o": copy_o, "copy_G": table,
             "entry": max(0.0, entry - t8), "mpi_entry": max(0.0, mpi_entry - t8)},
            {"copy_o": f"np.copyto of {SMALL} B less one of 0 B (numpy's own call)",
             "copy_G": f"np.copyto of {SMALL} B and of 1, 4, 16 and 64 MiB, again and again: "
                       f"the slope, by the 2 n bytes a copy of n touches",
             "entry": f"papcoll's Alltoall of {SMALL} B on one process, less an {SMALL} B copy",
             "mpi_entry": f"mpi4py's MPI_Alltoall of {SMALL} B on one process, less its copy"})


def main(argv):
    p = argparse.ArgumentParser(prog="python -m papcoll model calibrate", description=__doc__)
    p.add_argument("--out", required=True, help="the parameter file to write")
    p.add_argument("--timeout", type=float, default=SETUP, help="seconds any wait may take")
    args = p.parse_args(argv)
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    started = time.monotonic()
    topo = topology.discover(comm, Deadline(args.timeout))
    machine = comm.Split_type(MPI.COMM_TYPE_SHARED, rank)
    zeros = comm.bcast(machine.allgather(rank), root=0)      # the ranks on rank 0's machine
    problem = ("needs at least 2 nodes (PAPCOLL_NODE_SIZE emulates them)" if len(topo.nodes) < 2
               else "needs two processes on rank 0's machine" if len(zeros) < 2 else None)
    if problem:
        machine.Free()
        if rank == 0:
            print(f"model calibrate: {problem}", file=sys.stderr)
        return 2
    mate, far = zeros[1], topo.nodes[1][0]
    own_node = topo.node_of[mate] == topo.node_of[0]
    values, sources = {}, {}

    def take(result, prefix=""):
        if result is not None:
            values.update({prefix + k: v for k, v in result[0].items()})
            sources.update({prefix + k: v for k, v in result[1].items()})

    if rank == 0:
        take(local_params())
    poll = flag = 0.0
    # inside a node papcoll's writes take another path than between nodes only where the
    # nodes are machines of their own (over verbs: the NIC's loopback, not the link)
    apart = far not in zeros and own_node
    for kind, partner in (("flag", mate), ("net", far), ("mpi_inter", far), ("mpi_intra", mate),
                          *((("net_local", mate),) if apart else ())):
        pair = comm.Split(0 if rank in (0, partner) else MPI.UNDEFINED, 0 if rank == 0 else 1)
        if pair != MPI.COMM_NULL:
            if kind == "flag":
                flag = scheduler.flag_time(pair, args.timeout)
            elif kind == "net_local":
                result = net_link(pair, args.timeout, ack=False)
                if result:
                    values["net_local_L"] = result[0]["L"]
                    sources["net_local_L"] = (f"as net_L, between rank 0 and a process of its "
                                              f"node: {result[1]['L']}")
            elif kind == "net":
                for where, prefix in (("inbox", "net_"), ("given", "net_given_"),
                                      ("exposed", "net_exposed_")):
                    result = net_link(pair, args.timeout, where)
                    if result and where == "inbox":
                        poll = result[2]
                    take(result and result[:2], prefix)
            else:
                take(mpi_link(pair, poll), kind + "_")
            pair.Free()
        idle_barrier(comm)          # asleep: the next pair's measurement needs the cores
    if rank in zeros:
        take(cma_params(machine))
        wake = scheduler.wake_time(machine, flag, args.timeout)
    machine.Free()
    measured = []                   # rank 0's: (the pair's shape, {algorithm: seconds})
    for partner, between in ((far, True), *(((mate, False),) if own_node else ())):
        pair = comm.Split(0 if rank in (0, partner) else MPI.UNDEFINED, 0 if rank == 0 else 1)
        if pair != MPI.COMM_NULL:
            got = extra.measure(pair, extra.names(between))
            if got is not None:
                measured.append(([[0], [1]] if between else [[0, 1]], got))
            pair.Free()
        idle_barrier(comm)
    tail = extra.tail(comm)
    if rank == 0:
        values["poll"], sources["poll"] = poll, "the transport's poll that finds nothing, usual"
        transport = transport_class()
        values["net_shared"] = int(transport.name == "mpi-rma" and far in zeros)
        sources["net_shared"] = "the transport, and whether the far partner is on rank 0's machine"
        if not apart:
            values["net_local_L"] = values["net_L"]
            sources["net_local_L"] = ("net_L: one path (the far partner shares rank 0's "
                                      "machine)" if own_node else
                                      "net_L: rank 0's node has no other process here")
        values["copy_threshold"] = transport.copy_threshold
        sources["copy_threshold"] = f"the {transport.name} transport's own (measured there)"
        values["flag"], sources["flag"] = flag, "half the usual round trip of a flag (C waits)"
        values["wake"], sources["wake"] = wake, (
            "rounds where every process of rank 0's machine raises a flag and waits for all "
            "the others': the mean of the quickest 95 %, less flag")
        values["cores"] = len(os.sched_getaffinity(0)) / len({topo.node_of[r] for r in zeros})
        sources["cores"] = "rank 0's CPUs over the nodes its machine holds"
        about = (f"{MPI.Get_library_version().splitlines()[0].strip()}; {size} processes as "
                 f"{len(topo.nodes)} x {topo.ppn}{' (emulated)' if topo.emulated else ''}, "
                 f"transport {transport.name}; "
                 f"calibrated in {time.monotonic() - started:.1f} s")
        values["tail"], sources["tail"] = tail, (
            f"balanced {extra.BLOCK} B calls of every algorithm between nodes, in turn, by the "
            f"whole job: their mean over their usual time, the median over the algorithms")
        alone = params.make(about, sources, **{**values, "cores": 2, "tail": 1.0},
                            extra={})          # cores free; a usual call, as extra's pairs
        values["extra"] = {k: v for nodes, got in measured
                           for k, v in extra.residuals(alone, nodes, got).items()}
        sources["extra"] = (f"balanced {extra.BLOCK} B calls between rank 0 and another "
                            f"node's master (intra-node algorithms: a process of its node), "
                            f"the others asleep, all in turn: the usual time less the "
                            f"model's play")
        params.save(params.make(about, sources, **values), args.out)
        print(f"model calibrate: {args.out}: {about}")
        for k in params.NAMES:
            print(f"  {k:18} {values[k]!s:>24}  {sources.get(k, '')}")
    return 0
