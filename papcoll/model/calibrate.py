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
import contextlib
import mmap
import os
import sys
import time
from collections import Counter

import numpy as np
from mpi4py import MPI

from .. import Communicator, native, topology
from ..algorithms import policy
from ..outfile import out_file
from ..progress import Deadline, idle_barrier
from ..transport import transport_class
from . import cma, extra, params, scheduler
from .links import BIG, SMALL, mpi_link, net_link
from .timing import timed

SETUP = 60.0                           # seconds any set-up collective may take
COPIES = [1 << 20, 4 << 20, 16 << 20, 64 << 20]   # copy_G's sizes: from the caches to memory


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


@contextlib.contextmanager
def on_cpu(cpu):
    """This process on ``cpu`` alone while a measure runs, on its own CPUs again after."""
    mine = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, mine)


def spread(comm, cpus):
    """Each process of ``comm`` (on one machine) on one of ``cpus`` while it measures, in
    turn over them. Unchanged where there is one CPU.

    So a pair that measures a link or ``extra`` runs on two CPUs, and measures the link: left
    to the scheduler, each of three calibrations here had one parameter read as if the pair
    shared a core (MPI's L 4.6 us and g 4.4 between nodes, against 0 and 1.5-1.6; inside,
    3.9 and 3.4; ``flag`` 3.6 against 0.25); bound two to a CPU by the launch, every link
    between nodes went through a context switch (``net_o`` 5-7 us against 1.0-1.5). Where
    processes share cores, the model has ``cores`` and ``wake`` for it. ``wake`` itself is
    measured where the launch placed the processes, as the program will run: here unbound
    four woke three on one CPU and one on the other now and then (a round 13-24 us, against
    6-11 two to each); in one VM, bound two to a vCPU, a round took 2 ms."""
    if len(cpus) < 2:
        return contextlib.nullcontext()
    return on_cpu(cpus[comm.Get_rank() % len(cpus)])


@contextlib.contextmanager
def measuring_pair(comm, partner, cpus):
    """Rank 0 and ``partner`` as a communicator of two, rank 0 first, each on a CPU of its own
    (``spread`` over ``cpus``: give none where they are on different machines); None on every
    other rank. Freed after; then every rank waits asleep, since the next pair's measurement
    needs the cores."""
    rank = comm.Get_rank()
    pair = comm.Split(0 if rank in (0, partner) else MPI.UNDEFINED, 0 if rank == 0 else 1)
    if pair == MPI.COMM_NULL:
        yield None
    else:
        try:
            with spread(pair, cpus):
                yield pair
        finally:
            pair.Free()
    idle_barrier(comm)


def main(argv):
    p = argparse.ArgumentParser(prog="python -m papcoll model calibrate", description=__doc__)
    p.add_argument("--out", required=True, type=out_file, help="the parameter file to write")
    p.add_argument("--timeout", type=float, default=SETUP, help="seconds any wait may take")
    p.add_argument("--repeat", type=int, default=1, metavar="K",
                   help="calibrate K times in this launch and keep each parameter's lower "
                        "median, the middle one where K is odd (docs/model.md, 'The median "
                        "of calibrations in one launch')")
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error(f"--repeat {args.repeat}: at least 1")
    started = time.monotonic()
    runs = []
    for _ in range(args.repeat):
        got = calibrate_once(args.timeout)
        if isinstance(got, int):
            return got
        runs.append(got)
    if MPI.COMM_WORLD.Get_rank() == 0:
        values, sources, about = params.median(runs)
        about += f"; calibrated in {time.monotonic() - started:.1f} s"
        params.save(params.make(about, sources, **values), args.out)
        print(f"model calibrate: {args.out}: {about}")
        for k in params.NAMES:
            print(f"  {k:18} {values[k]!s:>24}  {sources.get(k, '')}")
    return 0


def cores(placed, nodes):
    """``cores`` per node of a machine that holds ``nodes`` and processes on the CPUs
    ``placed`` (one set each), and where it came from.

    The model shares a node's cores evenly among its processes. Where the launch bound every
    process to one CPU and some CPU holds more than one, they are not shared evenly: mpiexec
    -bind-to core puts ranks 0 and 2 of three on one CPU of two. Every process of an alltoall
    waits for every other's data, so the busiest CPU's processes set every process's pace:
    the node's processes get cores as if each ran that many to a CPU. At 3 x 1 here that put
    the median scoring within 25 % at about 70 %, from about 40 % with the CPUs shared evenly
    (docs/model.md, "Shared cores as the launch binds them"). Else the CPUs, evenly."""
    ppn, cpus = len(placed) / nodes, bound(placed)
    if cpus:
        busiest = max(Counter(cpus).values())
        if busiest > 1:
            return ppn / busiest, (f"rank 0's machine's processes over the nodes it holds, "
                                   f"over the {busiest} bound to its busiest CPU")
    return (len(set().union(*placed)) / nodes,
            "the CPUs of rank 0's machine's processes over the nodes it holds")


