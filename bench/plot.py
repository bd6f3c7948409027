"""Figures of benchmark results, drawn from their JSON form: the arrival benchmark's and the
report's.

matplotlib's object API on a bare Figure renders PNG with the Agg backend: no display, no pyplot
global state, safe under mpiexec.
"""
from matplotlib.figure import Figure

from .options import format_size

SCALING_SIZES = 3           # the scalability figure shows the smallest, a middle and the largest


def arrival_figure(result, path):
    """Two rows of one subplot per MIF, one line per algorithm: above, time in call vs bytes
    per peer (log-log) with the unavoidable wait (mean over the algorithms' runs) dashed;
    below, the excess over that wait (linear), where the algorithms differ even at high MIF,
    when the wait is most of the time."""
    rows, sizes, mifs = result["results"], result["sizes"], result["mifs"]
    fig = Figure(figsize=(4.5 * len(mifs) + 0.5, 7.6), layout="constrained")
    axes = fig.subplots(2, len(mifs), sharex=True, squeeze=False)
    for top, low, mif in zip(axes[0], axes[1], mifs):
        block = [r for r in rows if r["mif"] == mif]
        for name in result["algorithms"]:
            mine = sorted((r["size"], r["avg_us"], r["excess_us"]) for r in block
                          if r["algorithm"] == name)
            size, avg, excess = zip(*mine)
            top.plot(size, avg, marker="o", label=name)
            low.plot(size, excess, marker="o", label=name)
        waits = [sum(r["unavoidable_us"] for r in block if r["size"] == s)
                 / sum(1 for r in block if r["size"] == s) for s in sizes]
        top.plot(sizes, waits, "k--", label="unavoidable wait")
        top.set(xscale="log", yscale="log", title=f"MIF {mif}")
        low.set(xscale="log", xlabel="bytes per peer")
        low.axhline(0, color="k", linewidth=0.5)
        for ax in (top, low):
            ax.set_xticks(sizes, [format_size(s) for s in sizes])
            ax.minorticks_off()
            ax.grid(True, which="major", alpha=0.3)
    axes[0][0].set_ylabel("time in call (µs, avg over processes)")
    axes[1][0].set_ylabel("excess over the unavoidable wait (µs)")
    axes[0][0].legend(fontsize="small")
    late = result["late_fraction"]
    mode = f"{late:.0%} late" if late else "random arrival"
    fig.suptitle(f"papcoll alltoall, {mode}, N={result['nprocs']} ({result['mpi_library'][:40]})")
    fig.savefig(path, dpi=110)


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
