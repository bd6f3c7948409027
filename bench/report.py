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
"""
import argparse
import datetime
import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from matplotlib.figure import Figure
from mpi4py import MPI

import papcoll

from . import ft, leftovers
from .arrival import comma_list, format_size, integer, parse_algorithm, parse_size, turn_order

ROOT = Path(__file__).resolve().parents[1]
MPIEXEC = ROOT / "scripts" / "mpiexec"          # adds Open MPI's flags when needed
PARTS = ("random", "late", "ft")
LATE_FRACTIONS = (0.25, 0.75)
SCALING_SIZES = 3           # the scalability figure shows the smallest, a middle and the largest
KiB, MiB = 1 << 10, 1 << 20

# Settings not given on the command line come from here; --quick is for tests and smoke runs.
DEFAULTS = {"np": [2, 4], "sizes": [8, 64, KiB, 8 * KiB, 64 * KiB, 256 * KiB, MiB],
            "mif": [1, 32, 128, 512], "iterations": 50, "warmup": 3, "ft_classes": ["S", "W"],
            "ft_repeats": 3}
QUICK = {"np": [2], "sizes": [8, 64 * KiB], "mif": [1, 16], "iterations": 3, "warmup": 1,
         "ft_classes": ["S"], "ft_repeats": 1}

# One sentence per figure or table, for the reader of the report.
EXPLAIN = {
    "random": ("Each process sleeps a random time, uniform in [0, MIF x t_msg] (t_msg: one "
               "message's ping-pong time), then calls alltoall; the plot shows the time inside "
               "the call averaged over processes and iterations, per algorithm, one panel per "
               "MIF, with the unavoidable wait (last arrival minus own arrival) dashed."),
    "late": ("A fraction of the processes (chosen at random every call) arrives MIF x t_msg late "
             "and the others at once; each panel shows time in call vs size per algorithm for "
             "one late fraction."),
    "scaling": ("Time in call of the random-arrival runs against the number of processes, at a "
                "few fixed sizes (columns) and MIFs (rows), per algorithm."),
    "ft": ("NPB FT (numpy, slab decomposition, one alltoall per 3-D FFT) with each algorithm in "
           "its transposes: total time (slowest rank), time in alltoall (mean over ranks), and "
           "speedup = baseline's time / this algorithm's time, as in the paper's Table 1; "
           "with several runs (interleaved across the algorithms) the fastest counts, and the "
           "spread is how much slower the slowest was."),
}
NOISE_NOTE = ("This machine is shared with other jobs and noisy, and with more ranks than cores "
              "every spinning waiter steals time from the others: absolute times vary from run "
              "to run. Compare ratios between algorithms within this one run (the arrival "
              "benchmark interleaves the algorithms on the same delays).")


# ---- options -------------------------------------------------------------------------------

def _sizes_text(sizes):
    return ",".join(map(format_size, sizes))


def _setting_text(key, value):
    if key == "sizes":
        return _sizes_text(value)
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


# ---- launching (the driver) ----------------------------------------------------------------

def bench_command(nprocs, *options):
    """The argv of one papcoll.bench subcommand on ``nprocs`` MPI processes."""
    return [str(MPIEXEC), "-n", str(nprocs), sys.executable, "-m", "mpi4py", "-m", "papcoll.bench",
            *map(str, options)]


def launch(argv, log, timeout):
    """Run ``argv`` in its own process group, output to ``log``; kill the group after ``timeout``
    seconds. Returns (exit status or None if killed, seconds). (Hydra runs each rank in a session
    of its own, but takes the ranks down when mpiexec dies.)"""
    before = leftovers.snapshot()
    start = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            status = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            status = None
        finally:    # timed out, or the driver was interrupted: a new session misses Ctrl-C
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    if status != 0:
        leftovers.remove_new(before)
    return status, time.monotonic() - start


class Driver:
    """Launches the runs one after the other and keeps DIR/manifest.json up to date, so that a
    report can be collected even from an interrupted sweep."""

    def __init__(self, folder, config):
        self.folder, self.runs_dir, self.config = folder, folder / "runs", config
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        self.manifest = {
            "command": shlex.join(["python", "-m", "papcoll.bench", *sys.argv[1:]]),
            "started": now(), "finished": None, "machine": machine(),
            "mpi_library": mpi_library(), "papcoll": papcoll.__version__,
            "settings": config, "runs": []}

    def run(self, label, stem, nprocs, *options):
        """One benchmark run, logged to runs/<stem>.log; prints a line of progress."""
        argv = bench_command(nprocs, *options)
        print(f"{label:<40}", end="", flush=True)
        status, seconds = launch(argv, self.runs_dir / f"{stem}.log", self.config["timeout"])
        outcome = "ok" if status == 0 else "killed (timeout)" if status is None else f"exit {status}"
        print(f"{seconds:8.1f} s  {outcome}", flush=True)
        self.manifest["runs"].append({"label": label, "command": shlex.join(argv),
                                      "log": f"runs/{stem}.log", "seconds": round(seconds, 1),
                                      "status": status, "outcome": outcome})
        self.save()

    def save(self):
        (self.folder / "manifest.json").write_text(json.dumps(self.manifest, indent=1) + "\n")

    def arrival(self, stem, nprocs, mifs, late_fraction=None):
        c = self.config
        options = ["arrival", "--mif", ",".join(map(str, mifs)), "--sizes", _sizes_text(c["sizes"]),
                   "--iterations", c["iterations"], "--warmup", c["warmup"],
                   "--out", self.runs_dir, "--name", stem]
        if c["algorithms"]:
            options += ["--algorithms", ",".join(c["algorithms"])]
        if late_fraction:
            options += ["--late-fraction", late_fraction]
        mode = f"{late_fraction:.0%} late, MIF {mifs[0]}" if late_fraction else "random arrival"
        self.run(f"arrival N={nprocs} {mode}", stem, nprocs, *options)

    def ft_algorithms(self, nprocs):
        """--algorithms, else those the random-arrival run at N found usable, else all."""
        if self.config["algorithms"]:
            return self.config["algorithms"]
        measured = self.runs_dir / f"random-n{nprocs}.json"
        if measured.exists():
            return list(json.loads(measured.read_text())["algorithms"])
        return ordered(papcoll.algorithms)

    def ft(self, cls, nprocs, names):
        """Every repeat of every algorithm, a different one first each round, so that the
        machine's slow spells spread over all of them."""
        for repeat in range(self.config["ft_repeats"]):
            for name in (names[j] for j in turn_order(len(names), repeat)):
                stem = f"ft-{cls}-n{nprocs}-{name}-r{repeat + 1}"
                self.run(f"ft class {cls} N={nprocs} {name} #{repeat + 1}", stem, nprocs, "ft",
                         "--class", cls, "--algorithm", name,
                         "--json", self.runs_dir / f"{stem}.json")

    def sweep(self):
        c = self.config
        if "random" in c["parts"]:
            for n in c["np"]:
                self.arrival(f"random-n{n}", n, c["mif"])
        if "late" in c["parts"]:    # at the largest N and MIF, as the paper's Fig. 4
            for fraction in LATE_FRACTIONS:
                n = max(c["np"])
                self.arrival(f"late{round(fraction * 100)}-n{n}", n, [max(c["mif"])], fraction)
        if "ft" in c["parts"]:
            for cls in c["ft_classes"]:
                for n in filter(ft_runs_on, c["np"]):
                    self.ft(cls, n, self.ft_algorithms(n))
        self.manifest["finished"] = now()
        self.save()


