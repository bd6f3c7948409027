"""What the algorithms written on the one-sided transport share: the transport, the calls'
sequence numbers, advertising the receive buffer, and waiting for peers' data.

Every algorithm instance counts its own calls (``epoch``, from 1: the sequence number of its
DATA notices, one per call and peer) and its own zero-copy calls (``adverts``: the sequence of
its ADVERT notices), and owns its own transport, so notices of different algorithms never mix.
Every call of an instance is a full exchange, so no process is ever more than one call ahead
of a peer: two banks of notice words and of inbox slots, and one advert record per peer,
suffice (transport/base.py).

Agreement: a notice is current when its sequence number is the one expected; it must then
equal, word for word, the notice this rank's own call would send (same signature code, same
length). An advert record carries the advertiser's whole signature, and a sender writes into
an advertised buffer only when that signature is its own: a peer whose call differs gets a
MismatchError here and there, and no byte lands outside the buffer it was meant for.
"""
import numpy as np

from .. import rendezvous, signature
from ..buffers import Message
from ..errors import PapcollTimeoutError
from ..progress import Deadline, serve_as_ready
from ..transport import open_transport
from ..transport.base import (ADVERT, ADVERT_BYTES, ADVERT_RECORD, ADVERTS, DATA, DESCRIPTOR,
                              SEQ_MASK, code_of, length_of, notice_word, seq_of)
from .registry import Algorithm, describe


def successors(rank, size):
    """Peers in the order rank serves them: (rank + i) mod size for i = 1 .. size-1."""
    return [(rank + i) % size for i in range(1, size)]


class OneSidedAlgorithm(Algorithm):
    slot = 0   # inbox slot bytes this algorithm needs; subclasses that copy through it set it

    def __init__(self, ctx):
        super().__init__(ctx)
        self.epoch = self.adverts = 0
        self.peers = successors(ctx.rank, ctx.size)
        self.transport = self.open(Deadline(ctx.timeout))

    def open(self, deadline):
        """Collective: a transport of my own, with inbox slots of ``self.slot`` bytes."""
        return open_transport(self.ctx.comm, self.slot, deadline)

    def close(self, collective=True):
        self.transport.close(collective)

    def begin(self, block, scheme=""):
        """A call begins: its deadline, sequence number and signature."""
        self.epoch += 1
        self.deadline = Deadline(self.ctx.timeout)
        self.sig = self.signature(block, scheme)
        self.data = self.transport.board(DATA, self.epoch % 2)   # live: polls update it
        self.expected = notice_word(self.epoch, self.codes[scheme], block)

    def end(self):
        self.transport.complete()

    # ---- notices -----------------------------------------------------------------------------

    def landed(self, peer):
        """Whether ``peer``'s block of this call has landed (a notice of another call shape
        raises MismatchError)."""
        word = int(self.data[peer])
        if seq_of(word) != self.epoch & SEQ_MASK:
            return False
        if word != self.expected:
            raise self.mismatch(peer, signature.make(code_of(word), length_of(word)), self.sig)
        return True

    def advertise(self, recv):
        """Expose my receive buffer and tell every peer where it is, for which call and
        signature: my arrival signal."""
        self.adverts += 1
        self.advert_board = self.transport.board(ADVERT, self.adverts % 2)
        record = ADVERT_RECORD.pack(*DESCRIPTOR.unpack(self.transport.expose(recv.data)),
                                    self.epoch, self.sig)
        source = np.frombuffer(record, np.uint8)
        notice = (ADVERT, self.adverts, signature.code_of(self.sig))
        for peer in self.peers:
            self.transport.put(peer, ADVERTS, self.ctx.rank * ADVERT_BYTES, source, notice=notice)

    def has_advertised(self, peer):
        """Whether ``peer`` advertised for this call; its record must be for my call shape."""
        if seq_of(int(self.advert_board[peer])) != self.adverts & SEQ_MASK:
            return False
        self.descriptor(peer)      # checks it
        return True

    def descriptor(self, peer):
        """The descriptor ``peer`` advertised for this call, after checking its signature."""
        *where, epoch, sig = ADVERT_RECORD.unpack(self.transport.advert(peer))
        if sig != self.sig or epoch != self.epoch:
            raise self.mismatch(peer, sig, self.sig)
        return DESCRIPTOR.pack(*where)

    def advertised_ahead(self, peer):
        """Whether ``peer`` advertised for a zero-copy call while this call advertises nothing
        (its call differs: MismatchError)."""
        ahead = self.adverts + 1
        if seq_of(int(self.transport.board(ADVERT, ahead % 2)[peer])) != ahead & SEQ_MASK:
            return False
        raise self.mismatch(peer, ADVERT_RECORD.unpack(self.transport.advert(peer))[-1],
                            self.sig)

    # ---- writing and waiting -----------------------------------------------------------------

    def write_direct(self, peer, send):
        """Write my block for ``peer`` straight into the buffer ``peer`` advertised."""
        self.transport.put(peer, self.descriptor(peer), self.ctx.rank * send.block,
                           send.block_of(peer), notice=self.notice())
        self.ctx.trace.event("sent", peer)

    def notice(self):
        return DATA, self.epoch, signature.code_of(self.sig)

    def wait_data(self, pending, on_landed=None):
        """Wait until the blocks of ``pending`` peers have landed, handling each as it does."""
        def landed(peer):
            if on_landed is not None:
                on_landed(peer)
            self.ctx.trace.event("received", peer)

        self.wait(pending, self.landed, landed, "waiting for data")

    def wait(self, pending, ready, serve, what, idle=None):
        if idle is None:
            def idle():
                self.transport.poll()      # drives progress of writes into my memory
                return False
        try:
            serve_as_ready(pending, ready, serve, self.deadline, f"{self.name} {what}", idle=idle,
                           check=lambda still: rendezvous.elsewhere(
                               self.ctx.comm, still, int, f"{describe(self.sig)} ({what})",
                               lambda peer: self.transport.poll() or ready(peer)))
        except PapcollTimeoutError as err:   # those that gave up themselves are not the cause
            gave = rendezvous.gave_up(self.ctx.comm, err.missing)
            raise PapcollTimeoutError(f"{self.name} {what}",
                                      [q for q in err.missing if q not in gave], err.timeout,
                                      gave) from None

    def private_send(self, send, recv):
        """The send blocks, copied out of ``recv`` for MPI.IN_PLACE when peers write into it."""
        if send is not None:
            return send
        return Message(recv.data.copy(), recv.block, recv.count, recv.datatype)

    @staticmethod
    def copy_own(send, recv, rank):
        if send is not None:
            recv.block_of(rank)[:] = send.block_of(rank)
