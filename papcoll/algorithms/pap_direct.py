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

The two schemes have signature codes of their own, so ranks whose block sizes fall on both
sides of the threshold see it: the copy-based side finds an advertisement for a zero-copy call
it is not making, the zero-copy side a DATA notice of the copy-based scheme. A copy-based rank
that finds a disagreement still writes to the peers it has not written to (its block fits its
slot at every peer, whatever theirs) before it raises, so that they see it as well.
"""
from .. import config, rendezvous
from ..errors import ConfigError, MismatchError
from ..progress import Deadline
from ..transport import transport_class
from ..transport.base import INBOX
from .onesided import OneSidedAlgorithm
from .registry import describe, register

INBOX_LIMIT = 64 << 20   # bytes of inbox (2 banks x N slots) a process may hold by default
MAX_INBOX = 1 << 30      # ... and at most, whatever PAPCOLL_COPY_THRESHOLD says


def copy_threshold(transport, size):
    chosen = config.copy_threshold()
    if chosen is None:
        return min(transport.copy_threshold, INBOX_LIMIT // (2 * size))
    if 2 * size * chosen > MAX_INBOX:
        raise ConfigError(f"PAPCOLL_COPY_THRESHOLD={chosen}: the inbox (2 banks x {size} slots of "
                          f"it) would take {2 * size * chosen} bytes; at most {MAX_INBOX}, so at "
                          f"most {MAX_INBOX // (2 * size)} with {size} processes")
    return chosen


@register("pap_direct", "PAP-aware Direct: copy-based for small blocks, zero-copy for large")
class PapDirect(OneSidedAlgorithm):
    schemes = ("copy-based", "zero-copy")

    def __init__(self, ctx):
        self.slot = copy_threshold(transport_class(), ctx.size)
        super().__init__(ctx)

    def alltoall(self, send, recv):
        if recv.block <= self.slot:
            self.copy_based(send, recv)
        else:
            self.zero_copy(send, recv)

    def zero_copy(self, send, recv):
        self.begin(recv.block, "zero-copy")
        send = self.private_send(send, recv)
        self.advertise(recv)
        self.copy_own(send, recv, self.ctx.rank)
        unlanded = dict.fromkeys(self.peers)

        def idle():                  # while peers are missing, note the blocks that land
            self.transport.poll()
            for peer in [p for p in unlanded if self.landed(p)]:
                del unlanded[peer]
                self.ctx.trace.event("received", peer)
            return False

        self.wait(self.peers, self.has_advertised, lambda peer: self.write_direct(peer, send),
                  "waiting for advertisements", idle=idle)
        self.wait_data(list(unlanded))
        self.end()

    def copy_based(self, send, recv):
        self.begin(recv.block, "copy-based")
        me, epoch, block = self.ctx.rank, self.epoch, recv.block
        bank = epoch % 2
        source = send if send is not None else recv       # in place: a block is sent before
        unsent = dict.fromkeys(self.peers)                 # the peer's block overwrites it
        waiting = dict.fromkeys(self.peers)
        notice = self.notice()

        def send_to(peer):
            self.transport.put(peer, INBOX, (bank * self.ctx.size + me) * self.slot,
                               source.block_of(peer), notice=notice)
            del unsent[peer]
            self.ctx.trace.event("sent", peer)

        def serve(peer):                                  # peer's data is here: it has arrived
            self.ctx.trace.event("seen", peer)
            if peer in unsent:
                send_to(peer)
            recv.block_of(peer)[:] = self.transport.inbox_slot(bank, peer)[:block]
            del waiting[peer]
            self.ctx.trace.event("received", peer)

        def idle():                                       # nobody new: write to a late peer
            self.transport.poll()
            if unsent:
                send_to(next(iter(unsent)))
                return True
            for peer in waiting:                          # or one that is in another call?
                self.advertised_ahead(peer)
            return False

        self.copy_own(send, recv, me)
        try:
            self.wait(self.peers, self.landed, serve, "waiting for data", idle=idle)
        except MismatchError:
            for peer in list(unsent):                     # so that every peer sees it too:
                send_to(peer)                             # these writes wait for nobody
            raise
        self.end()


@register("pap_direct_zcopy", "PAP-aware Direct, zero-copy scheme at every size")
class PapDirectZeroCopy(PapDirect):
    schemes = ("zero-copy",)

    def alltoall(self, send, recv):
        self.zero_copy(send, recv)


@register("pap_direct_copy", "PAP-aware Direct, copy-based scheme at every size")
class PapDirectCopy(PapDirect):
    schemes = ("copy-based",)

    def alltoall(self, send, recv):
        if recv.block > self.slot:      # every rank sees the same block size: grow together
            deadline = Deadline(self.ctx.timeout)
            rendezvous.agree(self.ctx.comm, f"{describe(self.signature(recv.block, 'copy-based'))}"
                                            f": growing the inbox", deadline)
            self.transport.close()
            self.slot = recv.block
            self.transport = self.open(deadline)
        self.copy_based(send, recv)
