"""Figures of benchmark results, drawn from their JSON form.

matplotlib's object API on a bare Figure renders PNG with the Agg backend: no display, no pyplot
global state, safe under mpiexec.
"""
from matplotlib.figure import Figure

from .arrival import format_size


def arrival_figure(result, path):
    """One subplot per MIF: time in call vs bytes per peer (log-log), one line per algorithm, and
    the unavoidable wait (mean over the algorithms' runs) dashed."""
    rows, sizes, mifs = result["results"], result["sizes"], result["mifs"]
    fig = Figure(figsize=(4.5 * len(mifs) + 0.5, 4.2), layout="constrained")
    axes = fig.subplots(1, len(mifs), sharey=True, squeeze=False)[0]
    for ax, mif in zip(axes, mifs):
        block = [r for r in rows if r["mif"] == mif]
        for name in result["algorithms"]:
            mine = sorted((r["size"], r["avg_us"]) for r in block if r["algorithm"] == name)
            ax.plot(*zip(*mine), marker="o", label=name)
        waits = [sum(r["unavoidable_us"] for r in block if r["size"] == s)
                 / sum(1 for r in block if r["size"] == s) for s in sizes]
        ax.plot(sizes, waits, "k--", label="unavoidable wait")
        ax.set(xscale="log", yscale="log", title=f"MIF {mif}", xlabel="bytes per peer")
        ax.set_xticks(sizes, [format_size(s) for s in sizes])
        ax.minorticks_off()
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_ylabel("time in call (µs, avg over processes)")
    axes[0].legend(fontsize="small")
    late = result["late_fraction"]
    mode = f"{late:.0%} late" if late else "random arrival"
    fig.suptitle(f"papcoll alltoall, {mode}, N={result['nprocs']} ({result['mpi_library'][:40]})")
    fig.savefig(path, dpi=110)
