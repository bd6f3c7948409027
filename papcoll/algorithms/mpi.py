"""``mpi``: the MPI library's own MPI_Alltoall (and Alltoallv, Alltoallw), the baseline every
benchmark compares against.

When the policy leaves a call to MPI, papcoll must cost next to nothing on top of it. The full
path (parse the buffer specs, choose, check) costs tens of microseconds of Python, as much as
a small MPI_Alltoall itself; so after one full call a plan takes the next calls of the same
shape straight to MPI_Alltoall from C (native/papcoll_call.c), with the checks that decide the
route -- the same shape rules as every plan's -- and nothing else.
"""
from mpi4py import MPI

from .. import progress
from ..errors import PapcollTimeoutError
from ..native import Plan
from ..native.plan import MPI_ALLTOALL, MPIW
from ..trace import NoTrace
from ..transport import base
from .registry import Algorithm, register


@register("mpi", "the MPI library's own MPI_Alltoall (baseline; waits are MPI's, not bounded)")
class MpiAlltoall(Algorithm):
    def alltoall(self, send, recv):
        self.ctx.comm.Alltoall(*self.specs(send, recv))

    variable = nonblocking = True

    def alltoallv(self, send, recv, specs):
        w, sendbuf, recvbuf = specs
        (self.ctx.comm.Alltoallw if w else self.ctx.comm.Alltoallv)(sendbuf, recvbuf)

    def start(self, send, recv, persistent=None):
        return self._begin(None, self.specs(send, recv), persistent)

    def startv(self, send, recv, specs, persistent=None):
        w, sendbuf, recvbuf = specs
        return self._begin(w, (sendbuf, recvbuf), persistent)

    def _begin(self, w, specs, kept):
        """MPI's nonblocking call of these specs -- Ialltoall (``w`` None), Ialltoallv or
        Ialltoallw -- or for a persistent request (``kept``) MPI's own, made at its first
        start."""
        comm = self.ctx.comm
        begin, init = ((comm.Ialltoall, comm.Alltoall_init) if w is None else
                       (comm.Ialltoallw, comm.Alltoallw_init) if w else
                       (comm.Ialltoallv, comm.Alltoallv_init))
        if kept is None:
            return Started(begin(*specs))
        if kept.request is None:
            kept.request = init(*specs)
        kept.request.Start()
        return Started(kept.request, kept)

    @staticmethod
    def specs(send, recv):
        recvspec = [recv.data, recv.block, MPI.BYTE]
        return MPI.IN_PLACE if send is None else [send.data, send.block, MPI.BYTE], recvspec

    def plan(self, sendbuf, recvbuf, recv):
        if not isinstance(self.ctx.trace, NoTrace):     # a traced call is recorded in full
            return None
        plan = Plan.mpi(self, self.ctx.comm)
        return plan if plan.bind(sendbuf, recvbuf, recv) else None

    def planv(self, sendbuf, recvbuf, send, recv):
        # In place, send (a private copy) has no shape: the plan passes MPI_IN_PLACE.
        if (not isinstance(self.ctx.trace, NoTrace) or recv.shape is None
                or sendbuf is not MPI.IN_PLACE and (send.shape is None or isinstance(
                    send.shape[3], list) != isinstance(recv.shape[3], list))):
            return None
        try:
            plan = Plan.alltoallv(self, (send, recv), comm=self.ctx.comm)
        except OverflowError:         # counts or displacements beyond MPI's ints
            return None
        return plan if plan.bindv(sendbuf, recvbuf) else None

    def plan_failed(self, plan, rc):
        raise MPI.Exception(-rc)

    def started(self, plan, rc, sendbuf, recvbuf, kept=None):
        """MPI's nonblocking call (or a persistent request's own) with the specs the full
        path gives it: an Alltoall's in bytes, as :meth:`specs`."""
        kind = plan.s.kind
        if kind != MPI_ALLTOALL:
            return self._begin(kind == MPIW, (sendbuf, recvbuf), kept)
        count = plan.s.nbytes // plan.s.n

        def data(spec):
            return [spec[0] if plan.s.datatype else spec, count, MPI.BYTE]
        send = MPI.IN_PLACE if sendbuf is MPI.IN_PLACE else data(sendbuf)
        return self._begin(None, (send, data(recvbuf)), kept)


class Started:
    """A call MPI runs on (an MPI request; ``kept``: the Persistent whose request it is):
    progressed, as MPI's always are, by MPI's own Test and Wait (unbounded, like the blocking
    call's waits, unless a deadline is given)."""

    def __init__(self, request, kept=None):
        self.request, self.kept = request, kept

    def test(self):
        return self.request.Test()

    def wait(self, deadline=None):
        """MPI's Wait; with ``deadline`` (close's, or the next call's for a dropped request)
        Test polled until then, and at the deadline a PapcollTimeoutError."""
        if deadline is None:
            return self.request.Wait()
        done = progress.polled(lambda: progress.DONE if self.request.Test() else progress.IDLE)
        if not progress.wait(done, deadline, None):
            self.abandon()
            raise PapcollTimeoutError("mpi: MPI's nonblocking alltoall", None, deadline.timeout)

    def abandon(self):
        """Left unfinished: MPI may still write into the buffers, which its request holds, so
        the request is kept until the process ends, never freed (freeing an active collective
        request is erroneous)."""
        base.keep(self.request)
        if self.kept is not None:
            self.kept.request = None
