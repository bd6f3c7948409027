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


CALLS = 30             # a cell's simulated calls by default: at most this many, and fewer
PRECISION = 0.01       # once every algorithm's mean has a standard error within 1 % of it


def predict(machine, nodes, sizes, mifs, algorithms=None, calls=None, seed=1, late_fraction=None,
            library="mpich", aggregated=None):
    """[{size, mif, algorithm, us}] for every size, MIF and algorithm (default: all the model
    runs on this shape), each over ``calls`` calls of seeded random arrivals, the same draws
    for every algorithm (default: 2 to :data:`CALLS`, until :func:`settled`); ``aggregated``:
    an aggregate.plan for ``nodes`` (lists of ranks, all of ``ppn``), or None to simulate
    every process."""
    algorithms = algorithms or runnable(nodes)
    total = sum(map(len, nodes))
    rows = []
    for size in sizes:
        for mif in mifs:
            rng = np.random.default_rng([seed, size, mif])
            table = arrivals(rng, calls or CALLS, total, mif * t_msg(machine, nodes, size),
                             late_fraction)
            # what each algorithm simulates: pap_direct's protocol is one of the other two's,
            # so one run serves both where their extras are the same
            runs = {a: (protocols.pap_direct_runs(machine, size, total) if a == "pap_direct"
                        else a, machine.extra_of(a)) for a in algorithms}
            times = {a: [] for a in algorithms}
            for row in table:
                done = {}
                for a in algorithms:
                    if runs[a] not in done:
                        done[runs[a]] = call_time(machine, nodes, size, a, row, library,
                                                  aggregated)
                    times[a].append(done[runs[a]])
                if calls is None and settled(times.values()):
                    break
            rows += [{"size": size, "mif": mif, "algorithm": a, "us": np.mean(t) * 1e6}
                     for a, t in times.items()]
    return rows


def settled(samples):
    """Whether every list of call times has two or more, and a mean whose standard error is
    within :data:`PRECISION` of it. Where many processes are aggregated a call is already a
    mean over a node's processes and the latest of hundreds, and two calls settle it
    (docs/model.md, "How many calls")."""
    return all(len(t) > 1 and np.std(t, ddof=1) <= PRECISION * np.mean(t) * np.sqrt(len(t))
               for t in samples)
