"""``shm_pap``: PAP-aware alltoall inside a node, copy-based through the node segment (small
blocks; see policy.py).

Segment (transport/shm.py): per process one flag (its control page) and a data region of
two banks x n slots; slot [bank][q] of process p holds p's block for q. A call:

1. **post**: copy my n blocks into bank ``epoch % 2`` of my region, then raise my flag to the
   epoch (release). That is my arrival signal; no message is sent.
2. **collect**: copy my block out of every process's region (my own too) as soon as its flag
   shows the epoch, in arrival order, starting at my successor -- one native call.

Why two banks and no acknowledgement: I overwrite bank b again only in epoch e + 2. To finish
epoch e + 1 I must have copied q's block of epoch e + 1, which q posts only after it has
finished epoch e -- including its copy out of my bank b. So when I start e + 2 nobody still
reads my epoch-e bank; meanwhile e + 1 goes to the other bank. The flag only grows, so a flag
>= e (q may already be in e + 1) still means q's bank ``e % 2`` holds epoch e.

MPI.IN_PLACE needs no copy: all my blocks are posted before any incoming block overwrites them.
Blocks larger than a slot go in slot-sized pieces, each piece one epoch, the same protocol.
"""
from .. import native
from ..transport.shm import PAGE, Segment
from .intranode import IntraNodeAlgorithm
from .registry import register

SLOT_MAX = 64 << 10          # bytes; blocks above go in pieces (policy uses shm below that)
REGION_BUDGET = 4 << 20      # bytes of data region per process: two banks of n slots


def slot_bytes(n):
    """Slot size for n processes: SLOT_MAX while two banks of n slots fit REGION_BUDGET."""
    return max(PAGE, min(SLOT_MAX, REGION_BUDGET // (2 * n) // PAGE * PAGE))


@register("shm_pap", "PAP-aware intra-node alltoall copying through a shared segment (small)")
class ShmPap(IntraNodeAlgorithm):
    def __init__(self, ctx):
        super().__init__(ctx)
        n, me, slot = self.n, self.me, slot_bytes(self.n)
        self.slot = slot
        self.segment = Segment(self.local, 8, 2 * n * slot)
        self.flags = native.Flags(self.segment.words(0))
        self.loops = native.PeerLoops(self.flags, batch=1 if self.tracing else None)
        mine, regions = self.segment.region(me), self.segment.regions
        self.outbox = [native.Fixed(mine[bank * n * slot:(bank + 1) * n * slot], True)
                       for bank in (0, 1)]
        # My slot in every region, as the source of the copy-out: region q at q * stride.
        self.inbox = [native.Fixed(regions[(bank * n + me) * slot:]) for bank in (0, 1)]

    def alltoall(self, send, recv):
        self.start_call()
        source = recv.data if send is None else send.data
        block = recv.block
        if block <= self.slot:
            self.exchange(source, recv.data, block, block)
        else:
            for offset in range(0, block, self.slot):
                self.exchange(source[offset:], recv.data[offset:], block,
                              min(self.slot, block - offset))

    def exchange(self, source, dest, block, length):
        """One epoch: post ``length`` bytes of each block of ``source`` (blocks ``block`` bytes
        apart), then collect as many into ``dest`` as peers post theirs."""
        epoch = self.next_epoch()
        bank = epoch & 1
        native.post_blocks(source, block, self.outbox[bank], self.slot, length, self.n,
                           self.flags, self.me, epoch)
        if self.tracing:
            self.trace_each("sent", range(self.n))
        self.loops.expect_all()
        inbox, stride = self.inbox[bank], self.segment.region_stride
        self.serve(self.loops, lambda start, timeout: self.loops.collect_blocks(
            epoch, start, inbox, stride, dest, block, length, timeout), "waiting for peers' posts")

    def close(self):
        self.flags = self.loops = self.outbox = self.inbox = None
        self.segment.close()
