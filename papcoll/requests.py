"""Nonblocking and persistent alltoalls: :class:`Request`, with mpi4py's request verbs.

``Communicator.Ialltoall`` (and ``Ialltoallv``, ``Ialltoallw``) starts a call and returns an
active Request; ``Alltoall_init`` (and ``v``, ``w``) checks the buffers, chooses the algorithm
and sets it up once -- collective and bounded, like any set-up -- and returns an inactive
persistent Request, which each ``Start`` runs again on the same buffers (their contents may
change between starts). A Request progresses when its ``Test`` or ``Wait`` runs; what moves
without them depends on the algorithm (README "Nonblocking and persistent calls"). A request
of a shape the Communicator holds a call object for (callcache.py) skips the checks, the
choice and the set-up: it starts by that plan, in C (:func:`make`).

One operation at a time per Communicator: its one-sided algorithms count their calls, so a
second call -- blocking, nonblocking or a Start -- while a Request of the same Communicator is
active and still held raises CommunicatorStateError, before anything moves. Misuse is refused
with a BufferSpecError naming it: a Start of an active Request, any use after ``Free``. A
Request holds its buffers (buffer exports: Python refuses to resize or release them meanwhile)
until ``Free``, or, nonblocking, until complete, or until its Communicator closes. Requests are
papcoll's, not MPI's: MPI's ``Waitall`` cannot take them, and papcoll's :func:`waitall` takes
both kinds.

**Dropped requests, and close.** A Request is the user's handle on a :class:`Call`, which its
Context holds until it is freed (``ctx.requests``) and, while it runs, as ``ctx.active``: the
peers in the same collective need this rank's data and may still write into its receive
buffer, so a call must not end with its handle. A handle dropped without Wait or Free (garbage
collected) only hands its Call to ``ctx.dropped``: its finalizer appends to a list and calls
no MPI, because a finalizer runs wherever the last reference goes -- inside another MPI call,
on another thread, with a lock held -- where a wait for peers or a free could deadlock. The
Communicator's next call (blocking, nonblocking, a Start), under its lock, first completes a
dropped Call still active, bounded by PAPCOLL_TIMEOUT from then, and frees the dropped Calls.
That is sound because calls are collective and made in the same order everywhere: every rank
reaches its next call after this one, so a peer that dropped it too completes it at the same
point, and one that holds it completes it in its own Wait or Test -- nobody waits in a later
call for data this rank owes. A Request still held and active keeps the next call out
(CommunicatorStateError: complete it first). ``close`` (context.py) completes the active Call,
held or dropped, the same way before its meeting, then frees every Call (a persistent one: its
buffers, mpi's MPI request); a call that cannot complete in time raises its error, naming the
ranks it waited for, and the Communicator closes all the same (what is local released, the
peers told it gave up). A Start, Test or Wait of a closed Communicator's Request raises
CommunicatorStateError; Free is accepted (nothing is left to free).
"""
import gc
import weakref
from typing import NamedTuple

from mpi4py import MPI

from . import config
from .algorithms import AUTO, policy
from .algorithms.calls import DONE, Persistent
from .buffers import parse_alltoall
from .callcache import requests_site
from .errors import AlgorithmError, BufferSpecError, CommunicatorStateError
from .vbuffers import copy_own, parse_alltoallv
from .progress import Backoff, Deadline


