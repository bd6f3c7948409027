"""``mpi``: the MPI library's own MPI_Alltoall, the baseline every benchmark compares against.

When the policy leaves a call to MPI, papcoll must cost next to nothing on top of it. The full
path (parse the buffer specs, choose, check) costs tens of microseconds of Python, as much as
a small MPI_Alltoall itself; so after one full call a lane takes the next calls of the same
shape straight to MPI_Alltoall from C (``mlane_alltoall``, native/papcoll_lane.c), with the
checks that decide the route -- the same shape rules as every lane's -- and nothing else.
"""
from mpi4py import MPI

from ..buffers import lane_shape
from ..native import xport
from ..trace import NoTrace
from .registry import Algorithm, register


@register("mpi", "the MPI library's own MPI_Alltoall (baseline; waits are MPI's, not bounded)")
class MpiAlltoall(Algorithm):
    def __init__(self, ctx):
        super().__init__(ctx)
        self.lanes = {}                  # algorithm= value -> its lane (xport.MLane)

    def alltoall(self, send, recv):
        recvspec = [recv.data, recv.block, MPI.BYTE]
        sendspec = MPI.IN_PLACE if send is None else [send.data, send.block, MPI.BYTE]
        self.ctx.comm.Alltoall(sendspec, recvspec)

    def lane(self, key, sendbuf, recvbuf, recv):
        if not isinstance(self.ctx.trace, NoTrace):     # a traced call is recorded in full
            return None
        shape = lane_shape(sendbuf, recvbuf, recv)
        if shape is None:
            return None
        lane = self.lanes.get(key) or self.lanes.setdefault(key, xport.MLane(self.ctx.comm))
        return lane if lane.arm(recv.data.nbytes, **shape) else None

    def lane_failed(self, lane, rc):
        raise MPI.Exception(-rc)

    def close(self, collective=True):
        for lane in self.lanes.values():
            lane.disarm()
        self.lanes.clear()
