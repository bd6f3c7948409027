"""``mpi``: the MPI library's own MPI_Alltoall, the baseline every benchmark compares against.

When the policy leaves a call to MPI, papcoll must cost next to nothing on top of it. The full
path (parse the buffer specs, choose, check) costs tens of microseconds of Python, as much as
a small MPI_Alltoall itself; so after one full call the ``Lane`` takes the next calls of the
same shape straight to MPI_Alltoall, with the checks that decide the route and nothing else.
"""
import numpy as np
from mpi4py import MPI

from ..buffers import lane_shape
from ..trace import NoTrace
from .registry import Algorithm, register


@register("mpi", "the MPI library's own MPI_Alltoall (baseline; waits are MPI's, not bounded)")
class MpiAlltoall(Algorithm):
    def alltoall(self, send, recv):
        recvspec = [recv.data, recv.block, MPI.BYTE]
        sendspec = MPI.IN_PLACE if send is None else [send.data, send.block, MPI.BYTE]
        self.ctx.comm.Alltoall(sendspec, recvspec)

    def lane(self, key, sendbuf, recvbuf, recv):
        if not isinstance(self.ctx.trace, NoTrace):     # a traced call is recorded in full
            return None
        shape = lane_shape(sendbuf, recvbuf, recv)
        return None if shape is None else Lane(self.ctx.comm, recv.data.nbytes, **shape)


class Lane:
    """Calls whose buffers have the armed shape (lane_shape: plain buffers of the armed format,
    or ``[buf, datatype]`` specs naming the armed datatype; C-contiguous, the armed length;
    sendbuf may be IN_PLACE), the receive buffer writable and the two apart: exactly what the
    full path checked before it chose MPI for this length, so the same route. Anything else
    declines (returns 0) untouched, and the full path parses it and explains any error."""

    def __init__(self, comm, nbytes, buffer_format=None, itemsize=0, datatype=None):
        self.comm, self.nbytes = comm, nbytes
        self.format, self.itemsize, self.datatype = buffer_format, itemsize, datatype

    def run(self, sendbuf, recvbuf):
        recv, rdata = self._view(recvbuf)
        if recv is None or recv.readonly:
            return 0
        if sendbuf is MPI.IN_PLACE:
            self.comm.Alltoall(MPI.IN_PLACE, [recv, MPI.BYTE])
            return 1
        send, sdata = self._view(sendbuf)
        if send is None or (self.nbytes and np.may_share_memory(sdata, rdata)):
            return 0
        self.comm.Alltoall([send, MPI.BYTE], [recv, MPI.BYTE])
        return 1

    def _view(self, spec):
        """(a memoryview of the buffer, the buffer) if ``spec`` has the armed shape, else
        (None, None)."""
        if self.datatype is not None:              # [buf, datatype]: the datatype says what
            if type(spec) not in (list, tuple) or len(spec) != 2 or spec[1] is not self.datatype:
                return None, None
            spec = spec[0]                         # the bytes are; the buffer's format not
        try:
            view = memoryview(spec)
        except TypeError:
            return None, None
        if view.nbytes != self.nbytes or not view.c_contiguous or (
                self.datatype is None and (view.format != self.format
                                           or view.itemsize != self.itemsize)):
            return None, None
        return view, spec
