"""The adaptive ``auto`` (``PAPCOLL_ADAPT=K``): the policy chooses by the arrival pattern its
call site sees, not by size and shape alone.

**The call site** is a Communicator and a call shape: here an ``Alltoall`` of ``auto`` and its
block size, which is all the policy reads of a call. Each site runs the algorithm the policy
gives for its block and its skew, by name, so each algorithm keeps its own plans (callcache.py)
and a switch between two costs nothing once both have run.

**The measure** is each rank's own time in the site's calls, entry to exit. No alltoall ends
on any rank before the last rank has arrived, and all end within about one message of each
other, so a call's spread of times in it (the longest less the shortest) is the spread of the
arrivals, and its shortest is the call's own time after the last arrival. Every algorithm shows
it -- MPI's own too, which reveals no arrival order --, and it needs no clock shared between
ranks. The site's **skew** is the median spread of its last K calls over the site's own call
time: the median shortest of its quickest window so far. Dimensionless, in units of the call's
own time. Not the window's own shortest: where processes outnumber cores, the last to arrive
shares its core with those that wait, and its call stretches with the skew it should measure
(docs/adaptive.md).

**The agreement.** Every K calls of a site, its ranks exchange their K times in one bounded
meeting (rendezvous.exchange: point to point on papcoll's private communicator, PAPCOLL_TIMEOUT
bounds it, and a rank that does not come is named). Every rank then computes the skew from the
same numbers in the same order, so every rank gets the same skew and the policy, which reads
nothing else that differs, gives every rank the same algorithm for the next K calls. Until the
first agreement the site runs what a plain ``auto`` runs. The cost: a meeting of 2 (N - 1)
small messages per rank every K calls, and on every call the buffers' parse (for the block)
and two clock readings; docs/adaptive.md gives it as measured, and why it is off by default.
"""
import time

from .algorithms import policy
from .buffers import parse_alltoall
from .progress import Deadline
from . import rendezvous


def window(times):
    """A window's (median spread, median shortest) in seconds: ``times`` is every rank's list
    of seconds in the same K calls (a list of lists, by rank); a call's spread is its longest
    less its shortest."""
    calls = list(zip(*times))
    middle = len(calls) // 2
    return (sorted(max(c) - min(c) for c in calls)[middle],
            sorted(min(c) for c in calls)[middle])


class Site:
    __slots__ = ("block", "name", "skew", "times", "base")

    def __init__(self, block, name):
        self.block, self.name, self.skew = block, name, None
        self.base = float("inf")   # the quickest window's median shortest so far
        self.times = None          # a site's first call builds its plan: not timed


class Sites:
    """The adaptive call sites of one Context, every ``every`` calls agreed."""

    def __init__(self, every):
        self.every, self.sites = every, {}

    def site(self, ctx, sendbuf, recvbuf):
        """The site of this call (its buffers parsed: a bad one raises here, as any call's)."""
        block = parse_alltoall(sendbuf, recvbuf, ctx.size)[1].block
        site = self.sites.get(block)
        if site is None:
            site = self.sites[block] = Site(block, policy.choose(ctx, block))
        return site

    def timed(self, site, call):
        """Run ``call()`` for ``site``; True when its window is full (time to agree)."""
        if site.times is None:
            call()
            site.times = []
            return False
        start = time.perf_counter()
        call()
        site.times.append(time.perf_counter() - start)
        return len(site.times) >= self.every

    def agree(self, ctx, site):
        """The window's meeting (see the module's docstring); the site's next algorithm."""
        mine, site.times = site.times, []
        met = rendezvous.exchange(ctx.comm, f"adaptive auto: the skew of {site.block}-byte "
                                  "calls", mine, Deadline(ctx.timeout))
        spread, base = window([met[q] for q in sorted(met)])
        site.base = min(site.base, base)
        site.skew = spread / site.base if site.base > 0 else 0.0
        site.name = policy.choose(ctx, site.block, skew=site.skew)