class Request:
    """The user's handle on a nonblocking or persistent :class:`Call`: mpi4py's verbs."""

    def __init__(self, call):
        self._call, self._freed = call, False
        call.handle = weakref.finalize(self, call.ctx.drop_request, call)   # no MPI: above

    def Start(self):
        call = self._usable("Start")
        if not call.persistent:
            raise BufferSpecError("Start: this request is nonblocking, not persistent "
                                  "(make one with Alltoall_init)")
        if call.op is not None:
            raise BufferSpecError("Start: this persistent request is active; Wait (or Test "
                                  "until it is complete) before starting it again")
        call.begin()

    def Test(self):
        """Move the call on; whether it is complete (an inactive request: True)."""
        call = self._usable("Test")
        return call.op is None or call.run(lambda op: op.test())

    def Wait(self):
        """Complete the call (bounded by PAPCOLL_TIMEOUT from its start; ``mpi``'s: MPI's)."""
        call = self._usable("Wait")
        if call.op is not None:
            call.run(lambda op: op.wait() or True)

    def Free(self):
        """Release the request and its buffers; an active one must be completed first (a
        closed Communicator's: nothing is left to free)."""
        if self._freed:
            raise BufferSpecError("Free: this request was freed")
        if self._call.op is not None:
            raise BufferSpecError("Free: this request is active; Wait for it first")
        self._freed = True
        self._call.release()

    @staticmethod
    def Startall(requests):
        for request in requests:
            request.Start()

    @staticmethod
    def Waitall(requests):
        waitall(requests)

    @staticmethod
    def Testall(requests):
        return all([request.Test() for request in requests])

    @property
    def active(self):
        return self._call.op is not None

    def _usable(self, verb):
        if self._freed:
            raise BufferSpecError(f"{verb}: this request was freed")
        if self._call.ctx.closed:
            raise CommunicatorStateError(
                f"{verb}: this request's papcoll.Communicator is closed, and its requests with "
                f"it (close completes a call still active, then frees them)")
        return self._call


class Call:
    """A nonblocking (active from the start, done once complete) or persistent (started by
    ``begin``) alltoall of the Context ``ctx``. ``start()`` starts the call: it returns what
    the algorithm started, its ``op`` (``test()``, ``wait(deadline)``, ``abandon()``).
    ``plan``: the call object it holds, pinned in the CallCache until released; ``kept``:
    what a persistent call keeps between starts (calls.Persistent: mpi's MPI request)."""

    def __init__(self, ctx, start, name, persistent, hold=(), plan=None, kept=None):
        self.ctx, self._start, self.name, self.persistent = ctx, start, name, persistent
        self._hold = list(hold)         # the buffers, held while the call may use them
        self._plan, self._kept = plan, kept
        self.op = self.handle = None
        ctx.requests.add(self)

    def begin(self):
        """A Start: the call starts, the Context's lock taken."""
        ctx = self.ctx
        if not ctx.lock.acquire(blocking=False):
            raise CommunicatorStateError("this papcoll.Communicator is in use by another thread")
        try:
            if ctx.broken is not None:
                raise CommunicatorStateError("this request's papcoll.Communicator is unusable "
                                             "after an earlier error")
            idle(ctx)
            ctx.cache.ready(ctx)      # a plan that may name a freed datatype: disarmed
            self.launch()
        finally:
            ctx.lock.release()

    def launch(self):
        """Start the call (the lock held, the Context idle)."""
        ctx = self.ctx
        ctx.entry.calls += 1
        ctx.chosen = self.name
        try:
            op = self._start()
        except BaseException as err:
            ctx.fail(err)
            raise
        self.op, ctx.active = op, self      # active until a Wait or Test sees it done

    def run(self, step):
        """``step(op)`` (a Test's, a Wait's) under the lock: whether the call is complete."""
        if self.op is DONE:                 # nothing left to move: no lock to take
            self.ended()
            return True
        with self.ctx.lock:
            return self.settle(step)

    def finish(self, deadline):
        """Complete the call by ``deadline`` (the lock held): close's, or the next call's when
        the Request was dropped."""
        self.settle(lambda op: op.wait(deadline) or True)

    def settle(self, step):
        """``step(op)``, the lock held: the call ends once it says complete; an error breaks
        the Context (its peers are in an unknown state) and releases the call."""
        try:
            done = step(self.op)
        except BaseException as err:
            self.ended(failed=True)
            self.ctx.fail(err)
            raise
        if done:
            self.ended()
        return done

    def ended(self, failed=False):
        """The call is over; a persistent one stays set up for its next Start while held."""
        self.op = self.ctx.active = None
        if failed or not self.persistent or not self.handle.alive:   # alive: not dropped
            self.release()

    def release(self):
        """Drop every reference to the user's buffers (the parsed ones are in ``_start``) and
        what a persistent call kept; the Context forgets it. Safe twice. A call still active
        here is one its Context abandons (closing broken): the op keeps what peers may still
        write into."""
        if self.op is not None:
            self.op.abandon()
            self.op = self.ctx.active = None
        self._hold.clear()
        self._start = None
        plan, kept, self._plan, self._kept = self._plan, self._kept, None, None
        if plan is not None:
            self.ctx.cache.unpin(plan)
        if kept is not None:
            kept.free()
        self.handle.detach()
        self.ctx.requests.discard(self)


