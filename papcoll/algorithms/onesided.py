"""What the algorithms written on the one-sided transport share: the transport, the epoch,
advertising the receive buffer, and waiting for peers' data.

Every algorithm instance counts its own calls (its epoch, starting at 1) and owns its own
transport, so notices of different algorithms never mix. Every call of an instance is a full
exchange, so no process is ever two epochs ahead of a peer: two inbox banks (epoch parity) and
one advert record per peer suffice.
"""
import numpy as np

from ..buffers import Message
from ..progress import Deadline, serve_as_ready
from ..transport import open_transport
from ..transport.base import ADVERT, ADVERTS, DATA, DESCRIPTOR_BYTES
from .registry import Algorithm


def successors(rank, size):
    """Peers in the order rank serves them: (rank + i) mod size for i = 1 .. size-1."""
    return [(rank + i) % size for i in range(1, size)]


class OneSidedAlgorithm(Algorithm):
    slot = 0   # inbox slot bytes this algorithm needs; subclasses that copy through it set it

    def __init__(self, ctx):
        super().__init__(ctx)
        self.epoch = 0
        self.peers = successors(ctx.rank, ctx.size)
        self.transport = self.open()

    def open(self):
        """Collective: a transport of my own, with inbox slots of ``self.slot`` bytes."""
        return open_transport(self.ctx.comm, self.slot)

    def close(self):
        self.transport.close()

    def begin(self):
        self.epoch += 1
        self.deadline = Deadline(self.ctx.timeout)
        self.adverts = self.transport.notices(ADVERT)   # live: the waits' idle steps update it
        return self.epoch

    def end(self):
        self.transport.complete()

    def advertise(self, recv):
        """Expose my receive buffer and tell every peer where it is: my arrival signal."""
        descriptor = np.frombuffer(self.transport.expose(recv.data), np.uint8)
        at = self.ctx.rank * DESCRIPTOR_BYTES
        for peer in self.peers:
            self.transport.put(peer, ADVERTS, at, descriptor, notice=(ADVERT, self.epoch))

    def write_direct(self, peer, send):
        """Write my block for ``peer`` straight into the buffer ``peer`` advertised."""
        self.transport.put(peer, self.transport.advert(peer), self.ctx.rank * send.block,
                           send.block_of(peer), notice=(DATA, self.epoch))
        self.ctx.trace.event("sent", peer)

    def has_advertised(self, peer):
        return self.adverts[peer] >= self.epoch

    def wait_data(self, pending, on_landed=None):
        """Wait until the blocks of ``pending`` peers have landed, handling each as it does."""
        data = self.transport.notices(DATA)

        def landed(peer):
            if on_landed is not None:
                on_landed(peer)
            self.ctx.trace.event("received", peer)

        self.wait(pending, lambda peer: data[peer] >= self.epoch, landed, "waiting for data")

    def wait(self, pending, ready, serve, what, idle=None):
        if idle is None:
            def idle():
                self.transport.notices(DATA)   # drives progress of writes into my memory
                return False
        serve_as_ready(pending, ready, serve, self.deadline, f"{self.name} {what}", idle=idle)

    def private_send(self, send, recv):
        """The send blocks, copied out of ``recv`` for MPI.IN_PLACE when peers write into it."""
        if send is not None:
            return send
        return Message(recv.data.copy(), recv.block, recv.count, recv.datatype)

    @staticmethod
    def copy_own(send, recv, rank):
        if send is not None:
            recv.block_of(rank)[:] = send.block_of(rank)
