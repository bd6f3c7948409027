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

No alltoall can end on a process before the last process has arrived, and processes never arrive
together (barrier exit skew, sleep overshoot). So every call also records the *unavoidable wait*,
the mean over processes of (last arrival - own arrival); excess = time in call - unavoidable wait
is what the algorithm itself costs. Arrival times are on rank 0's clock: at start every rank
estimates its offset to rank 0 from a few ping-pongs, keeping the one with the smallest round trip
(offset = rank 0's time - midpoint of the round trip; error at most half that round trip).

All algorithms run with the same per-iteration delays (drawn from --seed, size and MIF) and take
turns within every iteration, rotating who goes first, so machine noise spreads evenly over them
and their ratios compare like with like.
"""
import argparse
import datetime
import json
import math
import platform
import re
import shlex
import sys
import time
from pathlib import Path

import numpy as np
from mpi4py import MPI

import papcoll
from papcoll.algorithms import AUTO, policy
from papcoll.errors import AlgorithmError
from papcoll.trace import phase_times

DEFAULT_SIZES = "8,1K,64K,1M"
DEFAULT_MIFS = "1,32"
PINGPONGS = 40          # measured repetitions for t_msg, after PINGPONG_WARMUP unmeasured ones
PINGPONG_WARMUP = 5
CLOCK_PINGPONGS = 50    # per rank, for its clock offset
SPIN_TAIL = 50e-6       # sleep() overshoots by up to the timer slack (50 us): spin that part
IDLE_POLL = 2e-4        # how often ranks with nothing to do check whether they may go on
T_MSG_METHOD = (f"min over {PINGPONGS} ping-pongs of one block between ranks 0 and 1 of half the "
                f"round trip (local copy when N=1), broadcast from rank 0")
CLOCK_METHOD = (f"offset to rank 0 from {CLOCK_PINGPONGS} ping-pongs per rank: the one with the "
                f"smallest round trip, offset = rank 0's time - midpoint")


# ---- options -------------------------------------------------------------------------------

_SIZE = re.compile(r"(\d+)\s*(?:([kmg])i?)?b?", re.IGNORECASE)
_UNITS = {None: 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def parse_size(text):
    """Bytes from '8', '8B', '8K', '8KiB', '1M' (binary multiples, as in the OSU benchmarks)."""
    match = _SIZE.fullmatch(text.strip())
    if not match or int(match.group(1)) == 0:
        raise argparse.ArgumentTypeError(f"not a size of at least 1 byte: {text!r} (e.g. 8K, 1M)")
    unit = match.group(2)
    return int(match.group(1)) * _UNITS[unit and unit.lower()]


def format_size(nbytes):
    """The shortest exact label: 8, 1000, 1K, 64K, 1M."""
    for suffix, unit in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if nbytes % unit == 0:
            return f"{nbytes // unit}{suffix}"
    return str(nbytes)


def integer(minimum):
    """An argparse type for integers >= ``minimum``."""
    def parse(text):
        if not text.strip().isdigit() or int(text) < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, not {text!r}")
        return int(text)
    return parse


def parse_algorithm(text):
    if text != AUTO and text not in papcoll.algorithms:
        raise argparse.ArgumentTypeError(
            f"unknown algorithm {text!r}; registered: {', '.join(papcoll.algorithms)}, or "
            f"{AUTO} (papcoll as shipped: the selection policy's choice)")
    return text


def parse_fraction(text):
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"late fraction must be in (0, 1], not {text!r}")
    return value


def comma_list(item, sort=True):
    """An argparse type for 'a,b,c' whose items are parsed by ``item``, without duplicates."""
    def parse(text):
        values = list(dict.fromkeys(item(part) for part in text.split(",") if part.strip()))
        if not values:
            raise argparse.ArgumentTypeError(f"empty list: {text!r}")
        return sorted(values) if sort else values
    return parse


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
    parser.add_argument("--seed", type=int, default=1, help="seed of the delays (default 1)")
    parser.add_argument("--phases", action="store_true",
                        help="record each call's phases (gather, masters, scatter: the "
                             "hierarchical algorithms) and report their mean times; the "
                             "recording costs a little time in those calls")
    parser.add_argument("--spin", action="store_true",
                        help="busy-wait the delays (default: sleep, spinning only the last 50 us)")
    parser.add_argument("--out", type=Path, default=Path("results"),
                        help="folder for the .json, .png and .txt results (default results/)")
    parser.add_argument("--name", help="file stem (default arrival-n<N>[-late<pct>]-<date-time>)")


# ---- arrival delays and statistics (pure) --------------------------------------------------

def block_rng(seed, size, mif):
    """The generator of one (size, MIF) block's delays: seeded alike on every rank, so all ranks
    draw the same table, and independent of which other sizes and MIFs run."""
    return np.random.default_rng([seed, size, mif])


def late_count(nprocs, fraction):
    """How many of nprocs processes are late: fraction x nprocs rounded half up."""
    return min(nprocs, math.floor(fraction * nprocs + 0.5))


def delay_table(rng, rounds, nprocs, bound, late_fraction=None):
    """Seconds every rank waits before every call, shape (rounds, nprocs)."""
    if late_fraction is None:
        return rng.uniform(0.0, bound, (rounds, nprocs))
    table = np.zeros((rounds, nprocs))
    late = late_count(nprocs, late_fraction)
    for row in table:
        row[rng.choice(nprocs, late, replace=False)] = bound
    return table


def unavoidable_wait(arrivals):
    """Mean over processes (last axis) of (last arrival - own arrival)."""
    arrivals = np.asarray(arrivals, dtype=float)
    return (arrivals.max(axis=-1, keepdims=True) - arrivals).mean(axis=-1)


def clock_offset(sent, remote, received):
    """(offset, round trip) from ping-pongs (local send time, remote reply time, local receive
    time): local time + offset = remote time. The fastest round trip bounds the error best."""
    sent, remote, received = (np.asarray(x, dtype=float) for x in (sent, remote, received))
    best = np.argmin(received - sent)
    return remote[best] - (sent[best] + received[best]) / 2, received[best] - sent[best]


def summarize(in_call, arrivals):
    """One algorithm in one block, from (iterations, processes) arrays in seconds: time in call
    averaged over processes, then avg/min/max over iterations; unavoidable wait; excess (us)."""
    per_call = np.asarray(in_call, dtype=float).mean(axis=1) * 1e6
    wait = unavoidable_wait(arrivals) * 1e6
    return {"avg_us": per_call.mean(), "min_us": per_call.min(), "max_us": per_call.max(),
            "unavoidable_us": wait.mean(), "excess_us": per_call.mean() - wait.mean(),
            "per_iteration": {"in_call_us": np.round(per_call, 3).tolist(),
                              "unavoidable_us": np.round(wait, 3).tolist()}}


def turn_order(nalgorithms, iteration):
    """Algorithms in turn within one iteration, a different one first each time."""
    return [(iteration + j) % nalgorithms for j in range(nalgorithms)]


# ---- measuring (collective) ----------------------------------------------------------------

def idle_barrier(comm):
    """A barrier waited in asleep: ranks with nothing to do during a ping-pong must not take the
    cores the two measuring ranks need (there may be more ranks than cores)."""
    request = comm.Ibarrier()
    while not request.Test():
        time.sleep(IDLE_POLL)


def wait(seconds, spin):
    """Wait ``seconds`` from now: asleep (spinning only the tail sleep could overshoot) or busy."""
    deadline = time.perf_counter() + seconds
    if not spin and seconds > SPIN_TAIL:
        time.sleep(seconds - SPIN_TAIL)
    while time.perf_counter() < deadline:
        pass


def clock_offsets(comm):
    """This rank's (offset, round trip) to rank 0's perf_counter; rank 0 gets (0, 0)."""
    rank = comm.Get_rank()
    stamp = np.zeros(1)
    result = (0.0, 0.0)
    for peer in range(1, comm.Get_size()):
        if rank == 0:
            for _ in range(CLOCK_PINGPONGS):
                comm.Recv(stamp, source=peer)
                stamp[0] = time.perf_counter()
                comm.Send(stamp, dest=peer)
        elif rank == peer:
            samples = []
            for _ in range(CLOCK_PINGPONGS):
                sent = time.perf_counter()
                comm.Send(stamp, dest=0)
                comm.Recv(stamp, source=0)
                samples.append((sent, stamp[0], time.perf_counter()))
            result = clock_offset(*zip(*samples))
        idle_barrier(comm)
    return tuple(map(float, result))


def message_time(comm, nbytes):
    """t_msg in seconds for one block of ``nbytes`` (see the module docstring), and the samples'
    median, the same on every rank."""
    rank = comm.Get_rank()
    block, other = np.zeros(nbytes, np.uint8), np.zeros(nbytes, np.uint8)
    samples = []
    if rank < 2:
        for _ in range(PINGPONG_WARMUP + PINGPONGS):
            start = time.perf_counter()
            if comm.Get_size() == 1:
                np.copyto(other, block)
            elif rank == 0:
                comm.Send(block, dest=1)
                comm.Recv(other, source=1)
            else:
                comm.Recv(other, source=0)
                comm.Send(block, dest=0)
            samples.append(time.perf_counter() - start)
    idle_barrier(comm)
    stats = None
    if rank == 0:
        times = np.array(samples[PINGPONG_WARMUP:]) / (1 if comm.Get_size() == 1 else 2)
        stats = (float(times.min()), float(np.median(times)))
    return comm.bcast(stats, root=0)


def block_value(source, dest):
    """The byte every element of the block from ``source`` to ``dest`` holds."""
    return (source * 31 + dest * 7 + 1) % 251


def buffers(rank, nprocs, nbytes):
    """Send buffer, receive buffer and the expected received data for blocks of ``nbytes``."""
    send = np.repeat(np.array([block_value(rank, q) for q in range(nprocs)], np.uint8), nbytes)
    want = np.repeat(np.array([block_value(q, rank) for q in range(nprocs)], np.uint8), nbytes)
    return send, np.zeros_like(send), want


def usable_algorithms(pc, names):
    """(names that run here, {name: why not}), the same on every rank: one tiny call each.
    An algorithm's ``unsupported`` check must agree on all ranks (those that pass would otherwise
    wait in the call for those that raised)."""
    send, recv, _ = buffers(pc.Get_rank(), pc.Get_size(), 1)
    usable, skipped = [], {}
    for name in names:
        try:
            pc.Alltoall(send, recv, algorithm=name)
            reason = None
        except AlgorithmError as err:     # refused before anything moved: pc stays usable
            reason = str(err)
        reason = next((r for r in pc.allgather(reason) if r), None)
        if reason:
            skipped[name] = reason
        else:
            usable.append(name)
    return usable, skipped


def caller(pc, name):
    """How the benchmark calls ``name``: the baseline ``mpi`` as an mpi4py program calls its MPI
    library (``MPI.Comm.Alltoall`` on the same communicator: no papcoll code in the way), every
    other algorithm -- ``auto`` too -- through ``papcoll.Communicator.Alltoall``."""
    if name == "mpi":
        return lambda send, recv: MPI.Intracomm.Alltoall(pc, send, recv)
    return lambda send, recv: pc.Alltoall(send, recv, algorithm=name)


def run_block(pc, names, bufs, delays, offset, spin, warmup, tick):
    """Every algorithm through every iteration of one (size, MIF) block, waiting ``delays`` (this
    rank's, one per iteration) after the barrier. Returns (arrival on rank 0's clock, time in call),
    each of shape (algorithms, timed iterations), in seconds, and this rank's mean phase times
    {algorithm: {phase: seconds}} of the timed calls that recorded phases. Warm-up results are
    checked."""
    send, recv, want = bufs
    calls = [caller(pc, name) for name in names]
    arrival = np.zeros((len(names), len(delays)))
    in_call = np.zeros_like(arrival)
    phases = {}
    traces = pc.traces
    for it, delay in enumerate(delays):
        for j in turn_order(len(names), it):
            if it < warmup:
                recv[:] = 0
            pc.Barrier()
            wait(delay, spin)
            if traces is not None:
                traces.clear()
            start = time.perf_counter()
            calls[j](send, recv)
            in_call[j, it] = time.perf_counter() - start
            arrival[j, it] = start + offset
            if it < warmup and not np.array_equal(recv, want):
                raise AssertionError(f"algorithm {names[j]!r} delivered wrong data at "
                                     f"{len(send) // pc.Get_size()} bytes per peer")
            if traces and it >= warmup and traces[-1]["phases"]:
                for phase, seconds in phase_times(traces[-1]).items():
                    phases.setdefault(names[j], {}).setdefault(phase, []).append(seconds)
        tick()
    means = {name: {phase: float(np.mean(t)) for phase, t in times.items()}
             for name, times in phases.items()}
    return arrival[:, warmup:], in_call[:, warmup:], means


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


# ---- the run -------------------------------------------------------------------------------

def microseconds(seconds):
    """Seconds (array) as a list of microseconds rounded to the nanosecond, for the JSON."""
    return np.round(np.asarray(seconds) * 1e6, 3).tolist()


def block_rows(size, mif, names, t_msg, bound, delays, arrivals, in_calls, phases=(),
               chosen=None):
    """The result rows of one block from every rank's gathered (arrival, in_call) arrays and
    phase times ({algorithm: {phase: seconds}} per rank); ``chosen``: what auto ran."""
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
    mpi = next((r for r in rows if r["algorithm"] == "mpi"), None)
    for row in rows:
        row["ratio_vs_mpi"] = row["avg_us"] / mpi["avg_us"] if mpi else None
    return rows


def measure(pc, args, names, offset, progress):
    """Every block; returns (t_msg entries, result rows), both complete on rank 0 only."""
    rank, nprocs = pc.Get_rank(), pc.Get_size()
    rounds = args.warmup + args.iterations
    t_msgs, rows = [], []
    for size in args.sizes:
        bufs = buffers(rank, nprocs, size)
        t_msg, median = message_time(pc, size)
        t_msgs.append({"size": size, "t_msg_us": t_msg * 1e6, "median_us": median * 1e6})
        for mif in args.mif:
            bound = mif * t_msg
            delays = delay_table(block_rng(args.seed, size, mif), rounds, nprocs, bound,
                                 args.late_fraction)
            label = f"{format_size(size)} MIF {mif}"
            arrival, in_call, phases = run_block(pc, names, bufs, delays[:, rank], offset,
                                                 args.spin, args.warmup,
                                                 lambda: progress.step(label))
            gathered = pc.gather((arrival, in_call, phases), root=0)
            if rank == 0:
                rows += block_rows(size, mif, names, t_msg, bound, delays[args.warmup:],
                                   *zip(*gathered),
                                   chosen=policy.choose(pc._context(), size))
    return t_msgs, rows


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
        if args.algorithms and skipped:
            if rank == 0:
                print(f"papcoll.bench arrival: error: {'; '.join(skipped.values())}",
                      file=sys.stderr, flush=True)
            pc.Barrier()   # a non-zero exit aborts every rank: not before rank 0 has said why
            return 2
        offset, round_trip = clock_offsets(pc)
        clocks = pc.gather({"offset_us": offset * 1e6, "round_trip_us": round_trip * 1e6}, root=0)
        progress = Progress(len(args.sizes) * len(args.mif) * (args.warmup + args.iterations),
                            enabled=rank == 0)
        t_msgs, rows = measure(pc, args, names, offset, progress)
    if rank == 0:
        result = {
            "benchmark": "papcoll random-arrival",
            "command": shlex.join(["python", "-m", "papcoll.bench", *sys.argv[1:]]),
            "options": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
            "date": started.isoformat(timespec="seconds"),
            "host": platform.node(), "nprocs": nprocs, "nodes": nodes, "ppn": ppn,
            "nodes_emulated": emulated,
            "mpi_library": " ".join(MPI.Get_library_version().splitlines()[0].split()),
            "mpi4py": sys.modules["mpi4py"].__version__, "papcoll": papcoll.__version__,
            "mode": "late" if args.late_fraction else "random",
            "late_fraction": args.late_fraction,
            "late_processes": args.late_fraction and late_count(nprocs, args.late_fraction),
            "delay_wait": "spin" if args.spin else "sleep",
            "seed": args.seed, "iterations": args.iterations, "warmup": args.warmup,
            "sizes": args.sizes, "mifs": args.mif,
            "algorithms": {name: papcoll.algorithms[name].description if name != AUTO else
                           "papcoll as shipped: the selection policy's choice" for name in names},
            "skipped": skipped,
            "t_msg": {"method": T_MSG_METHOD, "per_size": t_msgs},
            "clock": {"method": CLOCK_METHOD, "per_rank": clocks},
            "results": rows,
        }
        stem = args.name or default_name(nprocs, args.late_fraction, started)
        write_outputs(result, args.out, stem)
    return 0


# ---- output (rank 0) -----------------------------------------------------------------------

def format_table(result):
    """The OSU-style text table of a result (as written to JSON)."""
    r = result
    mode = (f"{r['late_processes']} of {r['nprocs']} processes ({r['late_fraction']:.0%}) late by "
            f"MIF x t_msg, the others at once" if r["mode"] == "late"
            else "each process waits uniform [0, MIF x t_msg]")
    lines = [
        "# papcoll random-arrival benchmark",
        f"# N: {r['nprocs']} ({r['nodes']} node(s) x {r['ppn']} processes per node"
        f"{', emulated' if r['nodes_emulated'] else ''})",
        f"# MPI: {r['mpi_library']}",
        f"# date: {r['date']}  host: {r['host']}",
        f"# arrival: {mode}, after a barrier ({r['delay_wait']}); {r['iterations']} iterations "
        f"(+{r['warmup']} warm-up), seed {r['seed']}",
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
