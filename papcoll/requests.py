"""Nonblocking and persistent alltoalls: :class:`Request`, with mpi4py's request verbs.

``Communicator.Ialltoall`` (and ``Ialltoallv``, ``Ialltoallw``) starts a call and returns an
active Request; ``Alltoall_init`` (and ``v``, ``w``) checks the buffers, chooses the algorithm
and sets it up once -- collective and bounded, like any set-up -- and returns an inactive
persistent Request, which each ``Start`` runs again on the same buffers (their contents may
change between starts). A Request progresses when its ``Test`` or ``Wait`` runs; what moves
without them depends on the algorithm (README "Nonblocking and persistent calls").

One operation at a time per Communicator: its one-sided algorithms count their calls, so a
second call -- blocking, nonblocking or a Start -- while a Request of the same Communicator is
active raises CommunicatorStateError, before anything moves. Misuse is refused with a
BufferSpecError naming it: a Start of an active Request, any use after ``Free``. A Request
holds its buffers (buffer exports: Python refuses to resize or release them meanwhile) until
``Free``, or, nonblocking, until complete. Requests are papcoll's, not MPI's: MPI's
``Waitall`` cannot take them, and papcoll's :func:`waitall` takes both kinds.
"""
import weakref

from mpi4py import MPI

from . import config
from .algorithms import AUTO, policy
from .algorithms.calls import DONE, Persistent
from .buffers import parse_alltoall
from .errors import AlgorithmError, BufferSpecError, CommunicatorStateError
from .vbuffers import copy_own, parse_alltoallv
from .progress import Backoff


class Request:
    """A nonblocking (active from the start, done once complete) or persistent (started by
    ``Start``) alltoall of a Communicator's context ``ctx``. ``start()`` starts the call: it
    returns what the algorithm started (``test()``, ``wait()``)."""

    def __init__(self, ctx, start, name, persistent, hold=()):
        self.ctx, self._start, self.name, self.persistent = ctx, start, name, persistent
        self._hold = list(hold)         # the buffers, held while the request may use them
        self._op = None
        self._freed = False
        self._free = None               # frees what a persistent request kept (make())

    # ---- mpi4py's verbs -------------------------------------------------------------------

    def Start(self):
        self._usable("Start")
        if not self.persistent:
            raise BufferSpecError("Start: this request is nonblocking, not persistent "
                                  "(make one with Alltoall_init)")
        if self._op is not None:
            raise BufferSpecError("Start: this persistent request is active; Wait (or Test "
                                  "until it is complete) before starting it again")
        self.begin()

    def Test(self):
        """Move the call on; whether it is complete (an inactive request: True)."""
        self._usable("Test")
        if self._op is None:
            return True
        return self._run(lambda op: op.test())

    def Wait(self):
        """Complete the call (bounded by PAPCOLL_TIMEOUT from its start; ``mpi``'s: MPI's)."""
        self._usable("Wait")
        if self._op is not None:
            self._run(lambda op: op.wait() or True)

    def Free(self):
        """Release the request and its buffers; an active one must be completed first."""
        self._usable("Free")
        if self._op is not None:
            raise BufferSpecError("Free: this request is active; Wait for it first")
        self._freed = True
        self._release()

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
        return self._op is not None

    # ---- inside ---------------------------------------------------------------------------

    def _usable(self, verb):
        if self._freed:
            raise BufferSpecError(f"{verb}: this request was freed")

    def begin(self):
        """Start the call (a Start, or a nonblocking call's making)."""
        ctx = self.ctx
        if not ctx.lock.acquire(blocking=False):
            raise CommunicatorStateError("this papcoll.Communicator is in use by another thread")
        try:
            if ctx.closed or ctx.broken is not None:
                raise CommunicatorStateError("this request's papcoll.Communicator is closed or "
                                             "unusable after an earlier error")
            if ctx.active is not None:
                raise CommunicatorStateError(busy())
            ctx.peers.calls += 1
            ctx.chosen = self.name
            try:
                op = self._start()
            except BaseException as err:
                ctx.fail(err)
                raise
            self._op, ctx.active = op, self     # active until a Wait or Test sees it done
        finally:
            ctx.lock.release()

    def _run(self, step):
        ctx = self.ctx
        if self._op is DONE:                    # nothing left to move: no lock to take
            self._op, ctx.active = None, None
            if not self.persistent:
                self._release()
            return True
        with ctx.lock:
            try:
                done = step(self._op)
            except BaseException as err:
                self._op, ctx.active = None, None
                ctx.fail(err)
                self._release()
                raise
            if done:
                self._op, ctx.active = None, None
                if not self.persistent:
                    self._release()
            return done

    def _release(self):
        """Drop every reference to the user's buffers (the parsed ones are in ``_start``), and
        what the request kept between starts."""
        self._hold.clear()
        self._start = None
        if self._free is not None:
            self._free()                # once: a finalizer runs at most once


def busy():
    return ("a nonblocking or persistent papcoll call of this Communicator is active: "
            "complete it (Wait, or Test until complete) before the next call")


def make(ctx, persistent, w, sendbuf, recvbuf, algorithm):
    """A Request for an Alltoall (``w`` None), Alltoallv (False) or Alltoallw (True) of
    ``ctx`` (its lock held): the buffers checked, the algorithm chosen and set up (collective,
    bounded); not started (``begin``)."""
    if ctx.active is not None:
        raise CommunicatorStateError(busy())
    if w is None:
        send, recv = parse_alltoall(sendbuf, recvbuf, ctx.size)
    else:
        send, recv = parse_alltoallv(sendbuf, recvbuf, ctx.size, ctx.rank, w)
    name = ctx.chosen = choose(ctx, algorithm, w, None if w is not None else recv.block)
    token = config.adopt(ctx.settings)
    try:
        algo = ctx.algorithm(name) if ctx.size > 1 else None    # set-up: collective
    except BaseException as err:
        ctx.fail(err)
        raise
    finally:
        config.restore(token)
    specs = (w, sendbuf, recvbuf)
    kept = Persistent((sendbuf, recvbuf) if w is None else None) if persistent else None

    def start():
        if algo is None:                  # one process: a copy
            if w is not None:
                send.pack()
                copy_own(send, recv, 0)
            elif send is not None:
                recv.data[:] = send.data
            return DONE
        return (algo.start(send, recv, kept) if w is None else
                algo.startv(send, recv, specs, kept))
    request = Request(ctx, start, name, persistent, hold(sendbuf, recvbuf))
    if kept is not None:      # what it keeps (an MPI request of mpi's) goes with it, freed or not
        request._free = weakref.finalize(request, kept.free)
    return request


def choose(ctx, algorithm, w, block):
    """The algorithm of a nonblocking or persistent call (``block``: an Alltoall's): the one
    named, else PAPCOLL_ALGORITHM where it serves the call, else the policy's choice where it
    does, else ``mpi``."""
    def serves(name):
        cls = ctx.algorithm_class(name)
        return cls.nonblocking and (w is None or cls.variable)
    name = algorithm or ctx.forced or AUTO
    if name == AUTO or (name != algorithm and not serves(name)):
        name = policy.choose(ctx, block, {None: "alltoall", False: "alltoallv",
                                          True: "alltoallw"}[w])
        name = name if serves(name) else "mpi"
    if not serves(name):
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

