"""``pap_direct``: the process-arrival-pattern aware Direct (Qian & Afsahi, section 4).

Two schemes; processes learn who has arrived from the data path, never from control messages:

* **zero-copy** (large blocks): each process exposes its receive buffer and advertises it into
  every peer's ADVERTS record; the advertisement is the arrival signal. A sender scans its
  advertisements from rank+1 on and writes its block straight into every peer that has
  advertised, then waits for the rest -- never for one peer while another is ready.
* **copy-based** (small blocks): a sender writes into its slot of the receiver's inbox (bank =
  epoch parity), which needs no advertisement. Data found in my inbox from q means q has
  arrived, so I serve q first: send to it and copy its block out. Idle time goes to writing
  to peers not yet seen, since those writes cannot block.

``pap_direct`` picks the scheme by block size: copy-based up to ``PAPCOLL_COPY_THRESHOLD``
bytes, by default the transport's measured ``copy_threshold`` capped so the inbox stays within
``INBOX_LIMIT``; ``pap_direct_zcopy`` and ``pap_direct_copy`` force one, for benchmarks.
"""
from .. import config
from ..transport import transport_class
from ..transport.base import DATA, INBOX
from .onesided import OneSidedAlgorithm
from .registry import register

INBOX_LIMIT = 64 << 20   # bytes of inbox (2 banks x N slots) a process may hold by default


def copy_threshold(transport, size):
    chosen = config.copy_threshold()
    if chosen is not None:
        return chosen
    return min(transport.copy_threshold, INBOX_LIMIT // (2 * size))


@register("pap_direct", "PAP-aware Direct: copy-based for small blocks, zero-copy for large")
class PapDirect(OneSidedAlgorithm):
    def __init__(self, ctx):
        self.slot = copy_threshold(transport_class(), ctx.size)
        super().__init__(ctx)

    def alltoall(self, send, recv):
        self.begin()
        if recv.block <= self.slot:
            self.copy_based(send, recv)
        else:
            self.zero_copy(send, recv)
        self.end()

    def zero_copy(self, send, recv):
        send = self.private_send(send, recv)
        self.advertise(recv)
        self.copy_own(send, recv, self.ctx.rank)
        unlanded = list(self.peers)
        data = self.transport.notices(DATA)

        def idle():                  # while peers are missing, note the blocks that land
            self.transport.notices(DATA)
            for peer in [p for p in unlanded if data[p] >= self.epoch]:
                unlanded.remove(peer)
                self.ctx.trace.event("received", peer)
            return False

        self.wait(self.peers, self.has_advertised, lambda peer: self.write_direct(peer, send),
                  "waiting for advertisements", idle=idle)
        self.wait_data(unlanded)

    def copy_based(self, send, recv):
        me, epoch = self.ctx.rank, self.epoch
        bank = epoch % 2
        source = send if send is not None else recv      # in place: a block is sent before
        unsent = list(self.peers)                         # the peer's block overwrites it
        data = self.transport.notices(DATA)

        def send_to(peer):
            self.transport.put(peer, INBOX, (bank * self.ctx.size + me) * self.slot,
                               source.block_of(peer), notice=(DATA, epoch))
            unsent.remove(peer)
            self.ctx.trace.event("sent", peer)

        def serve(peer):                                  # peer's data is here: it has arrived
            self.ctx.trace.event("seen", peer)
            if peer in unsent:
                send_to(peer)
            recv.block_of(peer)[:] = self.transport.inbox_slot(bank, peer)[:recv.block]
            self.ctx.trace.event("received", peer)

        def idle():                                       # nobody new: write to a late peer
            self.transport.notices(DATA)
            if unsent:
                send_to(unsent[0])
                return True
            return False

        self.copy_own(send, recv, me)
        self.wait(self.peers, lambda peer: data[peer] >= epoch, serve, "waiting for data",
                  idle=idle)


@register("pap_direct_zcopy", "PAP-aware Direct, zero-copy scheme at every size")
class PapDirectZeroCopy(PapDirect):
    def alltoall(self, send, recv):
        self.begin()
        self.zero_copy(send, recv)
        self.end()


@register("pap_direct_copy", "PAP-aware Direct, copy-based scheme at every size")
class PapDirectCopy(PapDirect):
    def alltoall(self, send, recv):
        if recv.block > self.slot:      # every rank sees the same block size: grow together
            self.transport.close()
            self.slot = recv.block
            self.transport = self.open()
        self.begin()
        self.copy_based(send, recv)
        self.end()