def idle(ctx):
    """Make way for a new call of ``ctx`` (its lock held): the Calls whose Request was dropped
    are freed, one still active completed first (bounded by PAPCOLL_TIMEOUT from now); a
    Request still held and active raises CommunicatorStateError."""
    if ctx.active is not None and not ctx.dropped:
        gc.collect()             # a Request unreachable only through a reference cycle
    while ctx.dropped:
        call = ctx.dropped.pop()
        if call is ctx.active:
            call.finish(Deadline(ctx.timeout))
        call.release()
    if ctx.active is not None:
        raise CommunicatorStateError(busy())


def busy():
    return ("a nonblocking or persistent papcoll call of this Communicator is active: "
            "complete it (Wait, or Test until complete) before the next call")


SITES = {None: "a", False: "v", True: "w"}          # a call kind's site (callcache.py)
CALLS = {None: "alltoall", False: "alltoallv", True: "alltoallw"}


def make(ctx, persistent, w, sendbuf, recvbuf, algorithm):
    """A Request for an Alltoall (``w`` None), Alltoallv (False) or Alltoallw (True) of
    ``ctx`` (its lock held); a nonblocking one started. Its call object is a plan of its
    shape from the CallCache (the same object that serves blocking calls of that shape,
    where both resolve alike), else what the full path makes -- the buffers checked, the
    algorithm chosen and set up (collective, bounded) -- and the plan it leaves, if any. The
    request pins its plan while it holds it."""
    idle(ctx)
    ctx.cache.ready(ctx)              # no plan that may name a freed datatype is found
    site = (SITES[w], algorithm)
    plan = ctx.cache.find(site, sendbuf, recvbuf, lambda name: serves(ctx, name, w))
    full = None
    if plan is not None:
        ctx.cache.pin(plan)
    else:
        full = prepare(ctx, w, sendbuf, recvbuf, algorithm)
        plan = planned(ctx, site, full, sendbuf, recvbuf, algorithm)
    kept = Persistent() if persistent else None
    if kept is not None and plan is None and w is None and full.algo is not None:
        kept.plan = full.algo.persistent_plan(sendbuf, recvbuf, full.send, full.recv, kept)

    def start():
        nonlocal full
        op = kept.start(sendbuf, recvbuf) if kept is not None else None
        if op is None and plan is not None:
            op = plan.start(sendbuf, recvbuf, kept)
        if op is None:                  # no plan, or disarmed since: the full path
            full = full or prepare(ctx, w, sendbuf, recvbuf, algorithm)
            op = begin(full, kept)
        return op
    call = Call(ctx, start, full.name if plan is None else plan.chosen, persistent,
                hold(sendbuf, recvbuf), plan, kept)
    request = Request(call)
    if not persistent:
        call.launch()
    return request


class Full(NamedTuple):
    """A request's call as the full path checked it: its algorithm's name and object (None:
    one process), its parsed sides, and its specs (``w``, sendbuf, recvbuf)."""
    name: str
    algo: object
    send: object
    recv: object
    specs: tuple


