"""``python -m papcoll model validate --params FILE RESULT.json...``: the model against the
arrival benchmark's measured cells (its --out JSON), each predicted for the same shape, size,
arrivals (those the benchmark recorded) and MPI library, on parameters calibrated on the same
machine.

It prints every cell (measured, predicted, error) and the targets' two figures: the share of
cells predicted within 25 %, and the share of (size, MIF) blocks whose best algorithm the model
names -- all of them, and those whose best is not the most common winner. Two rows that ran one
protocol are one algorithm there: ``pap_direct`` is its copy-based or zero-copy scheme, as the
benchmark recorded (``runs_as``), and naming either names it. With ``--plot PNG`` (matplotlib)
it draws predicted against measured, one colour per algorithm.

The model plays one algorithm's calls, each after the last of its own. A run whose algorithms
interleave (the benchmark's default) also carries, where processes share cores, part of each
call's predecessor's cost, another algorithm's; ``--apart`` runs measure what the model plays
(docs/model.md, "One algorithm's calls"). And it plays processes that share cores evenly,
as a launch bound to cores keeps them; an unbound one (the header says which) leaves them to
the scheduler, which at 2 x 2 here placed them three and one now and then (docs/model.md,
"Bound to cores").

With ``--repeat AGAIN.json...`` instead of ``--params``, a second run of the same benchmark
stands in for the model, cell for cell: the figures a model that foresaw the second run exactly
would score against the first. That is how far the measurements themselves reach the targets
on this machine."""
import argparse
import json
from collections import Counter

import numpy as np

from ..algorithms.policy import version_line
from ..outfile import out_file
from . import params, predict
from .protocols import shape

WITHIN = 0.25


def library_of(text):
    return "openmpi" if "Open MPI" in text else "mvapich1" if "MVAPICH" in text else "mpich"


def modelled(result):
    """The result's node shape, and (row, the algorithm the model runs for it) of every row the
    model runs: an algorithm's own, ``auto``'s as the algorithm it chose."""
    nodes = shape(result["nodes"], result["ppn"], result["nprocs"])
    runs = predict.runnable(nodes)
    rows = [(row, row.get("chosen") if row["algorithm"] == "auto" else row["algorithm"])
            for row in result["results"]]
    return nodes, [(row, name) for row, name in rows if name in runs]


def ran(row):
    """The algorithm whose protocol a row ran: pap_direct's scheme, where recorded."""
    return row.get("runs_as", row["algorithm"])


def clock_error(result):
    """How far off a recorded arrival can be, us: half the longest round trip the benchmark's
    clock offsets were taken from (0 where it recorded none)."""
    return max((r["round_trip_us"] for r in result.get("clock", {}).get("per_rank", ())),
               default=0.0) / 2


def cells(machine, result, calls=None, drawn=False):
    """(size, mif, algorithm, the algorithm it ran, measured us, predicted us, whether drawn)
    of every cell the model runs. Each is predicted for the arrivals the benchmark recorded in
    its calls (every one, or the first ``calls``): a sleep overshoots its delay, most where
    processes outnumber cores, so the planned pattern is not what ran, and one call in a
    hundred can hold a process back by milliseconds. Where the clock's error is over a
    quarter of the cell's time (the two-host pair: round trips of 30-45 ms, calls of 25-80 ms)
    the recorded arrivals say less than the plan, and a prediction from them could not be
    within 25 %: there, and with ``drawn``, the model's own draws (``calls`` of them, 30 if
    None) of the planned pattern."""
    nodes, rows = modelled(result)
    library = library_of(result["mpi_library"])
    error = clock_error(result)
    out = []
    for row, name in rows:
        recorded = row.get("per_rank", {}).get("arrival_us")
        own = drawn or not recorded or error > WITHIN * row["avg_us"]
        if own:
            got = predict.predict(machine, nodes, [row["size"]], [row["mif"]], [name],
                                  calls or predict.CALLS, result["seed"],
                                  result.get("late_fraction"), library)[0]["us"]
        else:
            got = 1e6 * np.mean([predict.call_time(machine, nodes, row["size"], name,
                                                   np.asarray(a) * 1e-6, library)
                                 for a in recorded[:calls]])
        out.append((row["size"], row["mif"], row["algorithm"], ran(row), row["avg_us"], got,
                    own))
    return out


