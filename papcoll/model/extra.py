"""``extra``, by algorithm (params.py): what a call takes beyond the model's play of it.

The protocols play papcoll's messages, copies, flags and waits, not its software: a zero-copy
call over MPI RMA runs Python's path every time (no plan serves it), a CMA call sets up its
reads. ``model calibrate`` measures each algorithm's last, on the parameters it has just
measured: balanced 8 B calls, every algorithm in turn, between rank 0 and one partner while
every other process sleeps -- another node's master for the algorithms that run between
nodes, a process of rank 0's own node for the intra-node ones -- less the model's play of the
same call. Two processes with their cores free: no shape the validation checks (N = 4), and
no scheduler in the way.
"""
import time

import numpy as np

from .. import Communicator
from .predict import ALGORITHMS, call_time
from .protocols import INTRANODE
from .timing import usual

BLOCK = 8
CALLS, WARM = 200, 20
LEAST = 20           # timed calls of each algorithm, however slow the pair
BUDGET = 10.0        # seconds for the timed rounds: where a call takes ms (the emulated pair),
                     # 220 rounds of every algorithm took most of calibrate's two minutes


def names(between):
    """The algorithms measured on a pair between nodes (``between``) or inside one."""
    return [a for a in ALGORITHMS if (a in INTRANODE) != between]


def rounds(pace):
    """(warm-up, timed) rounds where a round takes ``pace`` seconds: ``WARM`` and ``CALLS``,
    or as many as fit in a fifth of ``BUDGET`` and in ``BUDGET``, but 1 and ``LEAST`` at
    least."""
    return (max(1, min(WARM, int(BUDGET / 5 / pace))),
            max(LEAST, min(CALLS, int(BUDGET / pace))))


def measure(pair, algorithms):
    """On both ranks of ``pair``: balanced calls of every algorithm in turn, after an MPI
    barrier each, as the arrival benchmark calls them (one algorithm's calls in a row ran
    quicker than the benchmark's). On rank 0, {algorithm: seconds}: the usual (timing.py)
    over calls of both ranks' mean time in it, as every link's is measured; None on rank 1.
    The rounds: :func:`rounds` at the first round's pace (rank 0's, so both ranks make the
    same calls)."""
    send = np.arange(2 * BLOCK, dtype=np.uint8)
    recv = np.empty_like(send)
    out = {}

    def one_round(pc):
        times = []
        for name in algorithms:
            pair.Barrier()
            start = time.perf_counter()
            pc.Alltoall(send, recv, algorithm=name)
            times.append(time.perf_counter() - start)
        return times

    with Communicator(pair) as pc:
        start = time.perf_counter()
        one_round(pc)
        pace = time.perf_counter() - start          # the first round's, set-up and all
        warm, calls = pair.bcast(rounds(pace), root=0)
        for _ in range(warm):
            one_round(pc)
        times = np.array([one_round(pc) for _ in range(calls)]).T    # (algorithm, call)
        both = pair.gather(times, root=0)
        if both is not None:
            mean = np.mean(both, axis=0)
            out = {name: float(usual(mean[j])) for j, name in enumerate(algorithms)}
    return out if pair.Get_rank() == 0 else None


def residuals(machine, nodes, measured):
    """{algorithm: measured less the model's play of the same call (arrivals together), at
    least 0} on ``machine`` (``extra`` not yet in it) for the pair's shape ``nodes``."""
    zero = np.zeros(sum(map(len, nodes)))
    return {name: max(0.0, t - call_time(machine, nodes, BLOCK, name, zero))
            for name, t in measured.items()}
