"""The model against the PAP paper (Qian & Afsahi 2009, docs/model-sources.md section 2) on
its machine's public figures (machines/qian-afsahi-2009.json, the gaps marked as estimates;
nothing fitted to its results): 4 nodes x 4 processes, random arrivals at MIF 32 and 512.

The paper's algorithms as it describes them: PAP_Direct took the better of its copy-based and
zero-copy schemes at each size (Sect. 5.1), and so does the model; its PAP_Shm_Direct master
copies each aggregate into the shared buffer before its flag, and hands on only after its own
gather (protocols.hierarchical's ``staged``; its Shm_Direct copies them too, then raises one
flag); its Direct is papcoll's zero-copy one in step order (the model has no copy-based Direct);
MVAPICH 1's alltoall is mpi_algorithms.mvapich1. papcoll's pap_shm_direct is shown beside them.
"""
import argparse
import json
import os

import numpy as np

from . import params, predict, protocols

MACHINE = os.path.join(os.path.dirname(__file__), "machines", "qian-afsahi-2009.json")
NODES, PPN = 4, 4
SIZES = [1, 4, 16, 64, 256, 512, 1024, 4096, 8192, 32768, 131072, 1 << 20]
MIFS = (32, 512)
ALGORITHMS = {     # the paper's name: the protocols whose best it reports
    "PAP_Direct": ("pap_direct_copy", "pap_direct_zcopy"),
    "Direct": ("direct",),
    "PAP_Shm_Direct": ("paper_pap_shm_direct",),
    "Shm_Direct": ("paper_shm_direct",),
    "MVAPICH": ("mpi",),
    "papcoll": ("pap_shm_direct",),      # papcoll's own, for comparison: no copy by the master
}
# (MIF, algorithm, bytes, its speed-up over MVAPICH) -- Sect. 5.1, L108; at MIF 512 the paper
# names no sizes: those of MIF 32 are assumed.
RATIOS = [(32, "PAP_Shm_Direct", 4, 3.5), (32, "PAP_Direct", 8192, 3.1),
          (512, "PAP_Shm_Direct", 4, 1.2), (512, "PAP_Direct", 8192, 1.5)]


def paper_pap_shm_direct(c, p):
    return protocols.hierarchical(c, p, pap=True, staged=True)


def paper_shm_direct(c, p):
    return protocols.hierarchical(c, p, pap=False, staged=True)


PROTOCOLS = {"paper_pap_shm_direct": paper_pap_shm_direct, "paper_shm_direct": paper_shm_direct}


def times(machine, sizes=SIZES, mifs=MIFS, calls=20, seed=1):
    """{(size, mif): {paper's algorithm: mean us per call}}, every algorithm on the same
    seeded arrivals; "floor": the mean wait for the last arrival alone, which every alltoall
    pays (every process needs the last one's blocks)."""
    nodes = protocols.shape(NODES, PPN)
    out = {}
    for size in sizes:
        for mif in mifs:
            rng = np.random.default_rng([seed, size, mif])
            table = predict.arrivals(rng, calls, NODES * PPN,
                                     mif * predict.t_msg(machine, nodes, size))
            cell = out[size, mif] = {"floor": 1e6 * float(np.mean(table.max(1, keepdims=True)
                                                                  - table))}
            for name, runs in ALGORITHMS.items():
                cell[name] = min(1e6 * np.mean([predict.call_time(
                    machine, nodes, size, PROTOCOLS.get(a, a), row, "mvapich1")
                    for row in table]) for a in runs)
    return out


def best(cell):
    """The paper's best algorithm in a cell (papcoll's own left out)."""
    return min((n for n in ALGORITHMS if n != "papcoll"), key=cell.get)


def claims(t):
    """[(claim, the paper's, the model's, held)]: the four ratios to MVAPICH (held: within
    30 %), and the choice by size."""
    rows = []
    for mif, name, size, ratio in RATIOS:
        got = t[size, mif]["MVAPICH"] / t[size, mif][name]
        rows.append((f"{name} over MVAPICH, {size} B, MIF {mif}", f"{ratio:.1f} x",
                     f"{got:.2f} x", bool(abs(got / ratio - 1) <= 0.30)))
    small = [s for s in SIZES if s <= 256]
    won = [s for s in small if best(t[s, 32]) == "PAP_Shm_Direct"]
    rows.append(("PAP_Shm_Direct best up to 256 B at MIF 32", f"{len(small)} of {len(small)}",
                 f"{len(won)} of {len(small)}", len(won) == len(small)))
    lost = [s for s in small if best(t[s, 512]) != "PAP_Shm_Direct"]
    rows.append(("PAP_Shm_Direct not always best up to 256 B at MIF 512", "at least 1",
                 f"{len(lost)} of {len(small)}", bool(lost)))
    large = [s for s in SIZES if s >= 512]
    won = [s for s in large if best(t[s, 32]) == "PAP_Direct"]
    rows.append(("PAP_Direct best from 512 B to 1 MiB (MIF 32)", f"{len(large)} of {len(large)}",
                 f"{len(won)} of {len(large)}", len(won) == len(large)))
    return rows


def main(argv):
    a = argparse.ArgumentParser(prog="python -m papcoll model paper", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    a.add_argument("--params", default=MACHINE, help="machine parameters (default: the paper's)")
    a.add_argument("--calls", type=int, default=20, help="simulated calls per cell")
    a.add_argument("--seed", type=int, default=1)
    a.add_argument("--json", action="store_true")
    args = a.parse_args(argv)
    if args.calls < 1:
        a.error("--calls must be at least 1")
    try:
        machine = params.load(args.params)
    except params.ParamsError as e:
        a.exit(1, f"model paper: {e}\n")
    t = times(machine, calls=args.calls, seed=args.seed)
    if args.json:
        print(json.dumps({"cells": [{"size": s, "mif": m, "us": c} for (s, m), c in t.items()],
                          "claims": [dict(zip(("claim", "paper", "model", "held"), r))
                                     for r in claims(t)]}))
        return 0
    names = [*ALGORITHMS, "floor"]
    print(f"{'bytes':>8} {'MIF':>4}  " + "".join(f"{n:>15}" for n in names) + "  best")
    for (size, mif), cell in t.items():
        print(f"{size:>8} {mif:>4}  " + "".join(f"{cell[n]:13.1f}us" for n in names)
              + f"  {best(cell)}")
    for claim, paper, model, held in claims(t):
        print(f"{'held' if held else 'MISSED':6}  {claim}: paper {paper}, model {model}")
    return 0
