"""The random process-arrival alltoall microbenchmark (Qian & Afsahi, PAP alltoall paper, Fig. 1-4).

    mpiexec -n 4 python -m mpi4py -m papcoll.bench arrival --mif 1,32 --sizes 8,1K,64K,1M

Each call: the processes leave a barrier, each waits its own delay, then calls alltoall. The time
inside the call is taken per process, averaged over the processes, then over the iterations
(warm-up excluded). Delays are uniform in [0, MIF x t_msg], independently per process; with
``--late-fraction f`` a random f of the processes (the same ones on every rank) wait exactly
MIF x t_msg and the others not at all.

t_msg, the time of one message of the size, is the MINIMUM over repetitions of half the round
trip of a ping-pong of one block between ranks 0 and 1 (the minimum because on a shared,
oversubscribed machine the median also measures the scheduler, and would rescale the delays from
run to run); rank 0 broadcasts it. With one process it is the minimum time of a local copy.
``--t-msg across`` pings the first rank of another node instead, so that the delays count
network messages: ranks 0 and 1 often share a node, whose message can be far shorter than the
network's own skew between nodes.

No alltoall can end on a process before the last process has arrived, and processes never arrive
together (barrier exit skew, sleep overshoot). So every call also records the *unavoidable wait*,
the mean over processes of (last arrival - own arrival); excess = time in call - unavoidable wait
is what the algorithm itself costs. Arrival times are on rank 0's clock: at start every rank
estimates its offset to rank 0 from a few ping-pongs, keeping the one with the smallest round trip
(offset = rank 0's time - midpoint of the round trip; error at most half that round trip).

All algorithms run with the same per-iteration delays (drawn from --seed, size and MIF) and take
turns within every iteration, in a fresh order each (drawn from the same seed), so machine noise
spreads evenly over them and their ratios compare like with like: where processes share cores a
call carries part of the cost of the call before it, and a fixed rotation would hand each
algorithm always the same predecessor (call_schedule in arrival_measure.py). With ``--apart``
each algorithm's iterations run one after another instead, as in a program that calls one
algorithm: no call follows another algorithm's but the first, and a slow spell of the machine
falls on one algorithm (docs/benchmarks.md compares the two).

Each rank's CPUs are recorded (``cpus``): where processes outnumber cores, a launch that binds
them to cores (MPICH: ``-bind-to core``) keeps them two to a core, and an unbound one leaves
them to the scheduler, which on the 2-core machine placed four three and one now and then:
each cell took 1.0-1.6 x its time bound (docs/benchmarks.md, "Bound or not").

This module holds the subcommand, its result (JSON, table, figure); arrival_measure.py measures.
"""
import argparse
import datetime
import json
import os
import platform
import shlex
import sys
from pathlib import Path

import numpy as np
from mpi4py import MPI

import papcoll
from papcoll.algorithms import AUTO, pap_direct, policy
from papcoll.outfile import out_folder

from . import fabric
from .arrival_measure import (CLOCK_METHOD, T_MSG_METHOD, block_rng, call_schedule,
                              clock_offsets, delay_table, late_count, message_time, run_block,
                              summarize, t_msg_peer, usable_algorithms)
from .variants import VARIANTS, caller, case
from .options import comma_list, format_size, integer, parse_algorithm, parse_size

DEFAULT_SIZES = "8,1K,64K,1M"
DEFAULT_MIFS = "1,32"


# ---- options -------------------------------------------------------------------------------

def parse_fraction(text):
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"late fraction must be in (0, 1], not {text!r}")
    return value


