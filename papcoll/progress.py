"""The one bounded wait: what every papcoll wait shares, in one place.

Waits poll (papcoll learns of arrivals from the data path, not from messages), so they back off:
a few quick polls, then yields, then short sleeps, because on an oversubscribed node a spinning
waiter steals the core from the very peer it waits for. The native core spins and backs off
itself (native/papcoll_native.c); Python owns the rest: the :class:`Deadline`, the native ``SLICE``
that bounds any one native wait so that Ctrl-C gets through between two, and the error --
every wait ends by the deadline with a :class:`PapcollTimeoutError` that names the ranks still
missing. Waits polled from Python (the set-up meetings) back off with :class:`Backoff`.
"""
import time

from .native.lib import SLICE

_SPINS = 64           # polls before the first yield: the common case when peers are near
_YIELDS = 256         # yields before sleeping
_MAX_SLEEP = 100e-6   # seconds; bounds the latency added when a peer finally shows up
CHECK_EVERY = 1e-3    # seconds between a wait's checks that awaited peers are still coming


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


def wait(step, deadline, error, between=None):
    """The bounded wait over a native step: ``step(seconds)`` waits at most that long and
    returns whether it is done. It runs in slices (so that Ctrl-C gets through) until done;
    ``between()``, if given, runs after every slice in vain (it may raise: a peer that will not
    come); at the deadline ``error()`` is raised."""
    while not step(deadline.slice()):
        if deadline.expired():
            raise error()
        if between is not None:
            between()
