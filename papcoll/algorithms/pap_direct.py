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
from mpi4py import MPI

from .. import config, rendezvous
from ..trace import NoTrace
from ..errors import ConfigError
from ..progress import Deadline
from ..transport import open_transport, transport_class
from ..native import xport
from ..vbuffers import copy_own
from . import plans
from .exchange import Exchange
from .onesided import OneSidedAlgorithm
from .registry import describe, register

INBOX_LIMIT = 64 << 20   # bytes of inbox (2 banks x N slots) a process may hold by default
MAX_INBOX = 1 << 30      # ... and at most, whatever PAPCOLL_COPY_THRESHOLD says


def capped(threshold, size):
    """A transport's copy ``threshold`` as the default caps it for ``size`` processes: the
    inbox (2 banks x ``size`` slots) within INBOX_LIMIT (the model takes it too)."""
    return min(threshold, INBOX_LIMIT // (2 * size))


def scheme(block, slot):
    """The scheme for blocks of ``block`` bytes where the inbox's slot is ``slot``: zero-copy
    above it, copy-based (None) up to it (the model plays the same rule)."""
    return "zero-copy" if block > slot else None


def runs_with(block, slot):
    """What ``pap_direct`` runs for blocks of ``block`` bytes where the inbox's slot is
    ``slot``, by its scheme's own algorithm name (the model takes it too)."""
    return "pap_direct_copy" if scheme(block, slot) is None else "pap_direct_zcopy"


def runs_as(block, size):
    """What ``pap_direct`` runs for blocks of ``block`` bytes among ``size`` processes: the
    benchmark records it, so that validation counts two rows of one protocol as one
    algorithm."""
    return runs_with(block, copy_threshold(transport_class(), size))


def copy_threshold(transport, size):
    chosen = config.copy_threshold()
    if chosen is None:
        return capped(transport.copy_threshold, size)
    if 2 * size * chosen > MAX_INBOX:
        raise ConfigError(f"PAPCOLL_COPY_THRESHOLD={chosen}: the inbox (2 banks x {size} slots of "
                          f"it) would take {2 * size * chosen} bytes; at most {MAX_INBOX}, so at "
                          f"most {MAX_INBOX // (2 * size)} with {size} processes")
    return chosen


@register("pap_direct", "PAP-aware Direct: copy-based for small blocks, zero-copy for large")
class PapDirect(OneSidedAlgorithm):
    schemes = ("copy-based", "zero-copy", "variable")
    pap = True
    variable = True

    def __init__(self, ctx):
        self.slot = copy_threshold(transport_class(), ctx.size)
        super().__init__(ctx)

    def inbox_bytes(self, size):
        return 2 * size * self.slot              # two banks of a slot per peer

    def start(self, send, recv, persistent=None):
        scheme = self.scheme_of(recv.block)
        if scheme is not None:
            return self.zero_copy(send, recv, scheme, persistent)
        return self.copy_based(send, recv)

    def scheme_of(self, block):
        return scheme(block, self.slot)

    def copy_based(self, send, recv):
        """Write my block for q into my slot of q's inbox (bank = the call's parity); copy q's
        block out of its slot in mine once it has landed. Returns the call's Flight."""
        x = self.exchange
        x.begin(self.signature(recv.block, "copy-based"))
        # In place, q's block would overwrite my block for q, which a put may still be reading
        # (verbs reads its source after the post, until complete()): send from a copy.
        source = self.private_send(send, recv)
        self.copy_own(send, recv, x.rank)
        return x.launch(xport.COPY, recv.block, source, recv, self.slot)

    def alltoallv(self, send, recv, specs):
        self.startv(send, recv, specs).wait()

    def startv(self, send, recv, specs, persistent=None):
        """Alltoallv/w: each pair's block by the scheme its length picks, both ends alike:
        copy-based up to the slot, zero-copy above (Exchange.launch_var)."""
        x = self.exchange
        x.begin(self.signature(0, "variable"))
        send.pack()
        copy_own(send, recv, x.rank)
        return x.launch_var(send, recv, self.slot)

    def plan(self, sendbuf, recvbuf, recv):
        if not isinstance(self.ctx.trace, NoTrace) or recv.block > self.slot or not recv.block:
            return None
        sig = self.signature(recv.block, "copy-based")
        plan = plans.copy_based(self.exchange, self, recv.block, self.slot, sig)
        return plan if plan is not None and plan.bind(sendbuf, recvbuf, recv, sig) else None

    def planv(self, sendbuf, recvbuf, send, recv):
        if not isinstance(self.ctx.trace, NoTrace):
            return None
        sig = self.signature(0, "variable")
        plan = plans.variable(self.exchange, self, send, recv, self.slot, sig,
                              in_place=sendbuf is MPI.IN_PLACE)
        return plan if plan is not None and plan.bindv(sendbuf, recvbuf, sig) else None

    def plan_failed(self, plan, rc):
        self.exchange.resume(plan, rc)

    def close(self, collective=True):
        self.drop_plans()
        super().close(collective)


@register("pap_direct_zcopy", "PAP-aware Direct, zero-copy scheme at every size")
class PapDirectZeroCopy(PapDirect):
    schemes = ("zero-copy",)
    variable = False

    def inbox_bytes(self, size):
        return 0

    def scheme_of(self, block):
        return "zero-copy"

    def plan(self, sendbuf, recvbuf, recv):
        return None


@register("pap_direct_copy", "PAP-aware Direct, copy-based scheme at every size")
class PapDirectCopy(PapDirect):
    schemes = ("copy-based",)
    variable = nonblocking = False         # growing the inbox is a meeting

    def alltoall(self, send, recv):
        if recv.block > self.slot:      # every rank sees the same block size: grow together
            deadline = Deadline(self.ctx.timeout)
            rendezvous.agree(self.ctx.comm, f"{describe(self.signature(recv.block, 'copy-based'))}"
                                            f": growing the inbox", deadline)
            old = self.exchange
            self.drop_plans()
            old.transport.close()
            self.slot = recv.block
            self.exchange = Exchange(self, open_transport(self.ctx.comm,
                                                          self.inbox_bytes(self.ctx.size),
                                                          deadline, owner=self.name),
                                     range(self.ctx.size))
            self.exchange.epoch, self.exchange.adverts = old.epoch, old.adverts
        self.copy_based(send, recv).wait()