def add_arguments(parser):
    """The ``arrival`` subcommand's options."""
    parser.add_argument("--mif", type=comma_list(integer(0)), default=DEFAULT_MIFS,
                        help=f"maximum imbalance factors (default {DEFAULT_MIFS})")
    parser.add_argument("--sizes", type=comma_list(parse_size), default=DEFAULT_SIZES,
                        help=f"bytes per peer, e.g. 8,8K,1M (default {DEFAULT_SIZES})")
    parser.add_argument("--algorithms", type=comma_list(parse_algorithm, sort=False),
                        help=f"registered algorithms to compare, and {AUTO} for papcoll as "
                             f"shipped (the policy's choice; default: all that can run here, "
                             f"and {AUTO})")
    parser.add_argument("--iterations", type=integer(1), default=30,
                        help="timed calls per size, MIF and algorithm (default 30)")
    parser.add_argument("--warmup", type=integer(0), default=3,
                        help="untimed calls before them, results checked (default 3)")
    parser.add_argument("--late-fraction", type=parse_fraction, metavar="F",
                        help="instead of random delays, F of the processes arrive late by "
                             "MIF x t_msg and the others at once")
    parser.add_argument("--seed", type=int, default=1,
                        help="seed of the delays and of v's counts (default 1)")
    parser.add_argument("--variant", choices=VARIANTS, default="alltoall",
                        help="the call timed: alltoall (default), v (Alltoallv, random counts "
                             "of mean SIZE bytes), w (Alltoallw: a pencil FFT step of a "
                             "SIZE^3 complex128 array, SIZE a multiple of N), persistent "
                             "(Alltoall as a persistent request; see variants.py)")
    parser.add_argument("--phases", action="store_true",
                        help="record each call's phases (gather, masters, scatter: the "
                             "hierarchical algorithms) and report their mean times; the "
                             "recording costs a little time in those calls")
    parser.add_argument("--t-msg", choices=("within", "across"), default="within",
                        help="t_msg's ping-pong partner of rank 0: rank 1 (within, the default) "
                             "or the first rank of another node (across: delays in units of a "
                             "network message)")
    parser.add_argument("--spin", action="store_true",
                        help="busy-wait the delays (default: sleep, spinning only the last 50 us)")
    parser.add_argument("--apart", action="store_true",
                        help="run each algorithm's iterations of a block one after another, "
                             "the algorithms in a drawn order, as a program that calls one "
                             "algorithm has them (default: every iteration calls every "
                             "algorithm, in a fresh order each)")
    parser.add_argument("--mixed-fabrics", action="store_true",
                        help="compare even where MPI and papcoll moved their data over "
                             "different networks (see bench/fabric.py); refused otherwise")
    parser.add_argument("--out", type=out_folder, default=Path("results"),
                        help="folder for the .json, .png and .txt results (default results/)")
    parser.add_argument("--name", help="file stem (default arrival-n<N>[-late<pct>]-<date-time>)")


# ---- the run -------------------------------------------------------------------------------

class Progress:
    """Progress on stderr: on a terminal a bar drawn again whenever the percentage changes;
    elsewhere (a CI log, a batch job's file) a line at each quarter, no more."""
    WIDTH = 30
    QUARTER = 25

    def __init__(self, total, enabled, terminal=None):
        self.total, self.enabled, self.done, self.shown = total, enabled, 0, None
        self.terminal = sys.stderr.isatty() if terminal is None else terminal

    def step(self, label):
        self.done += 1
        percent = 100 * self.done // self.total
        if not self.terminal:
            percent -= percent % self.QUARTER
        if not self.enabled or percent == self.shown or (not self.terminal and percent == 0):
            return
        self.shown = percent
        if not self.terminal:
            sys.stderr.write(f"{percent:3d}% done ({label})\n")
            sys.stderr.flush()
            return
        filled = self.WIDTH * self.done // self.total
        bar = "#" * filled + "." * (self.WIDTH - filled)
        end = "\n" if self.done == self.total else ""
        sys.stderr.write(f"\r[{bar}] {percent:3d}%  {label:<16}{end}")
        sys.stderr.flush()


def microseconds(seconds):
    """Seconds (array) as a list of microseconds rounded to the nanosecond, for the JSON."""
    return np.round(np.asarray(seconds) * 1e6, 3).tolist()


