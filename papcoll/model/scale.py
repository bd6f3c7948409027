"""``python -m papcoll model scale --params FILE``: the model's predictions for machines no
machine here comes near -- 64, 256 and 1024 nodes of 32 and 64 processes by default -- at
every size and MIF asked, aggregated as ``predict`` does above 128 processes.

For each cell it gives every algorithm's predicted time, the predicted best, the hierarchical
algorithm's ratio to MPI's own, and how far the best is ahead of the other side -- MPI's own
where papcoll's best wins, papcoll's best where MPI's wins. ``--error E`` is the model's
validated error of a ratio between two algorithms (``model validate`` prints it): a best ahead
by more than that is ``firm``; within it, the two sides may swap on the real machine, and the
cell says ``close``. The same predictions serve ``python -m papcoll
tune --model`` (bench/tune.py), which writes them as predicted policy rows."""
import json

from . import aggregate, predict, protocols

SHAPES = ((64, 32), (64, 64), (256, 32), (256, 64), (1024, 32), (1024, 64))
SIZES = (8, 256, 8 << 10, 64 << 10, 1 << 20)
MIFS = (1, 32, 128, 512)
HIERARCHICAL = "pap_shm_direct"
DECIDES = 0.10        # the arrival pattern decides where no one algorithm comes this near every
                      # MIF's best (steadiest; bench alternate asks the same of its phases)


def shape_rows(machine, nodes, ppn, sizes, mifs, calls=5, library="mpich", seed=1):
    """predict's rows for ``nodes`` x ``ppn``, aggregated where predict would aggregate."""
    return predict.predict(machine, protocols.shape(nodes, ppn), sizes, mifs, calls=calls,
                           seed=seed, library=library, aggregated=aggregate.default(nodes, ppn))


def cells(rows, error):
    """Per (size, MIF) of ``rows``: {size, mif, best, best_us, rival (the best of the other
    side: MPI's own where papcoll's best wins, papcoll's best where MPI's wins), ahead (the
    rival's time / the best's), firm (ahead by more than ``error``), mpi_us, hierarchical (its
    time / MPI's), times {algorithm: us}}."""
    out = {}
    for r in rows:
        out.setdefault((r["size"], r["mif"]), {})[r["algorithm"]] = float(r["us"])
    table = []
    for (size, mif), times in out.items():
        best = min(times, key=times.get)
        rival = "mpi" if best != "mpi" else min((n for n in times if n != "mpi"),
                                                 key=times.get, default="mpi")
        ahead = times[rival] / times[best]
        table.append({"size": size, "mif": mif, "best": best, "best_us": times[best],
                      "rival": rival, "ahead": ahead, "firm": bool(ahead > 1 + error),
                      "mpi_us": times["mpi"],
                      "hierarchical": times.get(HIERARCHICAL, float("nan")) / times["mpi"],
                      "times": times})
    return table


def steadiest(cells_of_size):
    """(algorithm, its worst ratio to a MIF's best) of the one algorithm that comes nearest the
    best at every MIF of ``cells_of_size`` (one size's cells: {times, best_us} each): above
    1 + DECIDES, following the arrival pattern can pay there (docs/adaptive.md)."""
    names = set.intersection(*(set(c["times"]) for c in cells_of_size))
    worst = {n: max(c["times"][n] / c["best_us"] for c in cells_of_size) for n in names}
    name = min(sorted(worst), key=worst.get)
    return name, worst[name]


def report(machine, shapes, sizes, mifs, library, calls, error, out=None):
    """Print every shape's cells (``cells``); with ``out``, write them all as JSON there."""
    everything = []
    for nodes, ppn in shapes:
        print(f"# {nodes} x {ppn} ({nodes * ppn} processes), {library}'s selection; "
              f"{HIERARCHICAL}/mpi: its time over MPI's; firm: the best ahead of the other side "
              f"(papcoll or MPI) by more than {error:.0%}", flush=True)
        print(f"{'size':>9} {'MIF':>4} {'best':16} {'us':>12} {'mpi us':>12} "
              f"{HIERARCHICAL + '/mpi':>19} {'other side':16} {'ahead':>6}")
        table = cells(shape_rows(machine, nodes, ppn, sizes, mifs, calls, library), error)
        for c in table:
            print(f"{c['size']:>9} {c['mif']:>4} {c['best']:16} {c['best_us']:12.1f} "
                  f"{c['mpi_us']:12.1f} {c['hierarchical']:19.2f} {c['rival']:16} "
                  f"{c['ahead']:6.2f} {'firm' if c['firm'] else 'close'}", flush=True)
            everything.append({"nodes": nodes, "ppn": ppn, **c})
        for size in sizes:
            name, worst = steadiest([c for c in table if c["size"] == size])
            print(f"# {size} B: {name} comes within {worst - 1:.0%} of every MIF's best"
                  f"{'' if worst <= 1 + DECIDES else ': the arrival pattern decides here'}")
    if out:
        with open(out, "w") as f:
            json.dump({"machine": machine.about, "library": library, "calls": calls,
                       "error": error, "cells": everything}, f, indent=1)
