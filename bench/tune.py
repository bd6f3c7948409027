"""``tune``: measure this machine and write the tuning file papcoll's policy reads.

Run it under mpiexec with the process count to tune for, e.g.
``mpiexec -n 4 python -m mpi4py -m papcoll tune --node-sizes 1,2`` (``python -m papcoll
tune`` is this command). For each node shape -- the one it is run with, or each emulated node
size of ``--node-sizes`` --, each size and MIF 1 and 32, every algorithm that can run there and
MPI's own alltoall go through the random-arrival benchmark's timed loop (arrival.py), in turns,
``--iterations`` calls each. Per size the winner is the algorithm whose worst ratio, over the
MIFs, to the best time of that MIF is smallest; consecutive sizes with one winner make one row,
bounded halfway (geometrically) between the sizes measured. Where the lowest and the highest
MIF's winners differ by more than 10 %, the size also gets two rows for the adaptive auto
(PAPCOLL_ADAPT), each for a band of the skew it measures (:func:`banded`). Each row names the
shape it was measured on, the machine and the command, and serves only that shape (policy.py);
rows of other shapes already in the file are kept, so one file holds several runs. A file
there that is not a tuning file is left alone, unless ``--replace`` says to replace it.

With ``--model PARAMS`` it measures nothing and needs no mpiexec: for each ``--nodes`` x
``--ppn`` the performance model (papcoll/model, docs/model.md) predicts every algorithm on the
machine those parameters describe, the winners are chosen by the same rule, and the rows say
``"predicted": true``. A measured row always wins over a predicted one: a shape that has
measured rows in the file keeps them (the predicted are not written), a later measured run of
a shape replaces its predicted rows, and the policy drops predicted rows wherever a measured
row names the shape (policy.in_force).
"""
import argparse
import datetime
import json
import math
import os
import platform
import shlex
import sys
from pathlib import Path

from mpi4py import MPI

import papcoll
from papcoll import adaptive, transport
from papcoll.algorithms import AUTO, policy
from papcoll.errors import ConfigError

from . import arrival
from .arrival import Progress, measure
from .arrival_measure import clock_offsets, t_msg_peer, usable_algorithms
from .options import comma_list, format_size, integer, parse_size

SIZES = [8, 64, 256, 1024, 8192, 65536, 262144, 1 << 20]
QUICK_SIZES = [8, 1024, 65536, 1 << 20]
SHAPE = ("processes", "nodes", "ppn", "transport", "library", "emulated")  # a tuned row serves
BAND_MARGIN = 0.10   # skew bands where one algorithm for every MIF costs more than this


def add_arguments(parser):
    parser.add_argument("--quick", action="store_true",
                        help=f"sizes {','.join(map(format_size, QUICK_SIZES))} and 40 iterations: "
                             f"a minute or two")
    parser.add_argument("--sizes", type=comma_list(parse_size),
                        help=f"bytes per peer (default {','.join(map(format_size, SIZES))})")
    parser.add_argument("--mif", type=comma_list(integer(0)), default=[1, 32],
                        help="maximum imbalance factors (default 1,32)")
    parser.add_argument("--iterations", type=integer(1),
                        help="timed calls per size, MIF and algorithm (default 200, quick 40)")
    parser.add_argument("--node-sizes", type=comma_list(integer(1), sort=False),
                        help="emulated node sizes to tune for, one run each (default: the "
                             "shape it is run with)")
    parser.add_argument("--out", type=Path,
                        help=f"the tuning file (default PAPCOLL_TUNING_FILE, else "
                             f"{policy.DEFAULT_FILE})")
    parser.add_argument("--replace", action="store_true",
                        help="replace the file even where it is not a tuning file (without "
                             "it, tune refuses to touch such a file)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the delays (default 1)")
    model = parser.add_argument_group("predicted rows (no mpiexec, nothing measured)")
    model.add_argument("--model", type=Path, metavar="PARAMS",
                       help="write rows the model predicts on these machine parameters "
                            "(python -m papcoll model calibrate writes them)")
    model.add_argument("--nodes", type=comma_list(integer(2)), help="nodes of each shape")
    model.add_argument("--ppn", type=comma_list(integer(1)), help="processes per node")
    model.add_argument("--library", choices=("mpich", "openmpi"), default="mpich",
                       help="the MPI whose alltoall the model compares with (default mpich)")
    model.add_argument("--transport", choices=sorted(transport.TRANSPORTS), default="verbs",
                       help="papcoll's transport between the nodes (default verbs)")
    model.add_argument("--calls", type=integer(1), default=5,
                       help="simulated calls per cell (default 5)")