def ft_runs_on(nprocs):
    """FT's slab decomposition needs a power-of-two process count."""
    return nprocs & (nprocs - 1) == 0


def ordered(names):
    """The baselines mpi and direct first, the others in their given order."""
    return sorted(names, key=lambda name: (name != "mpi", name != "direct"))


def now():
    return datetime.datetime.now().isoformat(timespec="seconds")


def machine():
    """What the reader needs to judge the numbers: cores, CPU model, memory, load at the time."""
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines()
                  if line.startswith("model name")), platform.processor() or "unknown")
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1 << 30)
    return {"host": platform.node(), "nproc": os.cpu_count(), "model": model,
            "memory_gib": round(memory, 1), "load_average": [round(x, 2) for x in os.getloadavg()],
            "os": platform.platform()}


def mpi_library():
    return " ".join(MPI.Get_library_version().splitlines()[0].split())


# ---- collecting ----------------------------------------------------------------------------

def collect(folder):
    """Every benchmark result under ``folder``, by what it measured (of two arrival results of
    the same kind and N, the last in file-name order counts):
    {"random": {N: result}, "late": {(N, fraction): result},
    "ft": {(class, N, algorithm): [results of its repeats]}, "unreadable": [paths]}."""
    found = {"random": {}, "late": {}, "ft": {}, "unreadable": []}
    for path in sorted(folder.rglob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):   # e.g. a run killed while writing
            found["unreadable"].append(path.relative_to(folder))
            continue
        if data.get("benchmark") == "papcoll random-arrival":
            key = data["nprocs"] if data["mode"] == "random" else (data["nprocs"],
                                                                   data["late_fraction"])
            found[data["mode"]][key] = data
        elif data.get("benchmark") == "FT":
            found["ft"].setdefault((data["class"], data["nprocs"], data["algorithm"]), []).append(data)
    return found


