"""``python -m papcoll model predict --params FILE --nodes K --ppn P --sizes 8,8K,1M --mif 32
[--json]``: one line per size, MIF and algorithm (MPI's own as ``mpi``) with the predicted mean
time in the call in microseconds, as the arrival benchmark measures it; with ``--json`` a list
of objects with the keys size, mif, algorithm and us."""
import argparse
import json
import sys

from ..outfile import out_file
from . import aggregate, mpi_algorithms, params, predict, protocols, scale
from .sim import Deadlock

CHECKED = ((16, 2), (16, 4))  # the shapes check-aggregation runs both ways


def check_aggregation(machine, calls, sizes=(8, 8192, 65536), mifs=(1, 32)):
    """Every algorithm's aggregated prediction against its exact one, on shapes where both
    run; the largest error."""
    worst = 0.0
    for nodes, ppn in CHECKED:
        shape = protocols.shape(nodes, ppn)
        exact = predict.predict(machine, shape, sizes, mifs, calls=calls)
        agg = predict.predict(machine, shape, sizes, mifs, calls=calls,
                              aggregated=aggregate.plan(nodes, ppn))
        for e, a in zip(exact, agg):
            error = a["us"] / e["us"] - 1
            worst = max(worst, abs(error))
            print(f"{nodes} x {ppn} {e['size']:>7} B MIF {e['mif']:>3} {e['algorithm']:16} "
                  f"exact {e['us']:10.1f} us  aggregated {a['us']:10.1f} us  {error:+.0%}")
    print(f"largest difference: {worst:.0%}")
    return 0


def _counts(text, item, what):
    """A comma-separated list of ``item(part)``s, each 0 or more, else an argparse error."""
    try:
        values = [item(part) for part in text.split(",")]
    except (ValueError, IndexError):
        values = [-1]
    if min(values) < 0:
        raise argparse.ArgumentTypeError(f"not a list of {what}: {text!r}")
    return values


def _size(part):
    units = {"K": 1 << 10, "M": 1 << 20}
    return int(part[:-1]) * units[part[-1].upper()] if part[-1:].upper() in units else int(part)


def _sizes(text):
    return _counts(text, _size, "sizes of 0 bytes or more")


def _ints(text):
    return _counts(text, int, "integers of 0 or more")


def _fraction(text):
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"not a fraction from 0 to 1: {text!r}")
    return value


def _shapes(text):
    try:
        shapes = [tuple(int(x) for x in s.lower().split("x")) for s in text.split(",")]
    except ValueError:
        shapes = []
    if not shapes or any(len(t) != 2 or min(t) < 1 for t in shapes):
        raise argparse.ArgumentTypeError(f"not a list of NODESxPPN: {text!r}")
    return shapes


