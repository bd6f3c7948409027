"""The user-facing API: ``Communicator`` (an MPI.Intracomm with papcoll's Alltoall) and ``Alltoall``."""
import atexit
import time
import weakref

from mpi4py import MPI

from . import _native, config, context, requests
from .algorithms import AUTO, policy
from .algorithms.registry import check
from .buffers import parse_alltoall
from .errors import AlgorithmError, CommunicatorError, CommunicatorStateError
from .vbuffers import copy_own, parse_alltoallv

_IN_USE = ("this papcoll.Communicator is in use by another thread: calls on one Communicator "
           "must not overlap (use one Communicator per thread)")
_FINALIZED = "MPI is finalized: papcoll.Communicators are closed, and no new one can be made"


def _check(comm):
    """papcoll's own check of the communicator, before mpi4py's (whose TypeError says less)."""
    _alive()
    if comm == MPI.COMM_NULL:
        raise CommunicatorError("papcoll.Communicator needs an MPI intracommunicator, got "
                                "MPI.COMM_NULL")
    if not isinstance(comm, MPI.Intracomm):
        kind = "an inter-communicator" if isinstance(comm, MPI.Intercomm) else type(comm).__name__
        raise CommunicatorError(f"papcoll.Communicator needs an MPI intracommunicator, got {kind}")


def _alive():
    """Raise once MPI is finalized: any MPI call now would abort the process."""
    if MPI.Is_finalized():
        raise CommunicatorStateError(_FINALIZED)