def options(args):
    """The arrival benchmark's options for this run: its own defaults (an option it gains has
    its default here too), but for the sizes, MIFs, iterations and seed."""
    parser = argparse.ArgumentParser(add_help=False)
    arrival.add_arguments(parser)
    return parser.parse_args([], argparse.Namespace(
        sizes=args.sizes or (QUICK_SIZES if args.quick else SIZES), mif=args.mif,
        iterations=args.iterations or (40 if args.quick else 200), seed=args.seed))


def bounds(sizes):
    """For each measured size, the block range it stands for: from just above the geometric
    middle to its smaller neighbour, to that middle to its larger one (None: open)."""
    middles = [math.isqrt(a * b) for a, b in zip(sizes, sizes[1:])]
    return [((middles[i - 1] + 1) if i else None, middles[i] if i < len(middles) else None)
            for i in range(len(sizes))]


def winners(rows, sizes, mifs):
    """{size: (algorithm, its ratios to MPI)}: per size, the algorithm whose worst ratio to the
    best of each MIF is smallest."""
    chosen = {}
    for size in sizes:
        cells = {(r["algorithm"], r["mif"]): r for r in rows if r["size"] == size}
        names = sorted({name for name, _ in cells})
        best = {mif: min(cells[name, mif]["avg_us"] for name in names) for mif in mifs}
        worst = {name: max(cells[name, mif]["avg_us"] / best[mif] for mif in mifs)
                 for name in names}
        name = min(names, key=lambda n: (worst[n], n != "mpi"))   # a tie goes to MPI
        chosen[size] = (name, [cells[name, mif]["ratio_vs_mpi"] for mif in mifs])
    return chosen


def banded(rows, sizes, mifs, margin=BAND_MARGIN):
    """{size: (balanced winner, skewed winner, boundary skew)} for the sizes where the lowest
    and the highest MIF have different winners and one algorithm for both costs more than
    ``margin`` in either. The skews are the adaptive auto's own measure (papcoll/adaptive.py)
    of each winner's calls, over the balanced winner's call time; the boundary is their
    geometric middle."""
    low, high = min(mifs), max(mifs)
    out = {}
    for size in sizes:
        cells = {(r["algorithm"], r["mif"]): r for r in rows if r["size"] == size}
        mean = {key: r["avg_us"] for key, r in cells.items()}
        names = sorted({name for name, _ in cells})
        a = min(names, key=lambda n: mean[n, low])
        b = min(names, key=lambda n: mean[n, high])
        if a == b or max(mean[b, low] / mean[a, low], mean[a, high] / mean[b, high]) <= 1 + margin:
            continue
        spread_a, base = _window(cells[a, low]["per_rank"]["in_call_us"])
        spread_b, _ = _window(cells[b, high]["per_rank"]["in_call_us"])
        if base > 0 and spread_b > spread_a:
            out[size] = (a, b, math.sqrt(spread_a * spread_b) / base)
    return out


def _window(calls):
    """adaptive.window of the benchmark's record: each call's time in it on every rank."""
    return adaptive.window([max(c) for c in calls], [min(c) for c in calls])


def banded_rows(bands, sizes, shape, measured):
    """Two policy rows a banded size: its balanced winner below the boundary, its skewed one
    above (adaptive calls alone read them)."""
    rows, ranges = [], dict(zip(sizes, bounds(sizes)))
    for size, (a, b, edge) in bands.items():
        where = {"topology": "any", **dict(zip(SHAPE, shape)), "min_block": ranges[size][0],
                 "max_block": ranges[size][1]}
        said = f"{measured}; adaptive bands at skew {edge:.3g}"
        rows += [{**where, "algorithm": a, "max_skew": round(edge, 3), "measured": said},
                 {**where, "algorithm": b, "min_skew": round(edge, 3), "measured": said}]
    return [{k: v for k, v in row.items() if v is not None} for row in rows]


