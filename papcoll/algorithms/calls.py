"""The engine's calls as Python holds them: :class:`Call` (a struct pc_xcall and the arrays
it points to), and what a call in progress is -- a :class:`Flight`, or :data:`DONE` -- with
what a persistent request keeps between its starts (:class:`Persistent`). The Exchange
(exchange.py) makes and runs them."""
import numpy as np

from mpi4py import MPI

from .. import progress
from ..native import xport
from ..native.lib import counted, counter


class Persistent:
    """What a persistent request keeps between its starts: the epoch of its first (its
    advert records carry it; a counter, which its plan reads too) and the registration the
    records of its per-call path describe (zero-copy, ``where``); its own ``plan``, which
    starts it in C on registrations of its buffers that it owns (plans.persistent); or
    ``mpi``'s MPI persistent request. ``free()`` frees the last two."""

    def __init__(self):
        self.first_counter = counter()
        self.where = self.plan = self.request = None

    epoch = counted("first_counter")

    def first(self, epoch):
        self.epoch = self.epoch or epoch
        return self.epoch

    def start(self, sendbuf, recvbuf):
        """A start by its own plan: what the plan's ``start`` makes of it, or None -- it has
        none, or the plan declined (the buffers are no longer those it registered) and is
        dropped for good: the per-call path serves the request from then on."""
        if self.plan is None:
            return None
        op = self.plan.start(sendbuf, recvbuf, self)
        if op is None:
            self.drop()
        return op

    def drop(self):
        plan, self.plan = self.plan, None
        if plan is not None:
            plan.disarm()
            for region in plan.held:
                region.close()

    def free(self):
        self.drop()
        request, self.request = self.request, None
        if request is not None and not MPI.Is_finalized():
            request.Free()


class Done:
    """A call complete as it started (a plan's, or one process's: a copy)."""

    @staticmethod
    def test():
        return True

    @staticmethod
    def wait(deadline=None):
        pass

    @staticmethod
    def abandon():
        pass


DONE = Done()


class Flight:
    """A call of an Exchange in progress (a nonblocking one between its start and its end):
    ``test()`` moves it on as far as it can without waiting, ``wait()`` finishes it under the
    call's deadline. ``exposed``: the receive buffer it advertised, which a broken call leaves
    pinned (peers may still write into it)."""

    def __init__(self, x, c, what, memory=(), exposed=None, landed=None, plan=None):
        self.x, self.c, self.what, self.exposed = x, c, what, exposed
        self.memory = memory        # what the engine's call points into: alive while it runs
                                    # (an IN_PLACE call's private send copy has no other owner)
        self.step = x.stepper(c, what, landed=landed, plan=plan)
        self.done = False
        self.registered = plan is None         # a plan's call registers nothing

    def test(self):
        """Whether the call is complete; raises its error, or at its deadline the timeout."""
        x = self.x
        self.guard(lambda: self.step(0) or (x.deadline.expired() and self.fail()))
        return self.done

    def fail(self):
        self.x.check(self.c, self.what)       # a peer known not to come: its error first
        raise self.x.error(self.c, self.what)

    def wait(self, deadline=None):
        """Finish the call by its deadline, or by ``deadline`` (a completion that begins late:
        close's, or the next call's for a dropped request)."""
        x = self.x
        if deadline is not None:
            x.deadline = deadline           # the call in progress is this one
        self.guard(lambda: progress.wait(self.step, x.deadline, lambda: x.error(self.c, self.what),
                                         lambda: x.check(self.c, self.what)))

    def abandon(self):
        """The call is left unfinished (its Context closes broken): peers may still write into
        the receive buffer it advertised."""
        if not self.done and self.exposed is not None:
            self.x.transport.pin(self.exposed)

    def guard(self, run):
        if self.done:
            return
        try:
            if run():
                self.done, self.memory = True, ()
                if self.registered:
                    self.x.transport.end_call()
        except BaseException:
            if self.exposed is not None:
                self.x.transport.pin(self.exposed)
            raise


_BYTES = ("via_inbox", "advertise")     # the per-peer fields of one byte (the rest: uint64)


class Call:
    """The engine's call (``s``, an XCall, which holds the arrays it points to) for one call
    shape of an Exchange: ``arrays`` by field name (uint64, n each; also kept here, by name),
    room for ``events`` trace events."""

    def __init__(self, x, scheme, events, records=1, **arrays):
        n, t = x.size, x.transport
        self.unsent, self.waiting = np.zeros(n, np.uint8), np.zeros(n, np.uint8)
        self.record = np.zeros(records * xport.ADVERT_BYTES, np.uint8)
        self.events = np.zeros(2 * events, np.int64)
        fields = {}
        for name, values in arrays.items():
            if values is not None:
                fields[name] = np.ascontiguousarray(values, np.uint8 if name in _BYTES
                                                    else np.uint64)
                setattr(self, name, fields[name])
        self.s = xport.XCall(
            x=t.native, scheme=scheme, inbox=t.inbox if t.inbox.size else None,
            record=self.record, advert_area=t.advert_area, unsent=self.unsent,
            waiting=self.waiting, events=self.events if x.trace.events else None,
            max_events=events, records=x.records_counter, **fields)