def placement(placed, ranks):
    """The CPU each process runs on, by rank, where every process of ``ranks`` (rank 0's
    machine's, in the order of ``placed``: their CPUs) is bound to one and they are all the
    job's first ranks; else none. Which CPUs share (docs/model.md, "A write that waits for
    its target's turn")."""
    cpus = bound(placed)
    if ranks != list(range(len(ranks))) or not cpus:
        return [], "none: not every process is bound to one CPU, or not all on rank 0's machine"
    return cpus, "the CPU each process of rank 0's machine is bound to"


def bound(placed):
    """The one CPU of each of the processes on the CPUs ``placed``, where every one is bound
    to one; else None."""
    return [min(c) for c in placed] if all(len(c) == 1 for c in placed) else None


def calibrate_once(timeout):
    """One calibration: on rank 0 its (values, sources, about); None on every other rank; an
    exit status on every rank where this launch cannot calibrate."""
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    topo = topology.discover(comm, Deadline(timeout))
    machine = comm.Split_type(MPI.COMM_TYPE_SHARED, rank)
    zeros = comm.bcast(machine.allgather(rank), root=0)      # the ranks on rank 0's machine
    placed = machine.allgather(os.sched_getaffinity(0))       # my machine's processes' CPUs
    cpus = sorted(set().union(*placed))
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

    def pair_with(partner):          # on a CPU each where the partner is on rank 0's machine
        return measuring_pair(comm, partner, cpus if partner in zeros else [])

    if rank == 0:
        take(local_params())
    poll = flag = 0.0
    # inside a node papcoll's writes take another path than between nodes only where the
    # nodes are machines of their own (over verbs: the NIC's loopback, not the link)
    apart = far not in zeros and own_node
    for kind, partner in (("flag", mate), ("net", far), ("mpi_inter", far), ("mpi_intra", mate),
                          *((("net_local", mate),) if apart else ())):
        with pair_with(partner) as pair:
            if pair is None:
                continue
            if kind == "flag":
                flag = scheduler.flag_time(pair, timeout)
            elif kind == "net_local":
                result = net_link(pair, timeout, with_ack=False)
                if result:
                    values["net_local_L"] = result[0]["L"]
                    sources["net_local_L"] = (f"as net_L, between rank 0 and a process of its "
                                              f"node: {result[1]['L']}")
            elif kind == "net":
                for where, prefix in (("inbox", "net_"), ("given", "net_given_"),
                                      ("exposed", "net_exposed_")):
                    result = net_link(pair, timeout, where)
                    if result and where == "inbox":
                        poll = result[2]
                    take(result and result[:2], prefix)
            else:
                take(mpi_link(pair, poll), kind + "_")
    if rank in zeros:
        take(cma_params(machine))
        wake = scheduler.wake_time(machine, flag, timeout)   # placed as the launch does
    machine.Free()
    measured = []                   # rank 0's: (the pair's shape, {algorithm: seconds})
    for partner, between in ((far, True), *(((mate, False),) if own_node else ())):
        with pair_with(partner) as pair:
            got = pair and extra.measure(pair, extra.names(between))
        if got is not None:
            measured.append(([[0], [1]] if between else [[0, 1]], got))
    tail = extra.tail(comm)
    if rank == 0:
        values["poll"], sources["poll"] = poll, "the transport's poll that finds nothing, usual"
        transport = transport_class()
        values["net_shared"] = int(transport.name == "mpi-rma" and far in zeros)
        sources["net_shared"] = "the transport, and whether the far partner is on rank 0's machine"
        values["mpi_inter_shared"] = int(far in zeros)
        sources["mpi_inter_shared"] = "whether the far partner is on rank 0's machine"
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
        values["cores"], sources["cores"] = cores(placed, len({topo.node_of[r] for r in zeros}))
        values["placement"], sources["placement"] = placement(placed, zeros)
        about = (f"{policy.library_version()}; {size} processes as "
                 f"{len(topo.nodes)} x {topo.ppn}{' (emulated)' if topo.emulated else ''}, "
                 f"transport {transport.name}")
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
        return values, sources, about
    return None
