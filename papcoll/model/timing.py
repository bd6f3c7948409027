"""The one statistic ``model calibrate`` takes of repeated timings: the usual time.

The model predicts a call's mean time, as the arrival benchmark reports it, so each parameter
is what its operation usually costs, not its least. The least was taken first, as "the
machine's cost, not its noise", and predicted every cell of this machine too low, by as
much as half: the calls the benchmark averages pay a machine's usual cost, cache misses and
the scheduler's hand-overs included (docs/model.md, the seventh look). The quickest 95 %
leave out another program's rare preemptions, which a handful of repetitions would
otherwise let decide a mean."""
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
