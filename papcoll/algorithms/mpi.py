"""``mpi``: the MPI library's own MPI_Alltoall (and Alltoallv, Alltoallw), the baseline every
benchmark compares against.

When the policy leaves a call to MPI, papcoll must cost next to nothing on top of it. The full
path (parse the buffer specs, choose, check) costs tens of microseconds of Python, as much as
a small MPI_Alltoall itself; so after one full call a plan takes the next calls of the same
shape straight to MPI_Alltoall from C (native/papcoll_call.c), with the checks that decide the
route -- the same shape rules as every plan's -- and nothing else.
"""
from mpi4py import MPI

from ..native import Plan
from ..trace import NoTrace
from .registry import Algorithm, register


@register("mpi", "the MPI library's own MPI_Alltoall (baseline; waits are MPI's, not bounded)")
class MpiAlltoall(Algorithm):
    def alltoall(self, send, recv):
        recvspec = [recv.data, recv.block, MPI.BYTE]
        sendspec = MPI.IN_PLACE if send is None else [send.data, send.block, MPI.BYTE]
        self.ctx.comm.Alltoall(sendspec, recvspec)

    variable = True

    def alltoallv(self, send, recv, specs):
        w, sendbuf, recvbuf = specs
        (self.ctx.comm.Alltoallw if w else self.ctx.comm.Alltoallv)(sendbuf, recvbuf)

    def plan(self, key, sendbuf, recvbuf, recv):
        if not isinstance(self.ctx.trace, NoTrace):     # a traced call is recorded in full
            return None
        plan = self.plans.get(key) or self.plans.setdefault(key, Plan.mpi(self, self.ctx.comm))
        return plan if plan.bind(sendbuf, recvbuf, recv) else None

    def plan_failed(self, plan, rc):
        raise MPI.Exception(-rc)