def table_rows(chosen, sizes, shape, measured):
    """Policy rows for ``shape``: consecutive sizes with one winner make one row."""
    rows, ranges = [], bounds(sizes)
    for i, size in enumerate(sizes):
        name, ratios = chosen[size]
        if rows and rows[-1]["algorithm"] == name:
            rows[-1]["max_block"] = ranges[i][1]
            rows[-1]["ratios"] += ratios
            continue
        rows.append({"topology": "any", **dict(zip(SHAPE, shape)), "min_block": ranges[i][0],
                     "max_block": ranges[i][1], "algorithm": name, "ratios": list(ratios)})
    for row in rows:
        ratios = row.pop("ratios")
        row["measured"] = f"{measured}; {min(ratios):.2f}-{max(ratios):.2f} x MPI"
    return [{k: v for k, v in row.items() if v is not None} for row in rows]


def tune_shape(comm, args, progress_on):
    """Measure the shape of a Communicator made now; rank 0 gets its rows."""
    opts = options(args)
    with papcoll.Communicator(comm) as pc:
        topo = pc._context().topology
        nodes = len(topo.nodes)
        library = policy.library()       # its MPI's own calls were the baseline
        shape = (pc.Get_size(), nodes, topo.ppn, transport.choose() if nodes > 1 else None,
                 library if library in policy.LIBRARIES else None,
                 topo.emulated if nodes > 1 else None)
        names, _ = usable_algorithms(pc, sorted(papcoll.algorithms))
        offset, _ = clock_offsets(pc)
        progress = Progress(len(opts.sizes) * len(opts.mif) * (opts.warmup + opts.iterations),
                            enabled=progress_on)
        _, rows = measure(pc, opts, [n for n in names if n != AUTO], offset,
                          t_msg_peer(topo, across=False), progress)
    if comm.Get_rank() != 0:
        return []
    cores = os.cpu_count()
    crowded = " (oversubscribed: more processes than cores)" if shape[0] > cores else ""
    mpi = policy.library_version()
    measured = (f"{platform.node()} ({cores} cores){crowded}, N={shape[0]} as {nodes} node(s) "
                f"of {topo.ppn}{' (emulated)' if topo.emulated else ''}, "
                f"{shape[3] or 'one node'}, {mpi}, {datetime.date.today()}: "
                f"{shlex.join(['python', '-m', 'papcoll', *sys.argv[1:]])}, {opts.iterations} "
                f"iterations, MIF {','.join(map(str, opts.mif))}")
    chosen = winners(rows, opts.sizes, opts.mif)
    bands = banded(rows, opts.sizes, opts.mif)
    for size in opts.sizes:
        band = (f"  (adaptive: {bands[size][0]} below skew {bands[size][2]:.3g}, "
                f"{bands[size][1]} above)" if size in bands else "")
        print(f"  {format_size(size):>6}  {chosen[size][0]:16} "
              + "  ".join(f"{r:.2f}" for r in chosen[size][1]) + " x MPI" + band, flush=True)
    return (banded_rows(bands, opts.sizes, shape, measured)
            + table_rows(chosen, opts.sizes, shape, measured))


def predicted_rows(args):
    """The rows the model predicts for each --nodes x --ppn (see the module's docstring)."""
    from papcoll.model import params, scale
    machine = params.load(args.model)
    sizes = args.sizes or (QUICK_SIZES if args.quick else SIZES)
    library = {"mpich": "MPICH", "openmpi": "Open MPI"}[args.library]
    rows = []
    for nodes in args.nodes:
        for ppn in args.ppn:
            print(f"tune: predicting {nodes} x {ppn} on {args.model}", flush=True)
            cells = scale.shape_rows(machine, nodes, ppn, sizes, args.mif, args.calls,
                                     args.library, args.seed)
            mpi = {(c["size"], c["mif"]): c["us"] for c in cells if c["algorithm"] == "mpi"}
            cells = [{**c, "avg_us": c["us"], "ratio_vs_mpi": c["us"] / mpi[c["size"], c["mif"]]}
                     for c in cells]
            chosen = winners(cells, sizes, args.mif)
            said = (f"predicted by the model on {args.model.name} ({machine.about}), "
                    f"{args.calls} simulated calls a cell, MIF {','.join(map(str, args.mif))}, "
                    f"{datetime.date.today()}: "
                    f"{shlex.join(['python', '-m', 'papcoll', *sys.argv[1:]])}")
            shape = (nodes * ppn, nodes, ppn, args.transport, library, False)
            rows += [{**row, "predicted": True}
                     for row in table_rows(chosen, sizes, shape, said)]
    return rows


