"""``alternate``: a program whose arrival pattern changes -- the adaptive auto's benchmark.

    mpiexec -n 4 python -m mpi4py -m papcoll.bench alternate --sizes 8,256,8K,64K --phase 200

Phases of ``--phase`` calls alternate between the MIFs of ``--mif`` (default 1 and 128: a
balanced phase, then a skewed one), ``--cycles`` times. Every call waits its delay as in the
arrival benchmark (arrival.py: uniform in [0, MIF x t_msg), drawn from --seed), and every
algorithm takes its turn in every call, in a fresh order each, so all see the same delays and
the same noise. With ``--apart`` each algorithm runs each phase's calls in a stretch of its own
instead, the algorithms in a fresh drawn order each phase (arrival_measure.stretch_schedule),
as a program that calls one algorithm has them: where processes share cores no call but a
stretch's first then carries the cost of another algorithm's before it (docs/benchmarks.md),
and a phase's slow spell falls on one. Beside each fixed algorithm and the plain ``auto``,
``adaptive`` is ``auto`` on a Communicator made with PAPCOLL_ADAPT=K (--adapt): it sees the
phases change through its own calls, as a program would. Each of the two has a Communicator of
its own, so that no plan serves two calls of an iteration.

For each size it prints each phase's mean time per call of every algorithm, the phase's best
fixed algorithm, adaptive's and auto's ratio to it, and over the whole run adaptive's ratio to
the best single fixed algorithm; and says whether the phases' best fixed algorithms differ by
more than 10 %: whether no one fixed algorithm comes within 10 % of every phase's best (the
cells where following the pattern can pay). The JSON (--out) holds every
phase's figures.
"""
import datetime
import json
import os
import shlex
import sys
from pathlib import Path

import numpy as np
from mpi4py import MPI

import papcoll
from papcoll.algorithms import AUTO, policy
from papcoll.model import scale
from papcoll.outfile import out_file

from .arrival_measure import (block_rng, buffers, clock_offsets, delay_table, message_time,
                              run_block, stretch_schedule, usable_algorithms)
from .options import comma_list, format_size, integer, parse_size
from .variants import Case, caller

ADAPTIVE = "adaptive"


def add_arguments(parser):
    parser.add_argument("--sizes", type=comma_list(parse_size), default=[8, 256, 8 << 10, 64 << 10],
                        help="bytes per peer (default 8,256,8K,64K)")
    parser.add_argument("--mif", type=comma_list(integer(0), sort=False), default=[1, 128],
                        help="the phases' MIFs, in turn (default 1,128)")
    parser.add_argument("--phase", type=integer(1), default=200, help="calls a phase (default 200)")
    parser.add_argument("--cycles", type=integer(1), default=1,
                        help="times the phases go round (default 1)")
    parser.add_argument("--adapt", type=integer(4), default=16,
                        help="adaptive's PAPCOLL_ADAPT: calls between its agreements (default 16)")
    parser.add_argument("--algorithms", type=comma_list(str, sort=False),
                        help="fixed algorithms (default: every one that runs here)")
    parser.add_argument("--warmup", type=integer(0), default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--apart", action="store_true",
                        help="run each algorithm through each phase in a stretch of its "
                             "own, the algorithms in a drawn order each phase (default: every "
                             "call, every algorithm in a fresh order)")
    parser.add_argument("--out", type=out_file, help="write the result's JSON here (a file)")


def adaptive_communicator(comm, every):
    """A Communicator made with PAPCOLL_ADAPT=``every`` on every rank (it is read at creation)."""
    before = os.environ.get("PAPCOLL_ADAPT")
    os.environ["PAPCOLL_ADAPT"] = str(every)
    try:
        return papcoll.Communicator(comm)
    finally:
        if before is None:
            os.environ.pop("PAPCOLL_ADAPT")
        else:
            os.environ["PAPCOLL_ADAPT"] = before


def phase_delays(args, size, nprocs, t_msg):
    """(delays (rounds, processes), each round's phase index); warm-up rounds first, balanced."""
    tables, phases = [np.zeros((args.warmup, nprocs))], [-1] * args.warmup
    for cycle in range(args.cycles):
        for j, mif in enumerate(args.mif):
            rng = block_rng(args.seed, size, mif * 1000 + cycle)
            tables.append(delay_table(rng, args.phase, nprocs, mif * t_msg))
            phases += [cycle * len(args.mif) + j] * args.phase
    return np.concatenate(tables), np.array(phases)


