"""What papcoll keeps per communicator (a :class:`Context`), and how Contexts end.

Making a Context is collective and bounded (rendezvous.py): a private duplicate of the
communicator (MPI_Comm_idup), one meeting of all its ranks -- which also compares their
settings that change the wire (config.WIRE): ranks that differ get a ConfigError naming them,
all of them --, the topology, and the node board with its CMA check. Every later collective
step -- an algorithm's set-up, ``close`` -- meets first too.

**Ending.** ``close()`` meets every rank ("close"), then frees what is collective (MPI windows,
the private communicator) in the same order everywhere. A *broken* Context (a call ended in the
middle of an exchange: timeout, mismatch, transport error, Ctrl-C) has peers in an unknown
state, so it releases only what is local -- mappings, verbs resources -- and leaves its private
communicator and windows to MPI until MPI_Finalize, where a collective free could hang.

A Context whose Communicator the user dropped without closing is *dropped* (a weakref
finalizer moves it to a list; the finalizer never calls MPI). It is freed at the next
**sweep**: every new Context's creation meeting carries, from each rank, the tokens of its
dropped Contexts whose processes are all in the new one; a dropped Context that every one of
its processes listed is closed there by all of them, in token order, with its collective
frees -- they are all in the same meeting, so nothing can wait for an absentee. MPI_Finalize
(or interpreter exit) closes what is left, open or dropped, in token order too: a total order,
so meetings of overlapping Contexts cannot wait for each other in a cycle.

Tokens name a Context the same on all its ranks: (COMM_WORLD rank of its rank 0, that
process's count of Contexts made).
"""
import itertools

from mpi4py import MPI

from . import _native, adaptive, config, rendezvous, topology
from .algorithms import AUTO, lookup, policy
from .algorithms.registry import check
from .callcache import CallCache
from .errors import AlgorithmError, ConfigError, PapcollError, PapcollTimeoutError
from .node.board import NodeBoard
from .node.cma import CmaNode
from .progress import Deadline
from .trace import NoTrace, Trace

_made = itertools.count()
_open = {}        # token -> Context, not closed, its Communicator alive
_dropped = {}     # token -> Context, not closed, its Communicator gone


