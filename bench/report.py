"""One self-contained report of papcoll's benchmarks: the PAP alltoall paper's figures and FT table.

    .venv/bin/python -m papcoll.bench report [--np 2,4] [--ft-classes S,W] [--quick] [--out DIR]
    .venv/bin/python -m papcoll.bench report --collect DIR     # re-render from DIR's JSON only

Run it as a plain process, NOT under mpiexec: it launches every benchmark itself, one after the
other, as ``scripts/mpiexec -n N <python> -m mpi4py -m papcoll.bench arrival|ft ...`` with a time
limit (on expiry the whole process group is killed), keeping their JSON, text and logs in
DIR/runs/. Then it writes DIR/report.md and its PNGs beside it, from this run's JSON only:

  time in call vs size, one panel per MIF, per N        (random arrival; paper Fig. 1-2)
  time in call vs size with 25 % and 75 % late processes (at the largest N and MIF; Fig. 4)
  time in call vs N at a few sizes, per MIF             (the random-arrival runs; Fig. 3)
  NAS FT total and alltoall time, speedups vs mpi and direct   (Table 1)

This module holds the subcommand and its settings; report_driver.py launches the runs and
report_render.py writes the report.
"""
import argparse
import datetime
import signal
import sys
from pathlib import Path

from mpi4py import MPI

from . import ft
from .options import comma_list, format_sizes, integer, parse_algorithm, parse_size
from .report_driver import Driver
from .report_render import render

PARTS = ("random", "late", "ft")
KiB, MiB = 1 << 10, 1 << 20

# Settings not given on the command line come from here; --quick is for tests and smoke runs.
DEFAULTS = {"np": [2, 4], "sizes": [8, 64, KiB, 8 * KiB, 64 * KiB, 256 * KiB, MiB],
            "mif": [1, 32, 128, 512], "iterations": 50, "warmup": 3, "ft_classes": ["S", "W"],
            "ft_repeats": 3}
QUICK = {"np": [2], "sizes": [8, 64 * KiB], "mif": [1, 16], "iterations": 3, "warmup": 1,
         "ft_classes": ["S"], "ft_repeats": 1}


# ---- options -------------------------------------------------------------------------------

def _setting_text(key, value):
    if key == "sizes":
        return format_sizes(value)
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def add_arguments(parser):
    """The ``report`` subcommand's options."""
    d = DEFAULTS
    parser.add_argument("--np", type=comma_list(integer(1)),
                        help=f"process counts (default {_setting_text('np', d['np'])})")
    parser.add_argument("--sizes", type=comma_list(parse_size),
                        help=f"bytes per peer (default {_setting_text('sizes', d['sizes'])})")
    parser.add_argument("--mif", type=comma_list(integer(0)),
                        help=f"maximum imbalance factors; the late-process runs use the largest "
                             f"(default {_setting_text('mif', d['mif'])})")
    parser.add_argument("--algorithms", type=comma_list(parse_algorithm, sort=False),
                        help="algorithms to compare (default: all registered that can run)")
    parser.add_argument("--ft-classes", type=comma_list(_ft_class),
                        help=f"NPB FT classes, of {','.join(ft.CLASSES)} "
                             f"(default {_setting_text('ft_classes', d['ft_classes'])})")
    parser.add_argument("--ft-repeats", type=integer(1),
                        help=f"FT runs per class, N and algorithm, interleaved across the "
                             f"algorithms; the table shows the fastest (default "
                             f"{d['ft_repeats']})")
    parser.add_argument("--iterations", type=integer(1),
                        help=f"timed arrival calls per size, MIF and algorithm "
                             f"(default {d['iterations']})")
    parser.add_argument("--parts", type=comma_list(_part, sort=False), default=list(PARTS),
                        help=f"what to run, of {','.join(PARTS)} (default all)")
    parser.add_argument("--quick", action="store_true",
                        help="tiny settings for tests: " + ", ".join(
                            f"{key} {_setting_text(key, value)}" for key, value in QUICK.items()))
    parser.add_argument("--timeout", type=integer(1), default=1800,
                        help="seconds one launched benchmark may take before it is killed "
                             "(default 1800)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path,
                       help="report folder (default results/report-<date-time>)")
    where.add_argument("--collect", type=Path, metavar="DIR",
                       help="run nothing: render DIR/report.md from the JSON already in DIR")


def _ft_class(text):
    if text not in ft.CLASSES:
        raise argparse.ArgumentTypeError(f"unknown FT class {text!r}; have {', '.join(ft.CLASSES)}")
    return text


def _part(text):
    if text not in PARTS:
        raise argparse.ArgumentTypeError(f"unknown part {text!r}; have {', '.join(PARTS)}")
    return text


def settings(args):
    """The sweep's settings: each option as given, else --quick's value, else the default."""
    base, given = (QUICK if args.quick else DEFAULTS), vars(args)
    return {**{key: base[key] if given.get(key) is None else given[key] for key in base},
            "algorithms": args.algorithms, "parts": args.parts, "timeout": args.timeout}


# ---- the subcommand ------------------------------------------------------------------------

def run(args):
    """Run the sweep (or only collect), then write the report. Exit status: 0, or 1 if any run
    failed, 2 if called wrongly."""
    if MPI.COMM_WORLD.Get_size() > 1:
        if MPI.COMM_WORLD.Get_rank() == 0:
            print("papcoll.bench report: error: run it as a plain process, not under mpiexec; "
                  "it launches the benchmarks itself", file=sys.stderr, flush=True)
        MPI.COMM_WORLD.Barrier()   # a non-zero exit aborts every rank: not before rank 0 said why
        return 2
    if args.collect:
        if not args.collect.is_dir():
            print(f"papcoll.bench report: error: no folder {args.collect}", file=sys.stderr)
            return 2
        print(f"wrote {render(args.collect)}")
        return 0
    folder = args.out or Path("results") / f"report-{datetime.datetime.now():%Y%m%d-%H%M%S}"
    if any(folder.rglob("*.json")):     # the report must show this run's numbers only
        print(f"papcoll.bench report: error: {folder} already holds results; choose a new "
              f"--out, or re-render them with --collect {folder}", file=sys.stderr)
        return 2
    driver = Driver(folder, settings(args))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))  # run the finally:s
    driver.sweep()
    print(f"wrote {render(folder)}")
    return 0 if all(r["status"] == 0 for r in driver.manifest["runs"]) else 1
