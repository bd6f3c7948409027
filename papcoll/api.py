"""The user-facing API: ``Communicator`` (an MPI.Intracomm with papcoll's Alltoall) and ``Alltoall``."""
import atexit
import weakref

from mpi4py import MPI

from . import context
from .algorithms import AUTO, policy
from .algorithms.registry import check
from .buffers import parse_alltoall
from .errors import CommunicatorStateError, PapcollError

_IN_USE = ("this papcoll.Communicator is in use by another thread: calls on one Communicator "
           "must not overlap (use one Communicator per thread)")


def _check(comm):
    """papcoll's own check of the communicator, before mpi4py's (whose TypeError says less)."""
    if comm == MPI.COMM_NULL:
        raise PapcollError("papcoll.Communicator needs an MPI intracommunicator, got "
                           "MPI.COMM_NULL")
    if not isinstance(comm, MPI.Intracomm):
        kind = "an inter-communicator" if isinstance(comm, MPI.Intercomm) else type(comm).__name__
        raise PapcollError(f"papcoll.Communicator needs an MPI intracommunicator, got {kind}")


class Communicator(MPI.Intracomm):
    """An MPI.Intracomm on the same communicator whose ``Alltoall`` is papcoll's.

    Constructing it is collective over ``comm`` and bounded by PAPCOLL_TIMEOUT. Every method
    but ``Alltoall`` is MPI's. Use it as a context manager or call ``close()`` (collective,
    bounded, safe twice) to free what papcoll set up; one dropped without closing is freed at
    the next Communicator made over its processes, and MPI_Finalize closes the ones left (see
    context.py). With ``trace=True`` (or ``PAPCOLL_TRACE=1``) each call's serving order and
    phases are kept in ``traces``, with ``trace="phases"`` its phases alone (see trace.py). One
    thread at a time may use a Communicator.
    """

    def __new__(cls, comm=MPI.COMM_WORLD, *, trace=False):
        _check(comm)
        return super().__new__(cls, comm)

    def __init__(self, comm=MPI.COMM_WORLD, *, trace=False):
        _check(comm)
        ctx = self._ctx = context.Context(MPI.Intracomm(comm), trace)
        weakref.finalize(self, context.drop, ctx).atexit = False

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback):
        ctx = getattr(self, "_ctx", None)
        if error is not None and ctx and ctx.broken is None:   # the other ranks will not come
            ctx.fail(error)                                    # to close: release locally
        self.close()

    def close(self):
        ctx = getattr(self, "_ctx", None)
        if ctx is None or ctx is False:
            return
        if not ctx.lock.acquire(blocking=False):
            raise CommunicatorStateError(_IN_USE)
        try:
            self._ctx = None
            ctx.close()
        finally:
            ctx.lock.release()

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
        ``recvbuf`` from rank j. ``algorithm`` names a registered algorithm, or ``"auto"`` (the
        selection policy); else ``PAPCOLL_ALGORITHM``, else the policy. Every rank must choose
        the same."""
        ctx = self._context()
        if not ctx.lock.acquire(blocking=False):
            raise CommunicatorStateError(_IN_USE)
        try:
            lane = ctx.lanes.get(algorithm)
            if lane is not None:
                try:
                    done = lane[0](sendbuf, recvbuf)
                except BaseException as err:   # e.g. Ctrl-C between two waits: peers mid-call
                    ctx.fail(err)
                    raise
                if done > 0:
                    return
                if done < 0:
                    try:
                        lane[1].lane_failed(lane[2], done)   # finishes the call, or raises
                    except BaseException as err:
                        ctx.fail(err)
                        raise
                    return
            self._full_path(ctx, sendbuf, recvbuf, algorithm)
        finally:
            ctx.lock.release()

    @staticmethod
    def _full_path(ctx, sendbuf, recvbuf, algorithm):
        send, recv = parse_alltoall(sendbuf, recvbuf, ctx.size)
        name = algorithm or ctx.forced or AUTO
        if name == AUTO:
            name = policy.choose(ctx, recv.block)
        if ctx.size == 1:              # every algorithm is a copy here: only the name counts
            check(name)
            if send is not None:
                recv.data[:] = send.data
            return
        ctx.algorithm_class(name)      # an unknown or impossible one: an error, nothing broken
        ctx.calls += 1
        ctx.trace.begin(name, ctx.calls)
        try:
            algo = ctx.algorithm(name)     # set-up is collective (and bounded)
            algo.alltoall(send, recv)
        except BaseException as err:       # peers may still write into our memory or wait for
            ctx.fail(err)                  # ours: never reuse this Communicator
            raise
        ctx.trace.end()
        # The same algorithm= and the same buffer shape take the same route: the lane's. A call
        # that arms none leaves the last one, whose shape still routes there.
        lane = algo.lane(algorithm, sendbuf, recvbuf, recv)
        if lane is not None:
            ctx.lanes[algorithm] = (lane.run, algo, lane)

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
    context.close_all()


def _at_finalize():
    # An explicit MPI.Finalize() deletes COMM_SELF's attributes first, while MPI still works
    # (MPI-3 8.7.1); at interpreter exit mpi4py finalizes without calling Python back, so an
    # atexit handler (run before mpi4py's) closes what is left then.
    MPI.COMM_SELF.Set_attr(MPI.Comm.Create_keyval(delete_fn=_close_all), True)
    atexit.register(_close_all)