class Context:
    """Collective over ``comm``: papcoll's private duplicate of it, the settings, the topology,
    the node board, and the algorithms built so far. ``settings``: the wire settings its ranks
    agreed on at creation (config.WIRE); papcoll's code runs under
    ``config.adopt(ctx.settings)``, so that config.* give them."""

    def __init__(self, comm, trace=False):
        self.timeout = config.timeout()
        self.trace = (Trace(events=trace != "phases") if trace or config.trace()
                      else NoTrace())
        # The lock (one call at a time: see Communicator.Alltoall), the call count, the last
        # call's algorithm and the plans' call sites, in C (native/papcoll_entry.c).
        self.entry = self.lock = _native.Entry(_finish, self.fail)
        self.algorithms, self.cache = {}, CallCache(self.entry)   # the plans calls left
        self._active = None               # the request's Call in progress (requests.py)
        self.adaptive = None              # PAPCOLL_ADAPT's call sites (adaptive.py)
        self.requests = set()             # requests.py's Calls not freed: close frees them
        self.dropped = []                 # Calls whose Request was dropped: see requests.py
        self.broken = None                # the error that left peers in an unknown state
        self.node = self.cma = None
        self.closed = False
        self.comm = rendezvous.dup(comm, self.timeout)
        self.peers = rendezvous.watch(self.comm, self.entry)    # what give-ups say: calls
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        self.processes = _world_ranks(self.comm)
        deadline = Deadline(self.timeout)
        try:
            tuning = policy.Tuning()
            met = rendezvous.exchange(self.comm, "papcoll.Communicator",
                                      ((MPI.COMM_WORLD.Get_rank(), next(_made)),
                                       _droppable(set(self.processes)), config.wire(),
                                       MPI.Get_processor_name(), tuning.said()), deadline)
            self.token = met[0][0]
            far = [q for q, value in met.items() if value[3] != met[self.rank][3]]
            rendezvous.locate(self.comm, far)     # processes on other hosts (see give_up)
            _sweep([value[1] for value in met.values()])
            self.settings = self.agree({rank: value[2] for rank, value in met.items()},
                                       {rank: value[4] for rank, value in met.items()})
            self.topology = topology.discover(self.comm, deadline, self.node_size)
            self.table = policy.in_force(tuning.rows + policy.TABLE, self)  # tuned rows first
            if self.size > 1:
                self.node = NodeBoard(self.comm, self.topology.local, deadline)
                rendezvous.locate(self.comm, far, self.node)
                self.cma = CmaNode(self.node, self.comm, deadline, self.timeout)
        except BaseException as err:
            if not self.closed:               # the others may be waiting for me: say why not
                rendezvous.give_up(self.comm, err)
                self.release(collective=False)
            raise
        _open[self.token] = self

    @property
    def calls(self):
        """How many calls have begun on this Communicator (every rank counts the same: each
        call is collective), the one now in progress included."""
        return self.entry.calls

    @property
    def chosen(self):
        """The algorithm of the last call (api.py)."""
        return self.entry.chosen

    @chosen.setter
    def chosen(self, name):
        self.entry.chosen = name

    @property
    def active(self):
        """The request's Call in progress (requests.py): the next call takes Python's path."""
        return self._active

    @active.setter
    def active(self, call):
        self._active = call
        if call is not None:
            self.entry.stale = True

    def drop_request(self, call):
        """A Request was dropped (its finalizer: no MPI, any thread): its Call goes at the
        next call, which takes Python's path (requests.idle)."""
        self.dropped.append(call)
        self.entry.stale = True

    def agree(self, wire, tunings):
        """The wire settings every rank read (``wire``: each rank's config.wire()), checked,
        and the tuning files (``tunings``: each rank's policy.Tuning.said()). Every rank has
        the same ``wire`` and ``tunings``, so a disagreement or a bad value raises the same
        ConfigError on every rank, at the same step: the private communicator is freed."""
        try:
            error = config.disagreement(wire) or policy.disagreement(tunings)
            if error is not None:
                raise error
            token = config.adopt(wire[self.rank])
            try:
                self.forced = forced_algorithm()
                self.node_size = config.node_size()
                every = config.adapt() if self.forced in (None, AUTO) else None
                self.adaptive = adaptive.Sites(every) if every else None   # adaptive.py
                config.copy_threshold()       # its range now; pap_direct checks the inbox
            finally:
                config.restore(token)
        except ConfigError:
            self.release(collective=True)
            raise
        return wire[self.rank]

    def algorithm_class(self, name):
        """The class of algorithm ``name``, or AlgorithmError if it cannot run here (the same
        answer on every rank, and nothing is sent: the Communicator stays usable)."""
        cls = lookup(name)
        if name not in self.algorithms:
            reason = cls.unsupported(self)
            if reason:
                raise AlgorithmError(f"algorithm {name!r} cannot run here: {reason}")
        return cls

    def algorithm(self, name):
        """The algorithm ``name`` on this Context, set up (collectively) on first use."""
        algo = self.algorithms.get(name)
        if algo is None:
            algo = self.algorithms[name] = self.algorithm_class(name)(self)
        return algo

    def fail(self, error):
        """An error left a call unfinished: peers are in an unknown state. Never reuse this
        Context, and tell the others that this process gave up on it."""
        self.broken, self.entry.stale = error, True
        rendezvous.give_up(self.comm, error)

    def close(self):
        """Collective (bounded) unless broken; safe twice. A request's call still active is
        completed first (requests.py: its peers need its data), within the same bound. Ranks
        that gave up are not waited for, but then nothing collective is freed. A peer that
        neither comes to close nor gave up raises PapcollTimeoutError naming it (a call that
        cannot complete: its error), after the local release: closed all the same."""
        if self.closed:
            return
        collective = False
        if self.broken is None:
            deadline = Deadline(self.timeout)
            try:
                if self.active is not None:
                    self.active.finish(deadline)
                if self.adaptive is not None:
                    self.adaptive.close(self)
                met = rendezvous.agree(self.comm, "close", deadline, without_gave_up=True)
                collective = len(met) == self.size
            except BaseException as err:
                self.broken = self.broken or err
                self.release(collective=False)
                raise
        else:
            rendezvous.tell_missing(self.comm)
        self.release(collective)

    def release(self, collective):
        """Free everything local; with ``collective`` (every rank is here) also MPI windows
        and the private communicator."""
        self.closed = self.entry.stale = True
        _open.pop(getattr(self, "token", None), None)
        _dropped.pop(getattr(self, "token", None), None)
        for call in list(self.requests):    # before the communicator: mpi's MPI requests
            call.release()
        self.dropped.clear()
        self.cache.drop()
        for algo in self.algorithms.values():
            algo.close(collective)
        self.algorithms.clear()
        for part in (self.cma, self.node):
            if part is not None:
                part.close()
        if collective:
            rendezvous.forget(self.comm)
            self.comm.Free()


