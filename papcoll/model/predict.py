"""Predicted time per call, as the arrival benchmark measures it (bench/arrival.py): every
process waits a random delay, uniform in [0, MIF x t_msg) and drawn afresh for every call (or,
with a late fraction F, F of the processes arrive MIF x t_msg late and the rest at once), then
calls; a call's time is the mean over processes of their time in it, from their own arrival
on, and a cell's the mean over its calls. Each call is simulated event by event (sim.py)."""
import numpy as np

from . import aggregate, mpi_algorithms, protocols
from .sim import Cpu, Sim

ALGORITHMS = dict(protocols.PAPCOLL, mpi=None)


def runnable(nodes):
    """The algorithms the model runs on this shape (the intra-node ones on one node only)."""
    return [a for a in ALGORITHMS if len(nodes) == 1 or a not in protocols.INTRANODE]


def t_msg(machine, nodes, block):
    """The benchmark's unit of delay: one block's one-way time between rank 0 and rank 1 by
    MPI point-to-point (half a ping-pong's round trip); a local copy when N = 1."""
    if sum(map(len, nodes)) == 1:
        return machine.copy(block, 2 * block)
    link = machine.link("mpi_intra" if 1 in nodes[0] else "mpi_inter")
    return link.o + link.wire(block) + machine.poll


def arrivals(rng, calls, size, bound, late_fraction=None):
    """Seconds each process arrives after the first could, per call: shape (calls, size)."""
    if late_fraction is None:
        return rng.uniform(0.0, bound, (calls, size))
    late = min(size, int(np.floor(late_fraction * size + 0.5)))
    table = np.zeros((calls, size))
    for row in table:
        row[rng.choice(size, late, replace=False)] = bound
    return table


def call_time(machine, nodes, block, algorithm, arrive, library="mpich", aggregated=None):
    """One call's simulated time: the mean over processes of (end - arrival), seconds, times
    the machine's ``tail`` (the simulation plays a usual call, the benchmark reports a mean);
    ``algorithm``: a name, or a protocol (protocols.py's form). With ``aggregated``
    (aggregate.plan's), ``nodes`` is the machine's and the call is simulated on the plan's
    nodes, timing node 0's processes."""
    timed = slice(None)
    if aggregated:
        sim_nodes, weight, groups = aggregated
        c = protocols.Call(machine, sim_nodes, block, weight, sum(map(len, nodes)))
        arrive = aggregate.arrivals(arrive, len(nodes[0]), groups)
        timed, nodes = slice(0, len(sim_nodes[0])), sim_nodes
    else:
        c = protocols.Call(machine, nodes, block)
    if algorithm == "mpi":
        procs = [mpi_algorithms.protocol(c, library)(c, p) for p in range(c.size)]
    else:
        protocol = ALGORITHMS[algorithm] if isinstance(algorithm, str) else algorithm
        procs = [protocol(c, p) for p in range(c.size)]
    extra = machine.extra_of(algorithm) if isinstance(algorithm, str) else 0.0
    if extra:
        procs = [_after(extra, proc) for proc in procs]
    end = Sim(machine, nodes).run(procs, arrive)
    return machine.tail * float(np.mean((np.asarray(end) - arrive)[timed]))


def _after(seconds, proc):
    """``proc`` after ``seconds`` of CPU: its algorithm's ``extra`` (params.py)."""
    yield Cpu(seconds)
    yield from proc


def predict(machine, nodes, sizes, mifs, algorithms=None, calls=30, seed=1, late_fraction=None,
            library="mpich", aggregated=None):
    """[{size, mif, algorithm, us}] for every size, MIF and algorithm (default: all the model
    runs on this shape), each over ``calls`` calls of seeded random arrivals, the same draws
    for every algorithm; ``aggregated``: an aggregate.plan for ``nodes`` (lists of ranks, all
    of ``ppn``), or None to simulate every process."""
    algorithms = algorithms or runnable(nodes)
    rows = []
    for size in sizes:
        for mif in mifs:
            rng = np.random.default_rng([seed, size, mif])
            table = arrivals(rng, calls, sum(map(len, nodes)),
                             mif * t_msg(machine, nodes, size), late_fraction)
            for algorithm in algorithms:
                t = np.mean([call_time(machine, nodes, size, algorithm, row, library,
                                       aggregated) for row in table])
                rows.append({"size": size, "mif": mif, "algorithm": algorithm, "us": t * 1e6})
    return rows