def read_manifest(folder):
    path = folder / "manifest.json"
    return json.loads(path.read_text()) if path.exists() else None


def colours(found):
    """One colour per algorithm, the same in every figure."""
    names = [name for r in [*found["random"].values(), *found["late"].values()]
             for name in r["algorithms"]]
    return {name: f"C{i % 10}" for i, name in enumerate(ordered(dict.fromkeys(names)))}


# ---- figures (matplotlib's object API on a bare Figure: Agg, no pyplot state) ---------------

def size_panel(ax, result, mif, colour):
    """Time in call vs bytes per peer for every algorithm of ``result`` at ``mif`` (log-log), and
    the unavoidable wait (mean over the algorithms' runs) dashed."""
    rows = [r for r in result["results"] if r["mif"] == mif]
    for name in result["algorithms"]:
        points = sorted((r["size"], r["avg_us"]) for r in rows if r["algorithm"] == name)
        ax.plot(*zip(*points), marker="o", markersize=3, color=colour[name], label=name)
    sizes = sorted({r["size"] for r in rows})
    waits = [mean(r["unavoidable_us"] for r in rows if r["size"] == s) for s in sizes]
    ax.plot(sizes, waits, "k--", label="unavoidable wait")
    ax.set(xscale="log", yscale="log", xlabel="bytes per peer")
    ax.set_xticks(sizes, [format_size(s) for s in sizes])
    ax.minorticks_off()
    ax.grid(True, which="major", alpha=0.3)


def size_figure(panels, title, colour, path):
    """A row of size_panels: ``panels`` is [(panel title, result, mif)]."""
    fig = Figure(figsize=(4.2 * len(panels) + 0.6, 4.2), layout="constrained")
    axes = fig.subplots(1, len(panels), sharey=True, squeeze=False)[0]
    for ax, (label, result, mif) in zip(axes, panels):
        size_panel(ax, result, mif, colour)
        ax.set_title(label)
    axes[0].set_ylabel("time in call (µs, avg over processes)")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside right upper", fontsize="small")
    fig.suptitle(title)
    fig.savefig(path, dpi=110)


