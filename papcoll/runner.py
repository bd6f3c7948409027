"""``python -m papcoll run [pyfile | -m mod | -c cmd] [arg] ...``: run an unmodified mpi4py
program with its ``Alltoall`` calls served by papcoll (under ``mpiexec``, one per rank).

mpi4py's communicator types are extension types: their methods cannot be replaced. But they
can be subclassed, mpi4py's ``Dup`` returns the caller's own type, and ``mpi4py.MPI`` is a
module whose attributes can be rebound. So before the program starts, ``MPI.COMM_WORLD`` and
``MPI.COMM_SELF`` become instances of :class:`Intracomm` -- the same MPI communicators, whose
``Alltoall`` is papcoll's (``api.communicator_of``: set up at the first call on a communicator,
closed when the program frees it) -- and every communicator made from them by ``Dup``,
``Clone``, ``Split``, ``Split_type``, ``Create``, ``Create_group``, ``Create_cart`` and a
Cartesian communicator's ``Sub`` is routed the same way; so are their ``Alltoallv`` and
``Alltoallw``. Everything else is mpi4py's own: the other collectives, and by default the
nonblocking and persistent alltoalls. papcoll's requests are not MPI requests: MPI's
``Waitall``, ``Testany``... do not take them; they move only in their own Test and Wait (MPI
moves its own while a process waits in any MPI call); and a Communicator takes one call at a
time. A program that completes each such request with its own methods before the next call on
that communicator can have them served too: PAPCOLL_RUN_REQUESTS=1 (the same on every rank).
An uncaught exception (or ``sys.exit`` with a failure status) aborts the job at once, as under
``python -m mpi4py``: its Communicators are released locally, not closed -- the others may be
in a call that this rank will never join (``context.abandon_all``).

Limits (docs/runner.md): a communicator the program gets other than through
these -- ``MPI.Intracomm(handle)``, ``MPI.Comm.f2py``, an inter-communicator's ``Merge``, a
graph topology -- is MPI's own, and so is a call made unbound, ``MPI.Comm.Alltoall(comm, ...)``;
``type(MPI.COMM_WORLD)`` is :class:`Intracomm`, a subclass of ``MPI.Intracomm``; and a module
that bound ``COMM_WORLD`` before the runner started (none can: the program starts after it)
would keep MPI's.

``PAPCOLL_SUMMARY=1``: at the program's normal end, rank 0 prints one screen: per kind of call,
the calls, the bytes of the receive buffers, the time in call and the algorithms that served
them, summed (calls, bytes) or as the slowest rank's (time) over the ranks.
"""
import sys
import time
from collections import Counter, defaultdict

from mpi4py import MPI
from mpi4py.run import run_command_line, set_abort_status

from . import api, config, context, rendezvous
from .errors import ConfigError
from .progress import Deadline

_stats = None     # kind -> [calls, bytes, seconds, Counter of algorithms], with PAPCOLL_SUMMARY
_requests = False  # PAPCOLL_RUN_REQUESTS


def _received(spec):
    """The bytes of the receive buffer in an mpi4py buffer spec (the buffer itself, or the
    first item of a list or tuple)."""
    buf = spec[0] if isinstance(spec, (list, tuple)) else spec
    try:
        return memoryview(buf).nbytes
    except TypeError:
        return 0


def _counted(kind, call, sendbuf, recvbuf, algorithm):
    """``call(sendbuf, recvbuf)`` (its result), timed and counted under ``kind``;
    ``algorithm()`` names what served it."""
    start = time.perf_counter()
    result = call(sendbuf, recvbuf)
    entry = _stats[kind]
    entry[0] += 1
    entry[1] += _received(recvbuf)
    entry[2] += time.perf_counter() - start
    entry[3][algorithm()] += 1
    return result


class _Routed:
    """What the routed communicator types add to mpi4py's: papcoll's Alltoall, routed children,
    and, with PAPCOLL_SUMMARY, the counts of the alltoalls."""

    def Alltoall(self, sendbuf, recvbuf):
        return self._papcoll("Alltoall", sendbuf, recvbuf)

    def Alltoallv(self, sendbuf, recvbuf):
        return self._papcoll("Alltoallv", sendbuf, recvbuf)

    def Alltoallw(self, sendbuf, recvbuf):
        return self._papcoll("Alltoallw", sendbuf, recvbuf)

    def _papcoll(self, kind, sendbuf, recvbuf):
        pc = api.communicator_of(self)
        call = getattr(pc, kind)
        if _stats is None:     # from now on this object's method is papcoll's, with no detour
            setattr(self, kind, call)
            return call(sendbuf, recvbuf)
        return _counted(kind, call, sendbuf, recvbuf, lambda: pc.chosen)

    def Ialltoall(self, sendbuf, recvbuf):
        return self._request("Ialltoall", sendbuf, recvbuf)

    def Ialltoallv(self, sendbuf, recvbuf):
        return self._request("Ialltoallv", sendbuf, recvbuf)

    def Ialltoallw(self, sendbuf, recvbuf):
        return self._request("Ialltoallw", sendbuf, recvbuf)

    def Alltoall_init(self, sendbuf, recvbuf, info=MPI.INFO_NULL):
        return self._request("Alltoall_init", sendbuf, recvbuf, info)

    def Alltoallv_init(self, sendbuf, recvbuf, info=MPI.INFO_NULL):
        return self._request("Alltoallv_init", sendbuf, recvbuf, info)

    def Alltoallw_init(self, sendbuf, recvbuf, info=MPI.INFO_NULL):
        return self._request("Alltoallw_init", sendbuf, recvbuf, info)

    def _request(self, kind, sendbuf, recvbuf, *info):
        """MPI's own request, or with PAPCOLL_RUN_REQUESTS papcoll's (counted as made)."""
        if not _requests:
            return getattr(MPI.Intracomm, kind)(self, sendbuf, recvbuf, *info)
        pc = api.communicator_of(self)
        call = getattr(pc, kind)
        if _stats is None:
            return call(sendbuf, recvbuf)
        return _counted(kind, call, sendbuf, recvbuf, lambda: pc.chosen)

    def Split(self, color=0, key=0):
        return _routed(MPI.Intracomm.Split(self, color, key))

    def Split_type(self, *args, **kwargs):
        return _routed(MPI.Intracomm.Split_type(self, *args, **kwargs))

    def Create(self, group):
        return _routed(MPI.Intracomm.Create(self, group))

    def Create_group(self, *args, **kwargs):
        return _routed(MPI.Intracomm.Create_group(self, *args, **kwargs))

    def Create_cart(self, *args, **kwargs):
        return _routed(MPI.Intracomm.Create_cart(self, *args, **kwargs))


