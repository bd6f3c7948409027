"""The one statistic ``model calibrate`` takes of repeated timings: the usual time.

The model predicts a call's mean time, as the arrival benchmark reports it, so each parameter
is what its step usually costs, not its least. The least, taken first as "the machine's cost,
not its noise", predicted every cell of a 2-core machine too low, by up to half, and N = 2
with free cores too (docs/model.md, Validation: "The usual time, not the least"). The
quickest 95 % leave out another program's rare preemptions, which a mean of a few dozen
repetitions would otherwise let decide.
"""
import time

QUICK = 0.95


def usual(times):
    """The mean of the quickest 95 % of ``times``."""
    quick = sorted(times)[:max(1, int(QUICK * len(times)))]
    return sum(quick) / len(quick)


def timed(fn, reps=50, budget=0.3):
    """The usual of ``reps`` timings of ``fn`` (within ``budget`` seconds, at least 3)."""
    times, stop = [], time.perf_counter() + budget
    for i in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
        if i >= 2 and time.perf_counter() > stop:
            break
    return usual(times)