def prepare(ctx, w, sendbuf, recvbuf, algorithm):
    """The full path of a request: its buffers checked, its algorithm chosen and set up
    (collective, bounded)."""
    if w is None:
        send, recv = parse_alltoall(sendbuf, recvbuf, ctx.size)
    else:
        send, recv = parse_alltoallv(sendbuf, recvbuf, ctx.size, ctx.rank, w,
                                     ctx.cache.layouts)
    name = ctx.chosen = choose(ctx, algorithm, w, None if w is not None else recv.block)
    token = config.adopt(ctx.settings)
    try:
        algo = ctx.algorithm(name) if ctx.size > 1 else None    # set-up: collective
    except BaseException as err:
        ctx.fail(err)
        raise
    finally:
        config.restore(token)
    return Full(name, algo, send, recv, (w, sendbuf, recvbuf))


def begin(full, kept):
    """Start the call the full path checked (``kept``: a persistent request's)."""
    name, algo, send, recv, specs = full
    if algo is None:                  # one process: a copy
        if specs[0] is not None:
            send.pack()
            copy_own(send, recv, 0)
        elif send is not None:
            recv.data[:] = send.data
        return DONE
    return (algo.start(send, recv, kept) if specs[0] is None else
            algo.startv(send, recv, specs, kept))


def planned(ctx, site, full, sendbuf, recvbuf, algorithm):
    """The plan the algorithm leaves for the shape of this request (pinned), kept under
    ``site`` where blocking calls of that shape resolve to the same algorithm, else under
    its requests' own site; or None."""
    name, algo, send, recv, (w, _, _) = full
    if algo is None:
        return None
    plan = (algo.plan(sendbuf, recvbuf, recv) if w is None else
            algo.planv(sendbuf, recvbuf, send, recv))
    if plan is not None:
        alike = name == policy.resolve(ctx, algorithm, CALLS[w], recv.block if w is None else None)
        ctx.cache.pin(plan)
        ctx.cache.keep(site if alike else requests_site(site), plan)
    return plan


def serves(ctx, name, w):
    """Whether algorithm ``name`` serves requests of this kind."""
    cls = ctx.algorithm_class(name)
    return cls.nonblocking and (w is None or cls.variable)


def choose(ctx, algorithm, w, block):
    """The algorithm of a nonblocking or persistent call (``block``: an Alltoall's): the one
    named, else PAPCOLL_ALGORITHM where it serves the call, else the policy's choice where it
    does, else ``mpi``."""
    name = algorithm or ctx.forced or AUTO
    if name == AUTO or (name != algorithm and not serves(ctx, name, w)):
        name = policy.choose(ctx, block, CALLS[w])
        name = name if serves(ctx, name, w) else "mpi"
    if not serves(ctx, name, w):
        raise AlgorithmError(f"{name} serves no nonblocking or persistent "
                             f"{'Alltoall' if w is None else 'Alltoallv or Alltoallw'}; "
                             f"these do: {', '.join(policy.nonblocking(w is not None))} "
                             f"(or 'auto')")
    return name


def waitall(requests):
    """Wait for every request: papcoll's Requests and MPI's (mpi4py) alike, each moved on in
    turn, so that no papcoll call waits for one that needs its own Test to progress."""
    pending = [r for r in requests if r is not None]
    backoff = Backoff()
    while pending:
        left = [r for r in pending if not r.Test()]
        if len(left) == len(pending):
            backoff.pause()
        else:
            backoff.reset()
        pending = left


def hold(*specs):
    """Buffer exports of the buffers in these specs, which keep them from being resized or
    released while a request may use them."""
    held = []
    for spec in specs:
        if spec is MPI.IN_PLACE:
            continue
        buf = spec[0] if isinstance(spec, (list, tuple)) else spec
        try:
            held.append(memoryview(buf))
        except TypeError:                     # DLPack, CUDA array interface (foreign.py)
            held.append(MPI.buffer(buf))
    return held

