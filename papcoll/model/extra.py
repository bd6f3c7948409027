"""``extra`` and ``tail`` (params.py): what a call takes beyond the model's play of it, and what
its slowest calls add to its mean.

The protocols play papcoll's messages, copies, flags and waits, not its software: a zero-copy
call over MPI RMA runs Python's path every time (no plan serves it), a CMA call sets up its
reads. ``model calibrate`` measures each algorithm's ``extra`` last, on the parameters it has
just measured: balanced 8 B calls, every algorithm in turn, between rank 0 and one partner
while every other process sleeps -- another node's master for the algorithms that run between
nodes, a process of rank 0's own node for the intra-node ones -- less the model's play of the
same call. Two processes with their cores free: no shape the validation checks (N = 4), and
no scheduler in the way.

Every parameter is a usual time (timing.py), so the model plays a usual call; the arrival
benchmark reports the mean, which its slowest calls (a preemption, a scheduler's slice) pull
up. ``tail`` is that mean over the usual, of the same balanced 8 B calls made by the whole
job, every process calling, as the benchmark's are: the median over the algorithms between
nodes. The pairs above could not show it: their sleeping neighbours' wake-ups are not the
job's, and at 2 x 2 they read 1.3-1.4 where the whole job's calls read 1.1-1.2
(docs/model.md).
"""
import time

import numpy as np

from .. import Communicator
from .predict import ALGORITHMS, call_time
from .protocols import INTRANODE
from .timing import usual

BLOCK = 8
CALLS, WARM = 200, 20
LEAST = 10           # timed calls of each algorithm, however slow the pair
BUDGET = 5.0         # seconds for one measurement's timed rounds: where a call takes ms (the
                     # emulated pair), calibrate's three of them must leave it under a minute


def names(between):
    """The algorithms measured on a pair between nodes (``between``) or inside one."""
    return [a for a in ALGORITHMS if (a in INTRANODE) != between]


def rounds(pace):
    """(warm-up, timed) rounds where a round takes ``pace`` seconds: ``WARM`` and ``CALLS``,
    or as many as fit in a fifth of ``BUDGET`` and in ``BUDGET``, but 1 and ``LEAST`` at
    least."""
    return (max(1, min(WARM, int(BUDGET / 5 / pace))),
            max(LEAST, min(CALLS, int(BUDGET / pace))))


def calls(comm, algorithms):
    """On every rank of ``comm``: balanced ``BLOCK``-byte calls of every algorithm in turn,
    after an MPI barrier each, as the arrival benchmark calls them (one algorithm's calls in a
    row ran quicker than the benchmark's). On rank 0, {algorithm: array of each call's mean
    time over the ranks, seconds}; None elsewhere. The rounds: :func:`rounds` at the first
    round's pace (rank 0's, so every rank makes the same calls)."""
    send = np.arange(comm.Get_size() * BLOCK, dtype=np.uint8)
    recv = np.empty_like(send)

    def one_round(pc):
        times = []
        for name in algorithms:
            comm.Barrier()
            start = time.perf_counter()
            pc.Alltoall(send, recv, algorithm=name)
            times.append(time.perf_counter() - start)
        return times

    with Communicator(comm) as pc:
        start = time.perf_counter()
        one_round(pc)
        pace = time.perf_counter() - start          # the first round's, set-up and all
        warm, timed = comm.bcast(rounds(pace), root=0)
        for _ in range(warm):
            one_round(pc)
        times = np.array([one_round(pc) for _ in range(timed)]).T    # (algorithm, call)
        every = comm.gather(times, root=0)
    if every is None:
        return None
    mean = np.mean(every, axis=0)
    return {name: mean[j] for j, name in enumerate(algorithms)}


def measure(pair, algorithms):
    """On rank 0 of ``pair``, {algorithm: seconds}: the usual (timing.py) of :func:`calls`,
    as every link's is measured; None on rank 1."""
    got = calls(pair, algorithms)
    return got and {name: float(usual(t)) for name, t in got.items()}


def tail(comm):
    """On rank 0 of ``comm`` (the whole job, two nodes or more), :func:`tail_of` the
    algorithms between nodes' :func:`calls`; None elsewhere."""
    got = calls(comm, names(True))
    return got and tail_of(got)


def tail_of(times):
    """The median over algorithms of their calls' mean over their usual: ``times``
    {algorithm: each call's seconds}."""
    return float(np.median([np.mean(t) / usual(t) for t in times.values()]))


def residuals(machine, nodes, measured):
    """{algorithm: measured less the model's play of the same call (arrivals together), at
    least 0} on ``machine`` (``extra`` not yet in it, ``tail`` 1) for the pair's shape
    ``nodes``."""
    zero = np.zeros(sum(map(len, nodes)))
    return {name: max(0.0, t - call_time(machine, nodes, BLOCK, name, zero))
            for name, t in measured.items()}
