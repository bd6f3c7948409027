"""Figures of benchmark results, drawn from their JSON form.

matplotlib's object API on a bare Figure renders PNG with the Agg backend: no display, no pyplot
global state, safe under mpiexec.
"""
from matplotlib.figure import Figure

from .arrival import format_size


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
