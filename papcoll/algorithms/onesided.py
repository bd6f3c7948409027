"""What the algorithms written on the one-sided transport share: one :class:`Exchange`
(exchange.py, PAP Direct as a component) over the whole communicator, whose calls are Flights,
so they serve nonblocking and persistent calls too. ``direct`` and ``pap_direct`` are such."""
from ..buffers import Message
from ..native import xport
from ..progress import Deadline
from ..trace import NoTrace
from ..transport import open_transport
from . import plans
from .exchange import Exchange
from .registry import Algorithm


class OneSidedAlgorithm(Algorithm):
    """An algorithm that is one Exchange over the whole communicator; each call is a
    :class:`Flight`, so it serves nonblocking calls too (``start``)."""
    nonblocking = True

    def __init__(self, ctx):
        super().__init__(ctx)
        transport = open_transport(ctx.comm, self.inbox_bytes(ctx.size),
                                   Deadline(ctx.timeout), owner=self.name)
        self.exchange = Exchange(self, transport, range(ctx.size))

    def inbox_bytes(self, size):
        """Inbox bytes this algorithm needs (those that copy through it say how many)."""
        return 0

    def close(self, collective=True):
        self.exchange.transport.close(collective)

    def alltoall(self, send, recv):
        self.start(send, recv).wait()

    def scheme_of(self, block):
        """The scheme's name in the signature of a call of ``block`` bytes per peer if it is
        zero-copy (Direct's: ""), else None."""
        return ""

    def persistent_plan(self, sendbuf, recvbuf, send, recv, kept):
        """A persistent zero-copy request's own plan (plans.persistent), or None."""
        scheme = self.scheme_of(recv.block)
        if scheme is None or not isinstance(self.ctx.trace, NoTrace):
            return None
        return plans.persistent(
            self.exchange, self, xport.ZCOPY if self.pap else xport.STEP, sendbuf, recvbuf, send, recv,
            self.signature(recv.block, scheme), kept)

    def started(self, plan, rc, sendbuf, recvbuf, kept=None):
        """The engine made one pass (rc): the call done, or its Flight from there."""
        return self.exchange.flight_of(plan, rc)

    def zero_copy(self, send, recv, scheme="", persistent=None):
        """Direct's zero-copy scheme, PAP-aware or in step order (``direct``): advertise my
        receive buffer, write into every peer's as soon as it has advertised, wait for the
        data; the blocks that land while peers are missing are noted as they do. Returns the
        call's Flight."""
        x = self.exchange
        x.begin(self.signature(recv.block, scheme))
        send = self.private_send(send, recv)
        self.copy_own(send, recv, x.rank)
        return x.launch(xport.ZCOPY if self.pap else xport.STEP, recv.block, send, recv,
                        persistent=persistent)

    @staticmethod
    def private_send(send, recv):
        """The send blocks, copied out of ``recv`` for MPI.IN_PLACE when peers write into it."""
        if send is not None:
            return send
        return Message(recv.data.copy(), recv.block, recv.count, recv.datatype)

    @staticmethod
    def copy_own(send, recv, rank):
        if send is not None:
            recv.block_of(rank)[:] = send.block_of(rank)
