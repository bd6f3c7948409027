"""Deliberately wrong algorithms, registered only by the harness self-test (PAPCOLL_TEST_BROKEN=1):
the matrix must fail for each of them, or it could not catch the bug it names."""
from mpi4py import MPI

from papcoll.algorithms import Algorithm, register


class _ViaMpi(Algorithm):
    def exchange(self, send, recv):
        src = recv.data.copy() if send is None else send.data
        self.ctx.comm.Alltoall([src, recv.block, MPI.BYTE], [recv.data, recv.block, MPI.BYTE])


@register("broken_misroute", "swaps the blocks for two peers")
class Misroute(_ViaMpi):
    def alltoall(self, send, recv):
        self.exchange(send, recv)
        if self.ctx.size > 1:
            a, b = recv.block_of(0).copy(), recv.block_of(1).copy()
            recv.block_of(0)[:], recv.block_of(1)[:] = b, a


@register("broken_stale", "hands out the previous call's block from one peer")
class Stale(_ViaMpi):
    previous = None

    def alltoall(self, send, recv):
        self.exchange(send, recv)
        last = recv.block_of(self.ctx.size - 1)
        fresh = last.copy()
        if self.previous is not None and len(self.previous) == len(last):
            last[:] = self.previous
        self.previous = fresh


@register("broken_in_place", "ignores MPI.IN_PLACE and sends zeros")
class InPlace(_ViaMpi):
    def alltoall(self, send, recv):
        if send is None:
            recv.data[:] = 0
        self.exchange(send, recv)