def block_rows(size, mif, names, t_msg, bound, delays, arrivals, in_calls, phases=(),
               chosen=None, runs_as=None):
    """The result rows of one block from every rank's gathered (arrival, in_call) arrays and
    phase times ({algorithm: {phase: seconds}} per rank); ``chosen``: what auto ran;
    ``runs_as``: {algorithm: the algorithm whose protocol it ran} (pap_direct's scheme)."""
    arrivals = np.stack(arrivals, axis=-1)          # (algorithms, iterations, processes)
    in_calls = np.stack(in_calls, axis=-1)
    rows = []
    for j, name in enumerate(names):
        first = arrivals[j].min(axis=1, keepdims=True)
        rows.append({
            "size": size, "mif": mif, "algorithm": name, "t_msg_us": microseconds(t_msg),
            "delay_bound_us": microseconds(bound), **summarize(in_calls[j], arrivals[j]),
            "per_rank": {"in_call_us": microseconds(in_calls[j]),
                         "arrival_us": microseconds(arrivals[j] - first),
                         "planned_delay_us": microseconds(delays)}})
        mine = [p[name] for p in phases if name in p]
        if mine:       # each phase's mean over the processes that had it (masters: their own)
            rows[-1]["phases_us"] = {
                phase: float(np.mean([p[phase] for p in mine if phase in p])) * 1e6
                for phase in dict.fromkeys(phase for p in mine for phase in p)}
        if name == AUTO:
            rows[-1]["chosen"] = chosen
        if name in (runs_as or {}):
            rows[-1]["runs_as"] = runs_as[name]
    mpi = next((r for r in rows if r["algorithm"] == "mpi"), None)
    for row in rows:
        row["ratio_vs_mpi"] = row["avg_us"] / mpi["avg_us"] if mpi else None
    return rows