def summarize(size, names, in_call, phases, mifs):
    """One size's figures from ``in_call`` (algorithms, rounds, processes), rank 0's; a phase's
    figures pool its calls of every cycle (``phases``: each round's phase index, -1 warm-up)."""
    per_call = in_call.mean(axis=2) * 1e6               # mean over processes, microseconds
    fixed = [j for j, n in enumerate(names) if n not in (AUTO, ADAPTIVE)]
    out = {"size": size, "phases": []}
    for p in range(len(mifs)):
        mean = per_call[:, (phases >= 0) & (phases % len(mifs) == p)].mean(axis=1)
        best = min(fixed, key=lambda j: mean[j])
        out["phases"].append({"mif": mifs[p], "us": dict(zip(names, mean.tolist())),
                              "best": names[best], "best_us": float(mean[best])})
    timed = phases != -1
    whole = per_call[:, timed].mean(axis=1)
    single = min(fixed, key=lambda j: whole[j])
    out.update(us=dict(zip(names, whole.tolist())), best_single=names[single],
               best_single_us=float(whole[single]))
    # The phases differ where no one fixed algorithm comes near every phase's best (the model's
    # rule): only there can following the pattern beat the best single algorithm.
    _, worst = scale.steadiest([{"times": {names[j]: ph["us"][names[j]] for j in fixed},
                                 "best_us": ph["best_us"]} for ph in out["phases"]])
    out["differ"] = worst > 1 + scale.DECIDES
    return out


def print_size(r, names):
    print(f"\n{format_size(r['size'])} per peer: phases' best fixed algorithms "
          f"{'differ' if r['differ'] else 'do not differ'} by more than {scale.DECIDES:.0%}")
    print(f"{'MIF':>5} " + " ".join(f"{n[:12]:>12}" for n in names)
          + f" {'best fixed':>16} {'adaptive/best':>13} {'auto/best':>9}")
    for ph in r["phases"] + [dict(mif="all", us=r["us"], best=r["best_single"],
                                  best_us=r["best_single_us"])]:
        ratio = {n: ph["us"].get(n, float("nan")) / ph["best_us"] for n in (ADAPTIVE, AUTO)}
        print(f"{ph['mif']:>5} " + " ".join(f"{ph['us'][n]:12.1f}" for n in names)
              + f" {ph['best']:>16} {ratio[ADAPTIVE]:13.2f} {ratio[AUTO]:9.2f}")


def run(args):
    comm = MPI.COMM_WORLD
    rank, nprocs = comm.Get_rank(), comm.Get_size()
    started = datetime.datetime.now()
    results = []
    # auto on a Communicator of its own, as adaptive is: one Communicator's plans would serve
    # both auto's call and the fixed algorithm it runs in every iteration, warmer than any other
    with papcoll.Communicator(comm) as pc, papcoll.Communicator(comm) as pauto, \
            adaptive_communicator(comm, args.adapt) as pa:
        fixed, skipped = usable_algorithms(pc, args.algorithms or [
            n for n in sorted(papcoll.algorithms, key=lambda n: n != "mpi")])
        names = fixed + [AUTO, ADAPTIVE]
        calls = [caller(pc, n, "alltoall") for n in fixed] + [pauto.Alltoall, pa.Alltoall]
        offset, _ = clock_offsets(pc)
        for size in args.sizes:
            send, recv, want = buffers(rank, nprocs, size)
            t_msg, _ = message_time(pc, size, min(1, nprocs - 1))
            delays, phases = phase_delays(args, size, nprocs, t_msg)
            stretches = ([args.warmup] + [args.phase] * (args.cycles * len(args.mif))
                         if args.apart else [1] * len(delays))
            schedule = stretch_schedule(args.seed, size, 0, stretches, len(names))
            _, in_call, _ = run_block(pc, names, Case(send, recv, recv, want), calls,
                                      delays[:, rank], schedule, offset, False, args.warmup,
                                      lambda: None)
            gathered = pc.gather(in_call, root=0)
            if rank == 0:
                r = summarize(size, names, np.stack(gathered, axis=-1), phases[args.warmup:],
                              args.mif)
                r["t_msg_us"] = t_msg * 1e6
                results.append(r)
                print_size(r, names)
                sys.stdout.flush()
        chosen = {size: site.name for size, site in pa._adaptive.sites.items()}
    if rank == 0:
        if skipped:
            print("not run here: " + "; ".join(f"{n}: {why}" for n, why in skipped.items()))
        if args.out:
            args.out.write_text(json.dumps({
                "benchmark": "papcoll alternate", "date": started.isoformat(timespec="seconds"),
                "command": shlex.join(["python", "-m", "papcoll.bench", *sys.argv[1:]]),
                "nprocs": nprocs, "mpi_library": policy.library_version(),
                "options": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
                "adaptive_last_choice": chosen, "results": results}, indent=1))
    return 0
