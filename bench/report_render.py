"""The report's Markdown and its figures (drawn by plot.py), from the results' JSON alone and
DIR/manifest.json when the driver left one: what ``report`` writes after a sweep, and all that
``--collect`` does."""
import json
import shlex
import sys

from . import ft
from .options import format_size
from .plot import mean, scaling_figure, size_figure
from .report_driver import now, ordered

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