def run_model(args):
    """tune --model: predicted rows, written as measured ones are."""
    from papcoll.model.params import ParamsError
    out = args.out or Path(os.environ.get("PAPCOLL_TUNING_FILE") or policy.DEFAULT_FILE)
    why = ("tune --model needs --nodes and --ppn: the shapes to predict"
           if not (args.nodes and args.ppn) else None if args.replace else refusal(out))
    if not why:
        try:
            rows = predicted_rows(args)
            write(out, rows, args.replace)
        except (ParamsError, ConfigError) as err:
            why = f"tune: {err}"
    if why:
        print(why, file=sys.stderr, flush=True)
        return 2
    print(f"tune: wrote the predicted rows to {out} (python -m papcoll info shows the table "
          f"in force)", flush=True)
    return 0


def refusal(path):
    """Why tune must not overwrite ``path``: it exists and is not a tuning file that loads (a
    user's notes, another program's JSON); None where it is absent or a tuning file."""
    if not path.exists():
        return None
    try:
        policy.load(path.read_text(), path)
    except (OSError, UnicodeDecodeError, ConfigError) as err:
        why = err.strerror if isinstance(err, OSError) else err
        return (f"tune: {path} is not a tuning file ({why}); it is left as it is: name another "
                f"file (--out) or pass --replace to replace it")
    return None


def write(path, rows, replace=False):
    """Write ``rows`` into the tuning file at ``path``, keeping its rows of other shapes; a
    ConfigError for a file there that is not a tuning file, unless ``replace``."""
    why = refusal(path)
    if why and not replace:
        raise ConfigError(why)
    kept = []
    if why:
        print(f"tune: {path} was not a tuning file: replaced (--replace)", file=sys.stderr)
    elif path.exists():
        old = json.loads(path.read_text())["rows"]
        measured = {tuple(row.get(k) for k in SHAPE) for row in old if not row.get("predicted")}
        skipped = {tuple(row.get(k) for k in SHAPE) for row in rows if row.get("predicted")} \
            & measured
        for shape in sorted(skipped, key=str):
            print(f"tune: {dict(zip(SHAPE, shape))} has measured rows in {path}: its predicted "
                  f"rows are not written (a measured row wins)", file=sys.stderr)
        rows = [row for row in rows if tuple(row.get(k) for k in SHAPE) not in skipped]
        shapes = {tuple(row.get(k) for k in SHAPE) for row in rows}
        kept = [row for row in old if tuple(row.get(k) for k in SHAPE) not in shapes]
    text = json.dumps({"about": "papcoll's tuning file, written by python -m papcoll tune: "
                                "rows tried before the shipped table's, each only for the "
                                "shape it names (papcoll/algorithms/policy.py)",
                       "rows": rows + kept}, indent=1) + "\n"
    policy.load(text, path)                       # what papcoll will read must load
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(text)
    temp.replace(path)


def run(args):
    if args.model:
        return run_model(args)
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    out = args.out or Path(os.environ.get("PAPCOLL_TUNING_FILE") or policy.DEFAULT_FILE)
    # Refuse before measuring, not minutes later; rank 0 has said why before any rank exits.
    why = refusal(out) if rank == 0 and not args.replace else None
    if why:
        print(why, file=sys.stderr, flush=True)
    if comm.bcast(why, root=0):
        return 2
    before = os.environ.get("PAPCOLL_NODE_SIZE")
    rows = []
    try:
        for k in args.node_sizes or [None]:
            if k is not None:
                os.environ["PAPCOLL_NODE_SIZE"] = str(k)
            if rank == 0:
                print(f"tune: N={comm.Get_size()}, node size "
                      f"{k or before or 'as the machines are'}", flush=True)
            rows += tune_shape(comm, args, rank == 0 and sys.stderr.isatty())
    finally:
        if before is None:
            os.environ.pop("PAPCOLL_NODE_SIZE", None)
        else:
            os.environ["PAPCOLL_NODE_SIZE"] = before
    if rank == 0:
        write(out, rows, args.replace)
        print(f"tune: wrote {len(rows)} rows to {out} (python -m papcoll info shows the table "
              f"in force)", flush=True)
    return 0