class Intracomm(_Routed, MPI.Intracomm):
    """An MPI.Intracomm whose Alltoall is papcoll's (see the module's docstring)."""


class Cartcomm(_Routed, MPI.Cartcomm):
    """An MPI.Cartcomm whose Alltoall is papcoll's; its ``Sub`` communicators are routed too."""

    def Sub(self, remain_dims):
        return _routed(MPI.Cartcomm.Sub(self, remain_dims))


def _routed(comm):
    """``comm`` as the routed type of its kind (COMM_NULL stays MPI's)."""
    if comm == MPI.COMM_NULL:
        return comm
    return Cartcomm(comm) if isinstance(comm, MPI.Cartcomm) else Intracomm(comm)


def route():
    """Rebind ``MPI.COMM_WORLD`` and ``MPI.COMM_SELF`` to routed communicators."""
    MPI.COMM_WORLD, MPI.COMM_SELF = Intracomm(MPI.COMM_WORLD), Intracomm(MPI.COMM_SELF)


def summary(comm, timeout):
    """Rank 0's one screen over every rank's counts (a bounded meeting on ``comm``, a private
    communicator), or None on the other ranks."""
    mine = {kind: (e[0], e[1], e[2], dict(e[3])) for kind, e in _stats.items()}
    said = rendezvous.exchange(comm, "papcoll run: summary", mine, Deadline(timeout))
    if comm.Get_rank() != 0:
        return None
    lines = [f"papcoll run: {comm.Get_size()} ranks; per kind of call, summed over the ranks "
             f"(time: the slowest rank's)",
             f"  {'call':10} {'calls':>8} {'bytes':>14} {'time (s)':>10}  algorithms"]
    for kind in sorted({k for counts in said.values() for k in counts}):
        calls = sum(c[kind][0] for c in said.values() if kind in c)
        nbytes = sum(c[kind][1] for c in said.values() if kind in c)
        seconds = max(c[kind][2] for c in said.values() if kind in c)
        algorithms = Counter()
        for c in said.values():
            algorithms.update(c.get(kind, (0, 0, 0, {}))[3])
        chosen = ", ".join(f"{name} x {n}" for name, n in algorithms.most_common())
        lines.append(f"  {kind:10} {calls:8d} {nbytes:14d} {seconds:10.3f}  {chosen}")
    if not said or not any(said.values()):
        lines.append("  (no alltoall calls)")
    return "\n".join(lines)


def main(args):
    """Run the program the command line ``args`` names; the exit status is its own."""
    global _stats
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.split("\n\n")[0].strip())
        return 0 if args else 2
    global _requests
    timeout = config.timeout()
    said = rendezvous.exchange(MPI.COMM_WORLD, "papcoll run: settings",
                               (config.summary(), config.run_requests()),
                               Deadline(timeout))    # before the program's first message
    for i, name in enumerate(("PAPCOLL_SUMMARY", "PAPCOLL_RUN_REQUESTS")):
        if len({on[i] for on in said.values()}) > 1:
            raise ConfigError(f"{name} differs between ranks: set on "
                              f"{sorted(r for r, on in said.items() if on[i])}, not on "
                              f"{sorted(r for r, on in said.items() if not on[i])}")
    private = None
    summary_on, _requests = said[MPI.COMM_WORLD.Get_rank()]
    if summary_on:
        _stats = defaultdict(lambda: [0, 0, 0.0, Counter()])
        private = rendezvous.dup(MPI.COMM_WORLD, timeout)
    route()
    try:
        run_command_line(args)
    except SystemExit as exc:
        set_abort_status(exc)
        if exc.code not in (None, 0):
            context.abandon_all()    # the abort comes at exit: nothing may wait before it
            raise
    except BaseException as exc:     # as python -m mpi4py: an uncaught error aborts the job
        set_abort_status(exc if isinstance(exc, KeyboardInterrupt) else 1)
        context.abandon_all()
        raise
    if private is not None and not MPI.Is_finalized():
        text = summary(private, timeout)
        private.Free()
        if text:
            print(text, file=sys.stderr, flush=True)
    return 0
