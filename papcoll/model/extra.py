"""``extra``, by algorithm (params.py): what a call takes beyond the model's play of it.

The protocols play papcoll's messages, copies, flags and waits, not its software: a zero-copy
call over MPI RMA runs Python's path every time (no plan serves it), a CMA call sets up its
reads. ``model calibrate`` measures each algorithm's last, on the parameters it has just
measured: balanced 8 B calls, every algorithm in turn, between rank 0 and one partner while
every other process sleeps -- another node's master for the algorithms that run between nodes, a process of rank 0's own
node for the intra-node ones -- less the model's play of the same call. Two processes with
their cores free: no shape the validation checks (N = 4), and no scheduler in the way.
"""
import time

import numpy as np

from .. import Communicator
from .predict import ALGORITHMS, call_time
from .protocols import INTRANODE
from .timing import usual

BLOCK = 8
CALLS, WARM = 200, 20


def names(between):
    """The algorithms measured on a pair between nodes (``between``) or inside one."""
    return [a for a in ALGORITHMS if (a in INTRANODE) != between]


def measure(pair, algorithms):
    """On both ranks of ``pair``: balanced calls of every algorithm in turn, after an MPI
    barrier each, as the arrival benchmark calls them (one algorithm's calls in a row ran
    quicker than the benchmark's). On rank 0, {algorithm:
    seconds}: the usual (timing.py) over calls of both ranks' mean time in it, as every link's
    is measured; None on rank 1."""
    send = np.arange(2 * BLOCK, dtype=np.uint8)
    recv = np.empty_like(send)
    out = {}
    with Communicator(pair) as pc:
        for _ in range(WARM):
            for name in algorithms:
                pc.Alltoall(send, recv, algorithm=name)
        times = np.empty((len(algorithms), CALLS))
        for i in range(CALLS):
            for j, name in enumerate(algorithms):
                pair.Barrier()
                start = time.perf_counter()
                pc.Alltoall(send, recv, algorithm=name)
                times[j, i] = time.perf_counter() - start
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