def scaling_sizes(sizes):
    """Up to SCALING_SIZES of ``sizes``: the smallest, the middle one, the largest."""
    if len(sizes) <= SCALING_SIZES:
        return sizes
    return [sizes[0], sizes[len(sizes) // 2], sizes[-1]]


def scaling_figure(by_n, colour, path):
    """Time in call vs N: a row per MIF, a column per size, over the random-arrival results."""
    nps = sorted(by_n)
    mifs = sorted(set.intersection(*(set(by_n[n]["mifs"]) for n in nps)))
    sizes = scaling_sizes(sorted(set.intersection(*(set(by_n[n]["sizes"]) for n in nps))))
    fig = Figure(figsize=(3.4 * len(sizes) + 0.6, 2.9 * len(mifs) + 0.6), layout="constrained")
    axes = fig.subplots(len(mifs), len(sizes), sharex=True, squeeze=False)
    for row, mif in zip(axes, mifs):
        for ax, size in zip(row, sizes):
            for name in colour:
                points = [(n, r["avg_us"]) for n in nps for r in by_n[n]["results"]
                          if (r["algorithm"], r["size"], r["mif"]) == (name, size, mif)]
                if points:
                    ax.plot(*zip(*points), marker="o", markersize=3, color=colour[name],
                            label=name)
            ax.set(yscale="log", title=f"{format_size(size)} bytes per peer, MIF {mif}")
            ax.set_xticks(nps, [str(n) for n in nps])
            ax.grid(True, alpha=0.3)
        row[0].set_ylabel("time in call (µs)")
    for ax in axes[-1]:
        ax.set_xlabel("processes N")
    fig.legend(*axes[0][0].get_legend_handles_labels(), loc="outside right upper",
               fontsize="small")
    fig.suptitle("papcoll alltoall scalability, random arrival")
    fig.savefig(path, dpi=110)


def mean(values):
    values = list(values)
    return sum(values) / len(values)


# ---- the Markdown --------------------------------------------------------------------------

def header(manifest, found, folder):
    """Title, what was run when and where, and how to read the numbers."""
    arrivals = [*found["random"].values(), *found["late"].values()]
    lines = ["# papcoll alltoall report", ""]
    if manifest:
        m = manifest["machine"]
        lines += [
            f"- Command: `{manifest['command']}`",
            f"- Date: {manifest['started']} to {manifest['finished'] or '(interrupted)'}",
            f"- MPI library: {manifest['mpi_library']}; papcoll {manifest['papcoll']}",
            (f"- Machine: {m['host']}, {m['nproc']} cores ({m['model']}), {m['memory_gib']} GiB, "
             f"{m['os']}; load average at start {', '.join(map(str, m['load_average']))}"),
        ]
    else:
        library = arrivals[0]["mpi_library"] if arrivals else "not recorded"
        dates = sorted(r["date"] for r in arrivals)
        lines += [(f"- Results found in `{folder}` (no manifest.json: command and machine not "
                   f"recorded){f', measured {dates[0]} to {dates[-1]}' if dates else ''}"),
                  f"- MPI library: {library}"]
    rendered = shlex.join(["python", "-m", "papcoll.bench", *sys.argv[1:]])
    if not manifest or rendered != manifest["command"]:
        lines.append(f"- Rendered {now()} by `{rendered}`")
    return lines + ["", f"> {NOISE_NOTE}", ""]


def algorithms_section(found):
    described, skipped = {}, {}
    for result in [*found["random"].values(), *found["late"].values()]:
        described.update(result["algorithms"])
        skipped.update({f"{name} (N={result['nprocs']})": why
                        for name, why in result["skipped"].items()})
    if not described:
        return []
    lines = ["## Algorithms", "", "| name | what it does |", "| --- | --- |"]
    lines += [f"| `{name}` | {described[name]} |" for name in ordered(described)]
    lines += [f"\nSkipped, cannot run here: {name}: {why}" for name, why in skipped.items()]
    return lines + [""]


def ratio_table(result):
    """Markdown: time in call per (size, MIF) and algorithm, with its ratio to mpi."""
    names = list(result["algorithms"])
    cells = {(r["size"], r["mif"], r["algorithm"]): r for r in result["results"]}
    lines = ["| size | MIF | unavoidable | " + " | ".join(f"`{n}`" for n in names) + " |",
             "| --- " * (len(names) + 3) + "|"]
    for size in result["sizes"]:
        for mif in result["mifs"]:
            rows = [cells[(size, mif, n)] for n in names]
            wait = mean(r["unavoidable_us"] for r in rows)
            lines.append(f"| {format_size(size)} | {mif} | {wait:.0f} | " + " | ".join(
                f"{r['avg_us']:.0f}" + (f" ({r['ratio_vs_mpi']:.2f})" if r["ratio_vs_mpi"] else "")
                for r in rows) + " |")
    return lines


def random_section(found, colour, folder):
    if not found["random"]:
        return []
    lines = ["## Time in call vs message size, random arrival", "", EXPLAIN["random"], ""]
    for n, result in sorted(found["random"].items()):
        png = f"time-vs-size-n{n}.png"
        panels = [(f"MIF {mif}", result, mif) for mif in result["mifs"]]
        size_figure(panels, f"N={n}, random arrival", colour, folder / png)
        lines += [f"### N = {n} ({result['iterations']} iterations, {result['date']})", "",
                  f"![time vs size, N={n}]({png})", "",
                  "Time in call (µs) and, in brackets, its ratio to `mpi`:", "",
                  *ratio_table(result), ""]
    return lines


def late_section(found, colour, folder):
    if not found["late"]:
        return []
    lines = ["## Late processes: 25 % and 75 % late", "", EXPLAIN["late"], ""]
    for n in sorted({n for n, _ in found["late"]}):
        results = [r for (m, _), r in sorted(found["late"].items()) if m == n]
        png = f"late-n{n}.png"
        panels = [(f"{r['late_processes']} of {n} late ({r['late_fraction']:.0%}), MIF {mif}", r,
                   mif) for r in results for mif in r["mifs"]]
        size_figure(panels, f"N={n}, late processes", colour, folder / png)
        lines += [f"![late processes, N={n}]({png})", ""]
        for r in results:
            lines += [f"{r['late_fraction']:.0%} late, time in call (µs) and ratio to `mpi`:", "",
                      *ratio_table(r), ""]
    return lines


def scaling_section(found, colour, folder):
    if len(found["random"]) < 2:
        return []
    scaling_figure(found["random"], colour, folder / "scaling.png")
    return ["## Scalability over N", "",
            EXPLAIN["scaling"], "",
            "![scalability](scaling.png)", ""]


def speedup(base, value):
    return f"{base / value:.2f}" if base and value else "–"


def ft_table(repeats):
    """Markdown rows for one class from {(N, algorithm): [results]}: the fastest repeat of each,
    speedups against the fastest repeat of the baselines at the same N."""
    best = {key: min(runs, key=lambda r: r["time"]) for key, runs in repeats.items()}
    lines = [("| N | algorithm | verified | block | runs (spread) | total (s) | alltoall (s) | "
              "in alltoall | total speedup vs mpi | vs direct | alltoall speedup vs mpi | "
              "vs direct |"),
             "| --- " * 12 + "|"]
    names = ordered(dict.fromkeys(name for _, name in best))
    for n, name in sorted(best, key=lambda key: (key[0], names.index(key[1]))):
        r, base = best[(n, name)], {b: best.get((n, b)) for b in ("mpi", "direct")}
        total = [speedup(base[b] and base[b]["time"], r["time"]) for b in base]
        a2a = [speedup(base[b] and base[b]["alltoall_time_mean"], r["alltoall_time_mean"])
               for b in base]
        runs = repeats[(n, name)]
        spread = max(x["time"] for x in runs) / r["time"] - 1
        verified = "yes" if all(x["verified"] for x in runs) else "**no**"
        lines.append(f"| {n} | `{name}` | {verified} | {format_size(r['block_bytes'])} | "
                     f"{len(runs)} ({spread:.0%}) | {r['time']:.3g} | "
                     f"{r['alltoall_time_mean']:.3g} | {r['alltoall_fraction']:.0%} | "
                     f"{' | '.join(total)} | {' | '.join(a2a)} |")
    return lines


def ft_section(found):
    if not found["ft"]:
        return []
    lines = ["## NAS FT", "", EXPLAIN["ft"], ""]
    for cls in [c for c in ft.CLASSES if any(k[0] == c for k in found["ft"])]:
        repeats = {(n, name): runs for (c, n, name), runs in found["ft"].items() if c == cls}
        r = next(iter(repeats.values()))[0]
        lines += [(f"### Class {cls} ({r['nx']}x{r['ny']}x{r['nz']}, {r['niter']} iterations, "
                   f"{r['alltoall_calls']} alltoalls)"), "", *ft_table(repeats), ""]
    return lines


def runs_section(manifest, found):
    lines = []
    if manifest and manifest["runs"]:
        lines += ["## Runs", "", "| run | seconds | outcome | log |", "| --- | --- | --- | --- |"]
        lines += [f"| {r['label']} | {r['seconds']} | "
                  f"{r['outcome'] if r['status'] == 0 else '**' + r['outcome'] + '**'} | "
                  f"[log]({r['log']}) |" for r in manifest["runs"]]
        lines += ["", "Commands, in order:", "", "```",
                  *(r["command"] for r in manifest["runs"]), "```", ""]
    if found["unreadable"]:
        lines += ["Unreadable result files (skipped): "
                  + ", ".join(f"`{p}`" for p in found["unreadable"]), ""]
    return lines


def render(folder):
    """Write folder/report.md and its figures from the JSON under ``folder``; return the path."""
    found, manifest = collect(folder), read_manifest(folder)
    colour = colours(found)
    lines = [*header(manifest, found, folder), *algorithms_section(found),
             *random_section(found, colour, folder), *late_section(found, colour, folder),
             *scaling_section(found, colour, folder), *ft_section(found),
             *runs_section(manifest, found)]
    if not any(found[kind] for kind in ("random", "late", "ft")):
        lines += [f"No benchmark results found under `{folder}`.", ""]
    path = folder / "report.md"
    path.write_text("\n".join(lines))
    return path


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
