"""``mpi``: the MPI library's own MPI_Alltoall, the baseline every benchmark compares against."""
from mpi4py import MPI

from .registry import Algorithm, register


@register("mpi", "the MPI library's own MPI_Alltoall (baseline; waits are MPI's, not bounded)")
class MpiAlltoall(Algorithm):
    def alltoall(self, send, recv):
        recvspec = [recv.data, recv.block, MPI.BYTE]
        sendspec = MPI.IN_PLACE if send is None else [send.data, send.block, MPI.BYTE]
        self.ctx.comm.Alltoall(sendspec, recvspec)
