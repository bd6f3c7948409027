"""Aggregation: a machine of many nodes simulated on a few.

Node 0 is simulated whole, as it is; the other nodes of the machine are shared out among
``SIMULATED - 1`` representative nodes, ``weight`` each. A message between two simulated nodes
stands for ``weight`` alike (sim.py's ``Put(..., count)``: their CPU, their NICs' time, landing
with the last), so every node sends and receives as many messages and bytes as in the machine
modelled, and every process posts as many. A representative process arrives with the latest of
the processes it stands for (the same local rank on each of its nodes): the last arrival of the
machine is the last of the simulation, and what waits for a node's processes waits for its last.
Only node 0's processes are timed: they are exact samples of the machine's processes.

What it gives up: the spread of arrivals inside a representative (its early members' data
comes with its latest), so a PAP algorithm's gain from serving early peers first is
understated; pairwise MPI's steps to a representative are one exchange and the rest of their
latencies (sim.Sleep); scattered MPI's windows are the representatives'. ``python -m papcoll
model check-aggregation`` compares it with the full simulation where both run (docs/model.md).
"""
import numpy as np

from .protocols import shape

SIMULATED = 4          # nodes simulated; 63, 255 and 1023 others share out evenly among 3
ABOVE = 128            # processes: predict aggregates above, by default


def plan(nodes, ppn, simulated=SIMULATED):
    """(simulated nodes as lists of ranks, weight, the machine's nodes each stands for) for a
    machine of ``nodes`` x ``ppn``; None where it is simulated whole."""
    if nodes <= simulated:
        return None
    reps = simulated - 1
    groups = [list(range(1 + j, nodes, reps)) for j in range(reps)]   # sizes differ by 1 at most
    return shape(simulated, ppn), (nodes - 1) / reps, groups


def default(nodes, ppn):
    """The plan predict uses by default: aggregated above :data:`ABOVE` processes."""
    return plan(nodes, ppn) if nodes * ppn > ABOVE else None


def arrivals(row, ppn, groups):
    """The simulated processes' arrivals from the machine's (``row``, by rank): node 0's own;
    a representative's, the latest of those it stands for."""
    machine = np.asarray(row).reshape(-1, ppn)
    reps = [machine[g].max(axis=0) for g in groups]
    return np.concatenate([machine[0], *reps])