def measure(pc, args, names, offset, peer, progress):
    """Every block, t_msg measured with rank ``peer``; returns (t_msg entries, result rows), both
    complete on rank 0 only."""
    rank, nprocs = pc.Get_rank(), pc.Get_size()
    rounds = args.warmup + args.iterations
    t_msgs, rows = [], []
    calls = [caller(pc, name, args.variant) for name in names]
    for size in args.sizes:
        this = case(args.variant, rank, nprocs, size, args.seed)
        t_msg, median = message_time(pc, size if args.variant != "w" else
                                     this.bytes // nprocs, peer)
        t_msgs.append({"size": size, "t_msg_us": t_msg * 1e6, "median_us": median * 1e6})
        for mif in args.mif:
            bound = mif * t_msg
            delays = delay_table(block_rng(args.seed, size, mif), rounds, nprocs, bound,
                                 args.late_fraction)
            label = f"{format_size(size)} MIF {mif}"
            schedule = call_schedule(args.seed, size, mif, rounds, len(names), args.apart)
            arrival, in_call, phases = run_block(pc, names, this, calls, delays[:, rank],
                                                 schedule, offset, args.spin, args.warmup,
                                                 lambda: progress.step(label))
            gathered = pc.gather((arrival, in_call, phases), root=0)
            if rank == 0:
                rows += block_rows(size, mif, names, t_msg, bound, delays[args.warmup:],
                                   *zip(*gathered),
                                   chosen=chosen(pc, args.variant, size),
                                   runs_as=schemes(args.variant, size, nprocs))
        this.free()
    for call in calls:
        getattr(call, "free", lambda: None)()
    return t_msgs, rows


def chosen(pc, variant, size):
    """What ``auto`` runs for this variant at this size."""
    if variant in ("alltoall", "persistent"):
        return policy.choose(pc._context(), size)
    return policy.choose(pc._context(), None, "alltoall" + variant)


def schemes(variant, size, nprocs):
    """{algorithm: the algorithm it ran as}: ``pap_direct``'s scheme, where one size picks it
    (in Alltoallv/w each pair's block picks its own)."""
    if variant in ("alltoall", "persistent"):
        return {"pap_direct": pap_direct.runs_as(size, nprocs)}
    return {}


def probe_fabrics(pc, args, names):
    """Which networks every algorithm used at every size (fabric.py), before any timing."""
    rank, nprocs = pc.Get_rank(), pc.Get_size()
    cases = [(size, case(args.variant, rank, nprocs, size, args.seed)) for size in args.sizes]
    calls = [caller(pc, name, args.variant) for name in names]
    try:
        return fabric.probe(pc, names, calls, cases)
    finally:
        for call in calls:
            getattr(call, "free", lambda: None)()
        for _, this in cases:
            this.free()


def default_name(nprocs, late_fraction, started):
    late = f"-late{round(late_fraction * 100)}" if late_fraction else ""
    return f"arrival-n{nprocs}{late}-{started:%Y%m%d-%H%M%S}"


def run(args):
    """Run on MPI.COMM_WORLD; rank 0 prints the table and writes the files. Exit status."""
    comm = MPI.COMM_WORLD
    rank, nprocs = comm.Get_rank(), comm.Get_size()
    started = datetime.datetime.now()
    with papcoll.Communicator(comm, trace="phases" if args.phases else False) as pc:
        topo = pc._context().topology
        nodes, ppn, emulated = len(topo.nodes), topo.ppn, topo.emulated
        everything = sorted(papcoll.algorithms, key=lambda name: name != "mpi") + [AUTO]
        names, skipped = usable_algorithms(pc, args.algorithms or everything)
        need, what = {"v": ("variable", "Alltoallv"), "w": ("variable", "Alltoallw"),
                      "persistent": ("nonblocking", "persistent Alltoall")}.get(args.variant,
                                                                              (None, ""))
        for name in [n for n in names if need and n != AUTO
                     and not getattr(papcoll.algorithms[n], need)]:
            names.remove(name)
            skipped[name] = f"{name} serves no {what}"
        if args.algorithms and skipped:
            if rank == 0:
                print(f"papcoll.bench arrival: error: {'; '.join(skipped.values())}",
                      file=sys.stderr, flush=True)
            pc.Barrier()   # a non-zero exit aborts every rank: not before rank 0 has said why
            return 2
        fabrics = probe_fabrics(pc, args, names)
        wrong = fabric.mismatches(fabrics)
        if wrong and not args.mixed_fabrics:
            if rank == 0:
                print("papcoll.bench arrival: error: MPI and papcoll ran on different networks "
                      f"({'; '.join(wrong)}); --mixed-fabrics compares them anyway",
                      file=sys.stderr, flush=True)
            pc.Barrier()
            return 2
        offset, round_trip = clock_offsets(pc)
        clocks = pc.gather({"offset_us": offset * 1e6, "round_trip_us": round_trip * 1e6}, root=0)
        cpus = pc.gather(sorted(os.sched_getaffinity(0)), root=0)
        progress = Progress(len(args.sizes) * len(args.mif) * (args.warmup + args.iterations),
                            enabled=rank == 0)
        peer = t_msg_peer(topo, args.t_msg == "across")
        t_msgs, rows = measure(pc, args, names, offset, peer, progress)
    if rank == 0:
        result = {
            "benchmark": "papcoll random-arrival",
            "command": shlex.join(["python", "-m", "papcoll.bench", *sys.argv[1:]]),
            "options": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
            "date": started.isoformat(timespec="seconds"),
            "host": platform.node(), "nprocs": nprocs, "nodes": nodes, "ppn": ppn,
            "nodes_emulated": emulated,
            "mpi_library": policy.library_version(),
            "mpi4py": sys.modules["mpi4py"].__version__, "papcoll": papcoll.__version__,
            "mode": "late" if args.late_fraction else "random", "variant": args.variant,
            "late_fraction": args.late_fraction,
            "late_processes": args.late_fraction and late_count(nprocs, args.late_fraction),
            "delay_wait": "spin" if args.spin else "sleep",
            "calls": "apart" if args.apart else "interleaved",
            "seed": args.seed, "iterations": args.iterations, "warmup": args.warmup,
            "sizes": args.sizes, "mifs": args.mif,
            "algorithms": {name: papcoll.algorithms[name].description if name != AUTO else
                           "papcoll as shipped: the selection policy's choice" for name in names},
            "skipped": skipped,
            "fabric": {name: {str(size): fabric.describe(nets) for size, nets in per.items()}
                       for name, per in fabrics.items()},
            "mixed_fabrics": bool(wrong),
            "t_msg": {"method": T_MSG_METHOD.format(peer=peer), "per_size": t_msgs},
            "clock": {"method": CLOCK_METHOD, "per_rank": clocks},
            "cpus": {"placement": placement(cpus), "per_rank": cpus},
            "results": rows,
        }
        stem = args.name or default_name(nprocs, args.late_fraction, started)
        write_outputs(result, args.out, stem)
    return 0


# ---- output (rank 0) -----------------------------------------------------------------------

def placement(cpus):
    """``bound`` where every rank may run on one CPU only, else ``unbound``."""
    return "bound" if all(len(c) == 1 for c in cpus) else "unbound"


def bound_or_not(result):
    """How a result's ranks were placed, in words (an older result recorded nothing)."""
    where = result.get("cpus", {}).get("placement")
    return {"bound": "bound to a CPU each", "unbound": "not bound"}.get(where, "(not recorded)")


def format_table(result):
    """The OSU-style text table of a result (as written to JSON)."""
    r = result
    mode = (f"{r['late_processes']} of {r['nprocs']} processes ({r['late_fraction']:.0%}) late by "
            f"MIF x t_msg, the others at once" if r["mode"] == "late"
            else "each process waits uniform [0, MIF x t_msg]")
    variant = {"v": "Alltoallv, random counts of mean SIZE bytes",
               "w": "Alltoallw, a pencil FFT step of a SIZE^3 complex128 array"}
    lines = [
        "# papcoll random-arrival benchmark"
        + (f" -- {variant[r['variant']]}" if r.get("variant") in variant else ""),
        f"# N: {r['nprocs']} ({r['nodes']} node(s) x {r['ppn']} processes per node"
        f"{', emulated' if r['nodes_emulated'] else ''})",
        f"# MPI: {r['mpi_library']}",
        "# networks used (kernel counters, bench/fabric.py): " + "; ".join(
            f"{name} {'/'.join(sorted(set(per.values())))}"
            for name, per in r.get("fabric", {}).items())
        + ("  -- MIXED: the sides ran on different networks" if r.get("mixed_fabrics") else ""),
        f"# date: {r['date']}  host: {r['host']}",
        f"# arrival: {mode}, after a barrier ({r['delay_wait']}); {r['iterations']} iterations "
        f"(+{r['warmup']} warm-up), seed {r['seed']}; the algorithms' calls "
        f"{r.get('calls', 'interleaved')}; ranks {bound_or_not(r)}",
        f"# t_msg: {r['t_msg']['method']}:",
        "#   " + ", ".join(f"{format_size(t['size'])} {t['t_msg_us']:.2f} us"
                           for t in r["t_msg"]["per_size"]),
        "# clock offsets to rank 0 (us, +- half round trip): "
        + ", ".join(f"{c['offset_us']:+.1f}+-{c['round_trip_us'] / 2:.1f}"
                    for c in r["clock"]["per_rank"]),
        "# time in call averaged over processes; Avg over iterations, Min/Max of the iterations;",
        "# Unavoid: mean over processes of (last arrival - own arrival); Excess = Avg - Unavoid",
    ]
    lines += [f"# skipped {name}: {why}" for name, why in r["skipped"].items()]
    label = {row["algorithm"]: row["algorithm"] for row in r["results"]}
    label.update({row["algorithm"]: f"auto={row['chosen']}" for row in r["results"]
                  if row.get("chosen")})
    width = max([9, *(len(f"auto={row.get('chosen')}") for row in r["results"]),
                 *map(len, r["algorithms"])])
    lines.append(f"# {'Size':<8}{'MIF':>6}  {'Algorithm':<{width}}{'Avg(us)':>12}{'Min(us)':>12}"
                 f"{'Max(us)':>12}{'Unavoid(us)':>13}{'Excess(us)':>12}{'vs mpi':>8}")
    for row in r["results"]:
        ratio = "-" if row["ratio_vs_mpi"] is None else f"{row['ratio_vs_mpi']:.2f}"
        name = f"auto={row['chosen']}" if row.get("chosen") else row["algorithm"]
        lines.append(f"{format_size(row['size']):<10}{row['mif']:>6}  {name:<{width}}"
                     f"{row['avg_us']:>12.2f}{row['min_us']:>12.2f}{row['max_us']:>12.2f}"
                     f"{row['unavoidable_us']:>13.2f}{row['excess_us']:>12.2f}{ratio:>8}")
        if row.get("phases_us"):
            lines.append(f"#{'':<17}  phases (us, mean): " + ", ".join(
                f"{phase} {us:.1f}" for phase, us in row["phases_us"].items()))
    return "\n".join(lines)


def write_outputs(result, folder, stem):
    from . import plot      # matplotlib only on rank 0, and only once there are results
    table = format_table(result)
    print(table, flush=True)
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{stem}.{ext}" for ext in ("json", "txt", "png")]
    paths[0].write_text(json.dumps(result, indent=1) + "\n")
    paths[1].write_text(table + "\n")
    plot.arrival_figure(result, paths[2])
    print(f"# wrote {', '.join(map(str, paths))}", flush=True)