class Communicator(MPI.Intracomm):
    """An MPI.Intracomm on the same communicator whose ``Alltoall`` is papcoll's.

    Constructing it is collective over ``comm`` and bounded by PAPCOLL_TIMEOUT. Every method
    but ``Alltoall`` is MPI's. Use it as a context manager or call ``close()`` (collective,
    bounded, safe twice) to free what papcoll set up, its requests too (a call still active
    is completed first: requests.py); one dropped without closing is freed at
    the next Communicator made over its processes, and MPI_Finalize closes the ones left (see
    context.py). With ``trace=True`` (or ``PAPCOLL_TRACE=1``) each call's serving order and
    phases are kept in ``traces``, with ``trace="phases"`` its phases alone (see trace.py). One
    thread at a time may use a Communicator.

    ``Dup``, ``Dup_with_info``, ``Clone``, ``Split``, ``Split_type``, ``Create`` and
    ``Create_group`` return papcoll.Communicators, set up inside the call (collective, as the
    MPI call is), or MPI.COMM_NULL where MPI gives no communicator; the caller owns both the
    new MPI communicator (``Free``) and its papcoll state (``close``). Everything else that
    makes a communicator returns MPI's own object (see README "Use").
    """

    _entry = _native.Entry(None, None)     # serves nothing: a Communicator never set up
    _adaptive = None                       # PAPCOLL_ADAPT's call sites (adaptive.py)

    def __new__(cls, comm=MPI.COMM_WORLD, *, trace=False):
        _check(comm)
        return super().__new__(cls, comm)

    def __init__(self, comm=MPI.COMM_WORLD, *, trace=False):
        _check(comm)
        self._trace = trace                 # derived Communicators trace as this one does
        ctx = self._ctx = context.Context(MPI.Intracomm(comm), trace)
        self._entry = ctx.entry              # Alltoall's way in: stale once closed
        if ctx.adaptive is not None:
            self._adaptive = ctx.adaptive
        weakref.finalize(self, context.drop, ctx).atexit = False

    # ---- communicators made from this one: MPI's call, then papcoll's set-up ----------------

    def _derived(self, make, *args, **kwargs):
        """``make(*args, **kwargs)``'s new intracommunicator (mpi4py gives Dup's result our
        type, not set up, and Split's a plain Intracomm) as a Communicator set up now: every
        rank is in the MPI call, so the set-up is too. COMM_NULL stays MPI's."""
        _alive()
        new = make(*args, **kwargs)
        if new == MPI.COMM_NULL:
            return MPI.COMM_NULL
        if not isinstance(new, Communicator):
            new = Communicator.__new__(Communicator, new)
        Communicator.__init__(new, new, trace=getattr(self, "_trace", False))
        return new

    def Dup(self, info=None):
        return self._derived(super().Dup, info)

    def Dup_with_info(self, info):
        return self._derived(super().Dup_with_info, info)

    def Clone(self):
        return self._derived(super().Clone)

    def Split(self, color=0, key=0):
        return self._derived(super().Split, color, key)

    def Split_type(self, *args, **kwargs):
        return self._derived(super().Split_type, *args, **kwargs)

    def Create(self, group):
        return self._derived(super().Create, group)

    def Create_group(self, *args, **kwargs):
        return self._derived(super().Create_group, *args, **kwargs)

    def Idup(self, info=None):
        """MPI's nonblocking Dup, as a plain MPI.Intracomm: papcoll's set-up cannot happen in
        a nonblocking call; make a Communicator of it once the request is complete."""
        new, request = super().Idup(info)
        return MPI.Intracomm(new), request

    def Idup_with_info(self, info):
        new, request = super().Idup_with_info(info)
        return MPI.Intracomm(new), request

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback):
        ctx = getattr(self, "_ctx", None)
        if error is not None and ctx and not ctx.closed and ctx.broken is None:
            ctx.fail(error)        # the other ranks will not come to close: release locally
        self.close()

    def close(self):
        ctx = getattr(self, "_ctx", None)
        if ctx is None:
            return
        if not ctx.lock.acquire(blocking=False):
            raise CommunicatorStateError(_IN_USE)
        try:
            self._ctx = None
            vars(self).pop("_entry", None)     # the class's, which serves nothing
            vars(self).pop("_adaptive", None)
            ctx.close()
        finally:
            ctx.lock.release()

    @property
    def traces(self):
        """The recorded calls (a deque of dicts), or None when tracing is off or this
        Communicator is closed. Never collective, like every property."""
        trace = getattr(getattr(self, "_ctx", None), "trace", None)
        return getattr(trace, "calls", None)

    @property
    def chosen(self):
        """The algorithm that served the last call (None before the first). Never collective."""
        return getattr(getattr(self, "_ctx", None), "chosen", None)

    @property
    def closed(self):
        """True once closed (also by MPI_Finalize), or if never set up."""
        ctx = getattr(self, "_ctx", None)
        return ctx is None or ctx.closed

    def Alltoall(self, sendbuf, recvbuf, *, algorithm=None):
        """Like ``MPI.Comm.Alltoall``: send block i of ``sendbuf`` to rank i, receive block j of
        ``recvbuf`` from rank j. ``algorithm`` names a registered algorithm, or ``"auto"`` (the
        selection policy); else ``PAPCOLL_ALGORITHM``, else the policy. Every rank must choose
        the same. With PAPCOLL_ADAPT, ``auto`` follows the arrival pattern (adaptive.py)."""
        if self._adaptive is not None and algorithm in (None, AUTO):
            full = self._entry.timed(self._adaptive.by_length, sendbuf, recvbuf)
            if full is not True:
                self._adapted(sendbuf, recvbuf, full)
            return
        site = ("a", algorithm)
        served = self._entry.serve(site, sendbuf, recvbuf)
        if not served:
            self._call(served, site, sendbuf, recvbuf,
                       lambda ctx: self._full_path(ctx, sendbuf, recvbuf, algorithm))

    def _adapted(self, sendbuf, recvbuf, full):
        """An adaptive ``auto`` call the Entry did not serve and time (``full`` None: its site's
        algorithm by name, by that name's plans, as ``Alltoall(..., algorithm=name)``, timed
        here), or whose site's window it filled and left to Python (``full``, the site: its
        last reduction still in flight, or the lock taken); at the end of a window, the
        agreement, which breaks the Communicator if it fails (a peer is then in an unknown
        state, as after any failed call)."""
        ctx, sites = self._ctx, self._adaptive
        if full is None:
            site = sites.site(ctx, sendbuf, recvbuf)
            start = time.perf_counter()
            served = self._entry.serve(site.key, sendbuf, recvbuf)
            if not served:
                self._call(served, site.key, sendbuf, recvbuf,
                           lambda ctx: self._full_path(ctx, sendbuf, recvbuf, site.name))
            if not sites.timed(site, time.perf_counter() - start):
                return
            full = site
        if not ctx.lock.acquire(blocking=False):
            raise CommunicatorStateError(_IN_USE)
        try:
            sites.agree(ctx, full)
        except BaseException as err:
            ctx.fail(err)
            raise
        finally:
            ctx.lock.release()

    def _call(self, served, site, sendbuf, recvbuf, full):
        """A call the Entry did not serve (``served``: False, no plan of ``site`` has its
        shape; None, not tried: the Communicator's state or lock stands in the way): after
        the checks ``_enter`` makes, a plan may still serve it, else ``full(ctx)``, which
        returns the plan it left for the call's shape, if any, and the name its calls are
        said to be served by (None: the plan's algorithm)."""
        ctx = self._enter()
        try:
            if served is False or not ctx.entry.run(site, sendbuf, recvbuf):
                plan, chosen = full(ctx)
                if plan is not None:          # the next calls of this shape: from C
                    ctx.cache.keep(site, plan, chosen)
        finally:
            ctx.lock.release()

    def _enter(self):
        """The context of a call, its lock taken (one call at a time), a dropped request's
        call completed, the call counted (a give-up says in which call: rendezvous.py)."""
        ctx = getattr(self, "_ctx", None)
        if ctx is None or ctx.closed or ctx.broken is not None:
            ctx = self._context()          # raises the error that says why
        if not ctx.lock.acquire(blocking=False):
            raise CommunicatorStateError(_IN_USE)
        try:
            if ctx.active is not None or ctx.dropped:
                requests.idle(ctx)
            ctx.cache.ready(ctx)
        except BaseException:
            ctx.lock.release()
            raise
        ctx.entry.calls += 1
        return ctx

    @staticmethod
    def _full_path(ctx, sendbuf, recvbuf, algorithm):
        send, recv = parse_alltoall(sendbuf, recvbuf, ctx.size)
        name = ctx.chosen = policy.resolve(ctx, algorithm, "alltoall", recv.block)
        if ctx.size == 1:       # every algorithm is a copy here, MPI's: only the name counts
            check(name)
            mpi = ctx.algorithm("mpi")     # nothing collective to set up
            mpi.alltoall(send, recv)
            return mpi.plan(sendbuf, recvbuf, recv), name
        ctx.algorithm_class(name)      # an unknown or impossible one: an error, nothing broken
        ctx.trace.begin(name, ctx.calls)
        token = config.adopt(ctx.settings)   # config.* give the settings agreed at creation
        try:
            algo = ctx.algorithm(name)     # set-up is collective (and bounded)
            algo.alltoall(send, recv)
        except BaseException as err:       # peers may still write into our memory or wait for
            ctx.fail(err)                  # ours: never reuse this Communicator
            raise
        finally:
            config.restore(token)
        ctx.trace.end()
        # The same algorithm= and the same buffer shape take the same route: the plan's.
        return algo.plan(sendbuf, recvbuf, recv), None

    def Alltoallv(self, sendbuf, recvbuf, *, algorithm=None):
        """Like ``MPI.Comm.Alltoallv`` (mpi4py's buffer specs: counts and displacements per
        peer, in elements of the one datatype; MPI.IN_PLACE). ``algorithm``: one that serves
        Alltoallv (``pap_direct``, ``mpi``) or ``"auto"``; else ``PAPCOLL_ALGORITHM`` where it
        serves one, else the policy. Every rank must choose the same."""
        self._variable(False, sendbuf, recvbuf, algorithm)

    def Alltoallw(self, sendbuf, recvbuf, *, algorithm=None):
        """Like ``MPI.Comm.Alltoallw``: a datatype per peer, displacements in bytes; otherwise
        as :meth:`Alltoallv`."""
        self._variable(True, sendbuf, recvbuf, algorithm)

    def _variable(self, w, sendbuf, recvbuf, algorithm):
        site = ("w" if w else "v", algorithm)
        served = self._entry.serve(site, sendbuf, recvbuf)
        if not served:
            self._call(served, site, sendbuf, recvbuf,
                       lambda ctx: self._full_variable(ctx, w, sendbuf, recvbuf, algorithm))

    @staticmethod
    def _full_variable(ctx, w, sendbuf, recvbuf, algorithm):
        send, recv = parse_alltoallv(sendbuf, recvbuf, ctx.size, ctx.rank, w, ctx.cache.layouts)
        name = policy.resolve(ctx, algorithm, "alltoallw" if w else "alltoallv")
        if not ctx.algorithm_class(name).variable:
            raise AlgorithmError(f"{name} serves no Alltoallv or Alltoallw; these do: "
                                 f"{', '.join(policy.variable())} (or 'auto')")
        ctx.chosen = name
        if ctx.size == 1 and w and (algorithm or ctx.forced) != "mpi" \
                and policy.library() == "Open MPI":
            # Open MPI 5.0.11's own MPI_Alltoallw on one process moves nothing to the byte
            # displacements it is given and writes past the buffer instead (heap corruption
            # on COMM_SELF): so papcoll copies, and leaves no plan, unless told "mpi".
            send.pack()
            copy_own(send, recv, 0)
            return None, None
        if ctx.size == 1:           # MPI's own call is the copy, as in _full_path
            mpi = ctx.algorithm("mpi")
            mpi.alltoallv(send, recv, (w, sendbuf, recvbuf))
            return mpi.planv(sendbuf, recvbuf, send, recv), name
        ctx.trace.begin(name, ctx.calls)
        token = config.adopt(ctx.settings)
        try:
            algo = ctx.algorithm(name)
            algo.alltoallv(send, recv, (w, sendbuf, recvbuf))
        except BaseException as err:   # as in _full_path: never reuse this Communicator
            ctx.fail(err)
            raise
        finally:
            config.restore(token)
        ctx.trace.end()
        return algo.planv(sendbuf, recvbuf, send, recv), None

    # ---- nonblocking and persistent calls (requests.py) -------------------------------------

    def Ialltoall(self, sendbuf, recvbuf, *, algorithm=None):
        """Start an Alltoall; returns an active papcoll Request (Test, Wait). ``algorithm``:
        one that serves nonblocking calls (``pap_direct``, ``pap_direct_zcopy``, ``direct``,
        ``mpi``) or ``"auto"``: the policy's choice where it serves them, else ``mpi``."""
        return self._request(False, None, sendbuf, recvbuf, algorithm)

    def Ialltoallv(self, sendbuf, recvbuf, *, algorithm=None):
        return self._request(False, False, sendbuf, recvbuf, algorithm)

    def Ialltoallw(self, sendbuf, recvbuf, *, algorithm=None):
        return self._request(False, True, sendbuf, recvbuf, algorithm)

    def Alltoall_init(self, sendbuf, recvbuf, info=None, *, algorithm=None):
        """A persistent Alltoall on these buffers: checked, chosen and set up now (collective,
        bounded); each ``Start`` runs it. ``info`` is accepted and ignored, as MPI may."""
        return self._request(True, None, sendbuf, recvbuf, algorithm)

    def Alltoallv_init(self, sendbuf, recvbuf, info=None, *, algorithm=None):
        return self._request(True, False, sendbuf, recvbuf, algorithm)

    def Alltoallw_init(self, sendbuf, recvbuf, info=None, *, algorithm=None):
        return self._request(True, True, sendbuf, recvbuf, algorithm)

    def _request(self, persistent, w, sendbuf, recvbuf, algorithm):
        ctx = self._context()
        if not ctx.lock.acquire(blocking=False):
            raise CommunicatorStateError(_IN_USE)
        try:
            return requests.make(ctx, persistent, w, sendbuf, recvbuf, algorithm)
        finally:
            ctx.lock.release()

    def _context(self):
        ctx = getattr(self, "_ctx", False)
        if ctx is None or ctx is False or ctx.closed:
            _alive()
            if ctx is False:
                raise CommunicatorStateError(
                    "this papcoll.Communicator was never set up (made by copying one, or by "
                    "mpi4py without papcoll): make one with papcoll.Communicator(comm)")
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
    return communicator_of(comm).Alltoall(sendbuf, recvbuf, algorithm=algorithm)


def communicator_of(comm):
    """``comm`` if it is a Communicator, else the Communicator cached for it: made at the first
    use (collective: every rank is in that call), closed when ``comm`` is freed or at
    MPI_Finalize."""
    if isinstance(comm, Communicator):
        return comm
    pc = _cached.get(comm.handle)
    if pc is None or pc.closed:
        pc = _cached[comm.handle] = Communicator(comm)
        comm.Set_attr(_keyval(), pc)
    return pc


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