def repeated(result, again):
    """(size, mif, algorithm, the algorithm it ran, measured, measured again, False) of every
    cell of ``result`` the model runs (:func:`modelled`) that ``again``, a run of the same
    shape, holds too (the form of :func:`cells`)."""
    keys = ("nprocs", "nodes", "ppn", "mpi_library")
    if any(result[k] != again[k] for k in keys):
        raise ValueError("--repeat: not a run of the same shape and MPI library ("
                         + ", ".join(f"{k} {result[k]} and {again[k]}" for k in keys) + ")")
    second = {(r["size"], r["mif"], r["algorithm"]): r["avg_us"] for r in again["results"]}
    return [(*k, ran(r), r["avg_us"], second[k], False) for r, _ in modelled(result)[1]
            for k in [(r["size"], r["mif"], r["algorithm"])] if k in second]


def summary(rows):
    """(share within 25 %, blocks whose best is named right, of how many; the same for blocks
    whose best is not the most common winner, and that winner). ``rows``: (result, size, MIF,
    algorithm, the algorithm it ran, measured, predicted); a block is one result's size and
    MIF, and a best is the algorithm it ran."""
    within = sum(abs(p / m - 1) <= WITHIN for *_, m, p in rows) / max(1, len(rows))
    blocks = {}
    for result, size, mif, name, as_run, m, p in rows:
        if name != "auto":
            blocks.setdefault((result, size, mif), []).append((as_run, m, p))
    best = {k: (min(v, key=lambda r: r[1])[0], min(v, key=lambda r: r[2])[0])
            for k, v in blocks.items() if len(v) > 1}
    common = Counter(m for m, _ in best.values()).most_common(1)
    common = common[0][0] if common else None
    right = sum(m == p for m, p in best.values())
    rare = [(m, p) for m, p in best.values() if m != common]
    return within, right, len(best), sum(m == p for m, p in rare), len(rare), common


def ratio_error(rows):
    """The median of |predicted ratio / measured ratio - 1| over every algorithm's time over
    MPI's own in the same block: how far the model's comparisons go wrong (``model scale``
    takes it as ``--error``); None where no block holds MPI beside another algorithm."""
    blocks = {}
    for result, size, mif, name, _, m, p in rows:
        blocks.setdefault((result, size, mif), {})[name] = (m, p)
    errors = [abs((p / mp) / (m / mm) - 1) for b in blocks.values() if "mpi" in b
              for (mm, mp) in [b["mpi"]] for name, (m, p) in b.items() if name != "mpi"]
    return float(np.median(errors)) if errors else None


def plot(rows, path, title):
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator, NullFormatter, StrMethodFormatter
    fig = Figure(figsize=(6, 6))
    ax = fig.add_subplot()
    measured, predicted = [r[-2] for r in rows], [r[-1] for r in rows]
    for name in sorted({r[3] for r in rows}):      # one colour per algorithm, as it is named
        mine = [r for r in rows if r[3] == name]
        ax.loglog([r[-2] for r in mine], [r[-1] for r in mine], "o", alpha=0.6, label=name)
    low, high = min(measured + predicted), max(measured + predicted)
    ax.plot([low, high], [low, high], "k-", lw=0.8)
    for f in (1 - WITHIN, 1 + WITHIN):
        ax.plot([low, high], [low * f, high * f], "k:", lw=0.8)
    ticks = [m * 10 ** e for e in range(-1, 7) for m in (1, 2, 5)]   # 1-2-5, readable
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(FixedLocator(ticks))
        axis.set_major_formatter(StrMethodFormatter("{x:g}"))
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("measured us per call")
    ax.set_ylabel("predicted us per call")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.savefig(path, dpi=120, bbox_inches="tight")