def parser():
    p = argparse.ArgumentParser(prog="python -m papcoll model", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("calibrate", help="under mpiexec: measure this machine's parameters "
                   "(python -m papcoll model calibrate --help)")
    sub.add_parser("validate", help="the model against the arrival benchmark's results "
                   "(python -m papcoll model validate --help)")
    sub.add_parser("paper", help="the model against the PAP paper's results, on its machine's "
                   "public figures (python -m papcoll model paper --help)")
    q = sub.add_parser("predict", help="predicted time per call of every algorithm")
    q.add_argument("--params", required=True, help="machine parameters (a model file)")
    q.add_argument("--nodes", type=int, required=True)
    q.add_argument("--ppn", type=int, required=True, help="processes per node")
    q.add_argument("--sizes", type=_sizes, default=[8, 8 << 10, 1 << 20], help="bytes per peer")
    q.add_argument("--mif", type=_ints, default=[1, 32], help="maximum imbalance factors")
    q.add_argument("--late-fraction", type=_fraction, help="instead of random delays, this "
                   "fraction of the processes arrives MIF x t_msg late")
    q.add_argument("--algorithms", help="comma-separated (default: all the model runs here)")
    q.add_argument("--library", default="mpich", choices=sorted(mpi_algorithms.SELECTION))
    q.add_argument("--calls", type=int, help="simulated calls per cell (default: 2 to "
                   f"{predict.CALLS}, until every algorithm's mean has a standard error within "
                   f"{predict.PRECISION * 100:g} %% of it)")
    q.add_argument("--seed", type=int, default=1)
    q.add_argument("--json", action="store_true")
    how = q.add_mutually_exclusive_group()
    how.add_argument("--exact", action="store_true", help="simulate every process (default up to "
                     f"{aggregate.ABOVE} processes)")
    how.add_argument("--aggregate", action="store_true", help="simulate 4 nodes standing for "
                     f"all (default above {aggregate.ABOVE} processes; aggregate.py)")
    s = sub.add_parser("scale", help="predictions for many nodes: every algorithm's time, "
                       "the best of each cell and how firm it is (scale.py)")
    s.add_argument("--params", required=True)
    s.add_argument("--shapes", type=_shapes, default=list(scale.SHAPES),
                   help="NODESxPPN,... (default " + ",".join(f"{n}x{q}" for n, q in scale.SHAPES)
                   + ")")
    s.add_argument("--sizes", type=_sizes, default=list(scale.SIZES), help="bytes per peer")
    s.add_argument("--mif", type=_ints, default=list(scale.MIFS))
    s.add_argument("--library", default="mpich", choices=sorted(mpi_algorithms.SELECTION))
    s.add_argument("--calls", type=int, default=5, help="simulated calls per cell")
    s.add_argument("--error", type=float, required=True,
                   help="the model's validated error of a ratio between two algorithms, e.g. "
                        "0.3 (model validate prints it): a best ahead by less is 'close'")
    s.add_argument("--json", type=out_file,
                   help="write every cell, with every algorithm's time, here")
    a = sub.add_parser("check-aggregation", help="the aggregated simulation against the exact "
                       "one where both run")
    a.add_argument("--params", required=True)
    a.add_argument("--calls", type=int, default=10)
    return p


def main(argv):
    if argv[:1] == ["calibrate"]:
        from .calibrate import main as calibrate
        return calibrate(argv[1:])
    if argv[:1] == ["validate"]:
        from .validate import main as validate
        return validate(argv[1:])
    if argv[:1] == ["paper"]:
        from .paper import main as paper
        return paper(argv[1:])
    args = parser().parse_args(argv)
    if args.calls is not None and args.calls < 1 or args.command == "predict" and (
            args.nodes < 1 or args.ppn < 1):
        sys.exit("model: --nodes, --ppn and --calls must be at least 1")
    try:
        machine = params.load(args.params)
    except params.ParamsError as e:
        sys.exit(f"model: {e}")
    if args.command == "check-aggregation":
        return check_aggregation(machine, args.calls)
    if args.command == "scale":
        if args.error < 0:
            sys.exit("model: --error must be at least 0")
        return scale.report(machine, args.shapes, args.sizes, args.mif, args.library,
                            args.calls, args.error, args.json)
    nodes = protocols.shape(args.nodes, args.ppn)
    algorithms = args.algorithms.split(",") if args.algorithms else None
    aggregated = (aggregate.plan(args.nodes, args.ppn) if args.aggregate else
                  None if args.exact else aggregate.default(args.nodes, args.ppn))
    unknown = [a for a in algorithms or () if a not in predict.runnable(nodes)]
    if unknown:
        sys.exit(f"model: cannot run {', '.join(unknown)} on {args.nodes} x {args.ppn}; "
                 f"it runs {', '.join(predict.runnable(nodes))}")
    try:
        rows = predict.predict(machine, nodes, args.sizes, args.mif, algorithms, args.calls,
                               args.seed, args.late_fraction, args.library, aggregated)
    except Deadlock as e:
        sys.exit(str(e))
    if args.json:
        print(json.dumps(rows))
    else:
        for r in rows:
            print(f"{r['size']:>9} B  MIF {r['mif']:>4}  {r['algorithm']:16} {r['us']:12.2f} us")
    return 0
