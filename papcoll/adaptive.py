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

**The agreement.** At the end of each window of K calls of a site, its ranks start one
reduction (MAX) of the window's times on papcoll's private communicator -- the site's
persistent MPI_Allreduce_init, made in its first call --, and finish it at the
end of the next window, where it has long completed in the calls between (MPI progresses it
in theirs): so no call waits for it. The wait there is bounded by PAPCOLL_TIMEOUT and names a
rank that does not come, as every bounded wait does. Every rank then holds the same numbers --
a maximum is exact -- and computes the same skew, and the policy, which reads nothing else
that differs, gives every rank the same algorithm from the same call on: the window after
next. Until the first agreement the site runs what a plain ``auto`` runs. Tried first and
dropped, on N=4 over 2 cores: a point-to-point meeting (rendezvous.exchange), 4 ms; the
reduction waited for at once, 70 us in the median but up to milliseconds where a rank is off
its core.

**Where no skew changes the choice** -- no policy row that serves the site has a band, as
in the shipped table, which names none: bands come from ``bench tune`` or the user's
tuning file -- the site runs what plain ``auto`` runs, untimed and never agreed on: it costs
nothing more than plain ``auto``.

**Where it runs.** A call whose plain receive buffer's length names a site (``by_length``)
is served and timed by the Entry in C (Entry.timed), which notes its seconds in the site's
window (a ``_native.Window``, papcoll_window.c's), and ends the window in C as the call that
fills it returns: Python sees the site's calls only where a window's last reduction is still
in flight at its end, to wait for it. Any other call -- a buffer spec, a site's first call,
one no plan takes -- is found, served and timed here, as the same measure (a site that mixes
buffer specs and plain buffers reads its skew low: docs/adaptive.md). The window's end is C's
too (native/papcoll_agree.c: the medians, the reduction's test and start, the arrays, and
the choice, looked up in the steps the policy worked out for the site), but for that wait,
bounded, here. What it costs, docs/adaptive.md gives as
measured, and why it is off by default.
"""
import os

import numpy as np
from mpi4py import MPI

from . import _native, progress, rendezvous
from .algorithms import policy
from .buffers import parse_alltoall
from .errors import ConfigError
from .progress import Deadline


def window(longest, shortest):
    """A window's (median spread, median shortest) in seconds, from each of its calls' longest
    and shortest time over the ranks (by call); a call's spread is its longest less its
    shortest. In C (native/papcoll_agree.c), where a site's window ends."""
    return _native.window(np.asarray(longest, float), np.asarray(shortest, float))


class Site:
    __slots__ = ("block", "key", "skew", "bounds", "keys", "banded", "window", "send", "out",
                 "reduce", "base", "pending")

    def __init__(self, block, unagreed, steps, banded=True):
        self.block, self.skew = block, None
        self.key = ("a", unagreed)       # the named call's, until a skew is agreed
        # the choice by skew (policy.by_skew's steps): keys[i] from bounds[i] up, looked up in C
        self.bounds = tuple(float(edge) for edge, _ in steps)
        self.keys = tuple(("a", name) for _, name in steps)
        self.banded = banded       # False: no skew changes its choice, so it is never timed
        self.window = None         # a Window of the calls' seconds (Sites.open, if banded)
        self.send = self.out = None     # the reduction's: the times and their negatives; result
        self.reduce = None         # the persistent reduction of send into out
        self.base = float("inf")   # the quickest window's median shortest so far
        self.pending = None        # ``reduce`` while in flight, until learnt from

    @property
    def name(self):
        return self.key[1]


class Sites:
    """The adaptive call sites of one Context, every ``every`` calls agreed."""

    def __init__(self, every):
        try:      # the same library on every rank: the same error (Open MPI 5 says MPI 3.1
            one = np.zeros(1)     # but has it: ask for the call, not the version)
            MPI.COMM_SELF.Allreduce_init(one, one.copy(), MPI.MAX).Free()
        except (NotImplementedError, MPI.Exception) as e:
            raise ConfigError(f"PAPCOLL_ADAPT={every}: the adaptive auto agrees by a persistent "
                              f"reduction (MPI_Allreduce_init, MPI 4.0), which this MPI does "
                              f"not have ({e})") from None
        self.every, self.sites = every, {}
        self.by_length = {}    # a plain receive buffer's length in bytes -> its site: the
                               # Entry serves and times those calls in C (Entry.timed); or, for
                               # a site no skew changes, its key: served untimed, as plain auto

    def site(self, ctx, sendbuf, recvbuf):
        """The site of this call: its block, which a plain buffer gives by its length (30 us
        less than parsing it), a buffer spec by its parse (a bad one raises here)."""
        try:
            length = memoryview(recvbuf).nbytes
            block, rest = divmod(length, ctx.size)
        except TypeError:
            rest = 1
        if rest:               # a buffer spec, or not a whole block a peer (its error)
            block = parse_alltoall(sendbuf, recvbuf, ctx.size)[1].block
        site = self.sites.get(block)
        if site is None:
            site = self.sites[block] = Site(block, *policy.by_skew(ctx, block))
            if site.banded:
                self.open(ctx, site)
        if not rest:
            self.by_length[length] = site if site.banded else site.key
        return site

    def open(self, ctx, site):
        """A banded site's window: its arrays and its persistent reduction, made in its first
        call, which every rank makes in the same order (the reduction's making is a
        collective's)."""
        k = self.every
        site.window, site.send, site.out = _native.Window(k), np.empty(2 * k), np.empty(2 * k)
        site.reduce = ctx.comm.Allreduce_init(site.send, site.out, MPI.MAX)

    def timed(self, site, seconds):
        """Note a call of ``site`` that took ``seconds``; True at the end of its window (never
        for a site no skew changes)."""
        return site.banded and site.window.note(seconds)   # (a site's first is not timed)

    def agree(self, ctx, site):
        """The end of ``site``'s window (_native.window_end): learn from the last window's
        reduction and choose by it, then start this one's. Where that reduction is still in
        flight, wait for it first, bounded."""
        if not _native.window_end(site):
            _settle(ctx, site, f"adaptive auto: the skew of {site.block}-byte calls")
            _native.window_end(site)

    def close(self, ctx):
        """Finish the reductions still open (every rank has the same ones open), bounded, and
        free them."""
        for site in self.sites.values():
            if site.pending is not None:
                _settle(ctx, site, f"adaptive auto: closing the {site.block}-byte calls")
                site.pending = None
            if site.reduce is not None:
                site.reduce.Free()
                site.reduce = None


def _settle(ctx, site, what):
    """Wait for ``site``'s reduction in flight (a reduction of every rank's) under
    PAPCOLL_TIMEOUT without sleeping -- a sleeping rank would hold up every other --, as every
    bounded wait gives up: a rank that gave up ends it at once, and at the deadline the ranks
    that gave no sign are named (rendezvous.timed_out)."""
    request = site.pending
    if request.Test():             # the usual case: MPI progressed it in the window's calls
        return
    comm, others = ctx.comm, [q for q in range(ctx.size) if q != ctx.rank]
    polls = 0

    def step(_):
        nonlocal polls
        if request.Test():
            return True
        polls += 1
        if polls % 64 == 0:          # now and then: has a peer given up on this call?
            rendezvous.elsewhere(comm, others, lambda q: q, what, lambda q: True)
        os.sched_yield()
        return False
    try:
        progress.wait(step, Deadline(ctx.timeout),
                      lambda: rendezvous.timed_out(comm, what, others, ctx.timeout))
    except BaseException:
        rendezvous.keep([request, site.send, site.out])   # alive while MPI may write them
        raise