def main(argv):
    p = argparse.ArgumentParser(prog="python -m papcoll model validate", description=__doc__)
    against = p.add_mutually_exclusive_group(required=True)
    against.add_argument("--params", help="the machine's parameters (a model file)")
    against.add_argument("--repeat", nargs="+", metavar="AGAIN", help="instead of the model, "
                         "a second run of each result, in the same order")
    p.add_argument("results", nargs="+", help="the arrival benchmark's JSON results")
    p.add_argument("--calls", type=int, help="simulated calls per cell: the first CALLS the "
                   "benchmark recorded (default: every one; with --drawn, 30)")
    p.add_argument("--drawn", action="store_true", help="predict for the model's own draws of "
                   "the planned arrivals, not the ones the benchmark recorded")
    p.add_argument("--plot", type=out_file, help="a PNG of predicted against measured")
    p.add_argument("--cores", type=float, help="cores per node where the results ran in "
                   "another node shape than the calibration (calibrate needs two nodes: a "
                   "one-node run on a machine of C CPUs takes C)")
    args = p.parse_args(argv)
    if args.repeat and len(args.repeat) != len(args.results):
        p.error(f"--repeat: {len(args.repeat)} second runs for {len(args.results)} results "
                f"(one each, in the same order)")
    if args.calls is not None and args.calls < 1:
        p.error("--calls: at least 1")
    if args.cores is not None and (args.repeat or args.cores <= 0):
        p.error("--cores: a number above 0, with --params")
    try:
        machine = params.load(args.params) if args.params else None
    except params.ParamsError as e:
        p.error(str(e))
    if args.cores is not None:
        machine = params.make(machine.about, {**machine.sources, "cores": "--cores"},
                              **{**machine.values, "cores": args.cores})
    rows = []
    for i, path in enumerate(args.results):
        try:
            result = _load(path)
            mine = (repeated(result, _load(args.repeat[i])) if args.repeat else
                    cells(machine, result, args.calls, args.drawn))
        except (OSError, KeyError, ValueError) as e:
            p.error(f"{path}: {e!r}" if isinstance(e, KeyError) else f"{path}: {e}")
        own = sum(c[-1] for c in mine)
        why = ("--drawn" if args.drawn else
               f"the benchmark's clock is off by up to {clock_error(result):.0f} us")
        note = f"; the model's own arrivals in {own} of {len(mine)} cells ({why})" if own else ""
        print(f"# {path}: {result['nprocs']} processes, {result['nodes']} x {result['ppn']}, "
              f"{result['mpi_library']}, calls {result.get('calls', 'interleaved')}, "
              f"ranks {result.get('cpus', {}).get('placement', 'not recorded')}{note}")
        print(f"{'size':>9} {'MIF':>4} {'algorithm':16} {'measured':>10} "
              f"{'again' if args.repeat else 'predicted':>10} {'error':>7}")
        for size, mif, name, as_run, m, pr, drawn in mine:
            label = name if as_run == name else f"{name}={as_run.removeprefix(name + '_')}"
            print(f"{size:>9} {mif:>4} {label:16} {m:10.1f} {pr:10.1f} {pr / m - 1:+7.0%}"
                  + ("  drawn" if drawn else ""))
        rows += [(path, *cell[:-1]) for cell in mine]
    within, right, blocks, rare_right, rare, common = summary(rows)
    print(f"\n{len(rows)} cells: {within:.0%} within {WITHIN:.0%} (target 80 %); best algorithm "
          f"named in {right} of {blocks} blocks (target 80 %), in {rare_right} of the {rare} "
          f"whose best is not {common} (target two thirds)")
    error = ratio_error(rows)
    if error is not None:
        print(f"median error of a time over MPI's in the same block: {error:.0%} (model scale's "
              f"--error)")
    if args.plot:
        plot(rows, args.plot, f"{len(rows)} cells, {within:.0%} within {WITHIN:.0%}")
    return 0


def _load(path):
    """An arrival result, its library as this version records it (older runs under Open MPI
    kept the NUL that ends its version)."""
    with open(path) as f:
        result = json.load(f)
    result["mpi_library"] = version_line(result["mpi_library"])
    return result