def _finish(plan, rc):
    """A plan left its call (rc < 0): its algorithm finishes it, or raises."""
    plan.algorithm.plan_failed(plan, rc)


def forced_algorithm():
    """PAPCOLL_ALGORITHM, checked: a registered name, or auto (or None)."""
    name = config.algorithm()
    if name is not None:
        try:
            check(name)
        except AlgorithmError as err:
            raise ConfigError(f"PAPCOLL_ALGORITHM={name!r}: {err}") from None
    return name


def drop(context):
    """Weakref finalizer of a Communicator: its Context waits for the next sweep. No MPI here:
    a finalizer runs wherever the last reference goes, even inside another MPI call."""
    if not context.closed and _open.pop(context.token, None) is not None:
        _dropped[context.token] = context


def _world_ranks(comm):
    group, world = comm.Get_group(), MPI.COMM_WORLD.Get_group()
    try:
        return tuple(MPI.Group.Translate_ranks(group, None, world))
    finally:
        group.Free()
        world.Free()


def _droppable(processes):
    """(token, processes) of my dropped Contexts whose processes are all in ``processes``,
    but those whose request's call is still active: the sweep has no meeting after it, so it
    cannot complete that call, which waits for its Wait or for MPI_Finalize's close."""
    return sorted((token, ctx.processes) for token, ctx in _dropped.items()
                  if set(ctx.processes) <= processes and ctx.active is None)


def _sweep(offers):
    """Close the dropped Contexts that every one of their processes offered (``offers``: each
    rank's list of (token, processes)), in token order; broken ones release locally."""
    offered = {}
    for offer in offers:
        for token, processes in offer:
            offered.setdefault((token, processes), 0)
            offered[token, processes] += 1
    for token, processes in sorted(offered):
        context = _dropped.get(token)
        if context is not None and offered[token, processes] == len(processes):
            context.release(collective=context.broken is None)


def close_all():
    """At MPI_Finalize or interpreter exit: close every Context not closed yet, open or
    dropped, in token order. A rank that failed to close one is not met again."""
    if MPI.Is_finalized():
        return
    absent = set()
    for token in sorted({**_open, **_dropped}):
        context = _open.get(token) or _dropped.get(token)
        if context is None or context.closed:
            continue
        if context.broken is None and not absent.intersection(context.processes):
            try:
                context.close()
            except PapcollTimeoutError as err:
                absent.update(_world_ranks_of(context, err.missing or ()))
            except PapcollError:
                pass
        if not context.closed:
            context.release(collective=False)


def abandon_all():
    """The job is about to abort (runner.py: an uncaught error): release every Context locally
    and meet no one, so that the close at interpreter exit, which runs before the abort, has
    nothing left. The others may be in a call that waits for this process: a close meeting
    would hold the abort for PAPCOLL_TIMEOUT and then time them out with an error of theirs,
    while the abort ends their calls at once and the error that caused it is this rank's."""
    for token in sorted({**_open, **_dropped}):
        (_open.get(token) or _dropped[token]).release(collective=False)


def _world_ranks_of(context, ranks):
    return {context.processes[r] for r in ranks}
