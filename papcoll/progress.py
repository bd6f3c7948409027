"""The one bounded wait: what every papcoll wait shares, in one place.

Waits poll (papcoll learns of arrivals from the data path, not from messages), so they back off:
a few quick polls, then yields, then short sleeps, because on an oversubscribed node a spinning
waiter steals the core from the very peer it waits for. In C every wait is ``pc_wait``
(native/papcoll_native.c: a deadline and a poll). In Python every wait of a call, a request
and a set-up meeting is :func:`wait` (``papcoll.waitall`` alone loops over its requests'
``Test`` with a back-off, and has no deadline of its own): a
:class:`Deadline`, steps of at most the native ``SLICE`` so that Ctrl-C gets through between
two, a check between steps that those awaited are still coming, and the error -- every wait
ends by the deadline with a :class:`PapcollTimeoutError` that names the ranks still missing
(rendezvous.timed_out). Waits polled from Python (the set-up meetings) back off with
:class:`Backoff`.
"""
import time

from .native.lib import SLICE

_SPINS = 64           # polls before the first yield: the common case when peers are near
_YIELDS = 256         # yields before sleeping
_MAX_SLEEP = 100e-6   # seconds; bounds the latency added when a peer finally shows up
CHECK_EVERY = 1e-3    # seconds between a wait's checks that awaited peers are still coming


def idle_barrier(comm, poll=2e-4):
    """A barrier waited in asleep, for the measuring tools (the model's calibration, the
    benchmarks): ranks with nothing to do must not take the cores the measuring ranks need
    (there may be more ranks than cores). MPI's own wait: not bounded, as the tools' MPI calls
    are not."""
    request = comm.Ibarrier()
    while not request.Test():
        time.sleep(poll)


class Deadline:
    """A point in time, ``timeout`` seconds from now."""

    def __init__(self, timeout):
        self.timeout = timeout
        self.end = time.monotonic() + timeout

    def expired(self):
        return time.monotonic() >= self.end

    def left(self):
        """Seconds to the deadline (0 once passed)."""
        return max(self.end - time.monotonic(), 0.0)

    def slice(self):
        """Seconds for the next native wait: what is left, at most SLICE."""
        return min(self.left(), SLICE)


class Backoff:
    def __init__(self):
        self.reset()

    def reset(self):
        self.idle = 0

    def pause(self):
        self.idle += 1
        if self.idle <= _SPINS:
            return
        if self.idle <= _SPINS + _YIELDS:
            time.sleep(0)
        else:
            time.sleep(min(_MAX_SLEEP, 1e-6 * (self.idle - _SPINS - _YIELDS)))


IDLE, DONE, MORE = 0, 1, 2   # what a poll found, as native pc_wait's polls say it


def wait(step, deadline, error, check=None):
    """The one bounded wait of papcoll's Python: every wait of a call or a set-up runs here. ``step(seconds)`` waits
    at most that long -- a native wait, or a poll from Python (:func:`polled`) -- and returns
    whether the wait is over. It runs in slices (so that Ctrl-C gets through) until done;
    after each step in vain ``check()``, if given, looks whether those awaited are still coming
    (it raises for one that is not: rendezvous.elsewhere), and at the deadline the wait raises
    ``error()`` (rendezvous.timed_out names whom to blame) -- or, ``error`` None, returns
    False."""
    while not step(deadline.slice()):
        if deadline.expired():
            if error is None:
                return False
            raise error()
        if check is not None:
            check()
    return True


def polled(poll):
    """A step for :func:`wait` made of a poll in Python: ``poll()`` returns DONE, MORE (it
    progressed: poll again at once) or IDLE; after a poll in vain the step backs off."""
    backoff = Backoff()

    def step(seconds):
        got = poll()
        if got == IDLE:
            backoff.pause()
        elif got == MORE:
            backoff.reset()
        return got == DONE
    return step
