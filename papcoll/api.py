"""The user-facing API: ``Communicator`` (an MPI.Intracomm with papcoll's Alltoall) and ``Alltoall``."""
import atexit
import itertools
import weakref

from mpi4py import MPI

from . import config, topology
from .algorithms import lookup, policy
from .buffers import parse_alltoall
from .errors import (AlgorithmError, CommunicatorStateError, PapcollError, PapcollTimeoutError,
                     TransportError)
from .trace import NoTrace, Trace


class Context:
    """What papcoll keeps per communicator: a private duplicate for its own traffic, the
    topology, the settings, and the algorithms built so far."""

    def __init__(self, comm, trace=False):
        self.comm = comm.Dup()            # papcoll's traffic never matches the user's
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        self.timeout = config.timeout()
        self.forced = config.algorithm()
        self.topology = topology.discover(self.comm)
        self.algorithms = {}
        self.lanes = {}                   # algorithm= value -> (fast lane, its algorithm)
        self.broken = None                # the error that left peers in an unknown state
        self.trace = Trace() if trace or config.trace() else NoTrace()
        self.calls = 0

    def algorithm(self, name):
        algo = self.algorithms.get(name)
        if algo is None:
            cls = lookup(name)
            reason = cls.unsupported(self)
            if reason:
                raise AlgorithmError(f"algorithm {name!r} cannot run here: {reason}")
            algo = self.algorithms[name] = cls(self)
        return algo

    def close(self):
        self.lanes.clear()
        for algo in self.algorithms.values():
            algo.close()
        self.algorithms.clear()
        self.topology.free()
        self.comm.Free()


# Live Communicators by creation number, closed at MPI_Finalize if the user did not. Creation
# is collective, so every rank closes them in the same order.
_open = {}
_serial = itertools.count()


class Communicator(MPI.Intracomm):
    """An MPI.Intracomm on the same communicator whose ``Alltoall`` is papcoll's.

    Constructing it is collective over ``comm``. Every method but ``Alltoall`` is MPI's.
    Use it as a context manager or call ``close()`` (collective, safe twice) to free what
    papcoll set up; MPI_Finalize closes the ones left open. With ``trace=True`` (or
    ``PAPCOLL_TRACE=1``) each call's serving order is kept in ``traces`` (see trace.py).
    """

    def __new__(cls, comm=MPI.COMM_WORLD, *, trace=False):
        return super().__new__(cls, comm)

    def __init__(self, comm=MPI.COMM_WORLD, *, trace=False):
        if not isinstance(comm, MPI.Intracomm) or comm == MPI.COMM_NULL:
            raise PapcollError(f"papcoll.Communicator needs an MPI intracommunicator, got {comm!r}")
        self._ctx = Context(MPI.Intracomm(comm), trace)
        self._serial = next(_serial)
        _open[self._serial] = weakref.ref(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        ctx, self._ctx = getattr(self, "_ctx", None), None
        _open.pop(getattr(self, "_serial", None), None)
        if ctx is not None:
            ctx.close()

    @property
    def traces(self):
        """The recorded calls (a deque of dicts), or None when tracing is off."""
        calls = getattr(self._context(), "trace", None)
        return getattr(calls, "calls", None)

    @property
    def closed(self):
        return getattr(self, "_ctx", None) is None

    def Alltoall(self, sendbuf, recvbuf, *, algorithm=None):
        """Like ``MPI.Comm.Alltoall``: send block i of ``sendbuf`` to rank i, receive block j of
        ``recvbuf`` from rank j. ``algorithm`` names a registered algorithm (else
        ``PAPCOLL_ALGORITHM``, else the selection policy); every rank must choose the same."""
        ctx = self._context()
        lane = ctx.lanes.get(algorithm)
        if lane is not None:
            try:
                done = lane[0](sendbuf, recvbuf)
            except BaseException as err:   # e.g. Ctrl-C between two waits: peers mid-call
                ctx.broken = err
                raise
            if done > 0:
                return
            if done < 0:
                ctx.broken = lane[1].lane_failed()
                raise ctx.broken
        send, recv = parse_alltoall(sendbuf, recvbuf, ctx.size)
        name = algorithm or ctx.forced or policy.choose(ctx, recv.block)
        lookup(name)   # an unknown name is an error even where nothing needs moving
        if recv.block == 0:
            return     # MPI moves nothing and synchronises nothing for empty blocks either
        if ctx.size == 1:
            if send is not None:
                recv.data[:] = send.data
            return
        ctx.calls += 1
        ctx.trace.begin(name, ctx.calls)
        try:
            algo = ctx.algorithm(name)     # set-up is collective: a failure leaves peers waiting
        except (PapcollTimeoutError, TransportError) as err:
            ctx.broken = err
            raise
        try:
            algo.alltoall(send, recv)
        except BaseException as err:       # peers may still write into our memory or wait for
            ctx.broken = err               # ours: never reuse this Communicator
            raise
        ctx.trace.end()
        # The same algorithm= and the same buffer shape take the same route: the lane's. A call
        # that arms none leaves the last one, whose shape still routes there.
        fast = algo.lane(algorithm, sendbuf, recvbuf, recv)
        if fast is not None:
            ctx.lanes[algorithm] = (fast, algo)

    def _context(self):
        ctx = getattr(self, "_ctx", False)
        if ctx is False:   # made by Dup/Split/... of a Communicator: set up now (we are collective)
            self.__init__(self)
            ctx = self._ctx
        if ctx is None:
            raise CommunicatorStateError("this papcoll.Communicator is closed")
        if ctx.broken is not None:
            raise CommunicatorStateError(
                f"this papcoll.Communicator is unusable after an earlier error: "
                f"{type(ctx.broken).__name__}: {ctx.broken}")
        return ctx


_cached = {}   # communicator handle -> Communicator, for the Alltoall convenience


def Alltoall(comm, sendbuf, recvbuf, *, algorithm=None):
    """``papcoll.Communicator(comm).Alltoall(...)`` with the Communicator cached per communicator
    (freed when ``comm`` is freed, or at MPI_Finalize)."""
    if isinstance(comm, Communicator):
        return comm.Alltoall(sendbuf, recvbuf, algorithm=algorithm)
    pc = _cached.get(comm.handle)
    if pc is None or pc.closed:
        pc = _cached[comm.handle] = Communicator(comm)
        comm.Set_attr(_keyval(), pc)
    return pc.Alltoall(sendbuf, recvbuf, algorithm=algorithm)


def _forget(comm, keyval, pc):
    _cached.pop(comm.handle, None)
    pc.close()


_keyvals = []


def _keyval():
    if not _keyvals:
        _keyvals.append(MPI.Comm.Create_keyval(delete_fn=_forget))
    return _keyvals[0]


def _close_all(*_):
    if MPI.Is_finalized():
        return
    for serial in sorted(_open):
        comm = _open[serial]()
        if comm is not None:
            comm.close()


def _at_finalize():
    # An explicit MPI.Finalize() deletes COMM_SELF's attributes first, while MPI still works
    # (MPI-3 8.7.1); at interpreter exit mpi4py finalizes without calling Python back, so an
    # atexit handler (run before mpi4py's) closes what is left then.
    MPI.COMM_SELF.Set_attr(MPI.Comm.Create_keyval(delete_fn=_close_all), True)
    atexit.register(_close_all)
