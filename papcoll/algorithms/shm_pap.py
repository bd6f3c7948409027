"""``shm_pap``: PAP-aware alltoall inside a node, copy-based through the node board (calls
of up to 256 KiB per process by default; see policy.py).

Board (node/board.py): per process a post (flag, signatures) and a data region of two banks
x n slots; slot [bank][q] of process p holds p's block for q. A call:

1. **post**: copy my blocks for the others into bank ``epoch % 2`` of my region, store my
   call's signature, then raise my flag to the epoch (release). That is my arrival signal; no
   message is sent.
2. **collect**: copy my block out of every other process's region as soon as its flag shows
   the epoch -- and its signature is mine --, in arrival order, starting at my successor; my
   own block goes straight from the send to the receive buffer. Both steps are one native
   call.

Why two banks and no acknowledgement: I overwrite bank b again only in epoch e + 2. To finish
epoch e + 1 I must have copied q's block of epoch e + 1 (every exchange on the board is full),
which q posts only after it has finished epoch e -- including its copy out of my bank b. So
when I start e + 2 nobody still reads my epoch-e bank; meanwhile e + 1 goes to the other bank.
The flag only grows, so a flag >= e (q may already be in e + 1) still means q's bank
``e % 2`` holds epoch e. The signature words are banked the same way, by the same argument.

MPI.IN_PLACE needs no copy: all my blocks are posted before any incoming block overwrites them.
Blocks larger than a slot go in slot-sized pieces, each piece one epoch, the same protocol:
the slots stay in cache, but every piece waits for every process (policy.py: where that
wins). Every piece carries the signature of the whole call, so calls that disagree on the
size are caught at the first piece; a call of empty blocks is one piece of none (its peers still see it).

The plan: once a call has gone through papcoll's full checks, calls of the same shape skip
Python altogether (native/papcoll_call.c): for small blocks the Python steps around the
exchange cost more than the exchange.
"""
from .. import native
from .intranode import IntraNodeAlgorithm
from .registry import register


@register("shm_pap", "PAP-aware intra-node alltoall copying through a shared segment "
                     "(small and mid-size calls)")
class ShmPap(IntraNodeAlgorithm):
    def __init__(self, ctx):
        super().__init__(ctx)
        board = self.board
        self.slot = board.slot
        self.loops = native.SegmentLoops(board.posts, self.me, board.segment.regions,
                                         board.segment.region_stride, board.slot, board.epoch,
                                         batch=1 if self.tracing else None)

    def alltoall(self, send, recv):
        self.start_call()
        source = recv.data if send is None else send.data
        block, sig = recv.block, self.signature(recv.block)
        for offset in range(0, max(block, 1), self.slot):
            self.exchange(source[offset:], recv.data[offset:], block,
                          min(self.slot, block - offset), sig)

    def plan(self, sendbuf, recvbuf, recv):
        if self.tracing:
            return None
        plan = native.Plan.segment(self, self.loops, self.start, self.ctx.timeout, native.SLICE)
        return plan if plan.bind(sendbuf, recvbuf, recv, self.signature(recv.block)) else None

    def plan_failed(self, plan, rc):
        loops = self.loops
        if rc == native.EPROTO:
            err = loops.mismatch(loops.failed, int(loops.epoch[0]), plan.s.sig)
            raise self.mismatch(self.ranks[err.peer], err.theirs, err.mine)
        raise self.timeout("waiting for peers' posts", self.board.user_ranks(loops.missing()))

    def exchange(self, source, dest, block, length, sig):
        """One epoch: post ``length`` bytes of each block of ``source`` (blocks ``block`` bytes
        apart), then collect as many into ``dest`` as peers post theirs: one native call does
        both (more only to wait past a slice, or when tracing serves one peer per call)."""
        loops = self.loops
        epoch = loops.next_epoch()                # the board's counter, the plans' too
        self.serve(loops, lambda start, timeout: loops.exchange(
            source, dest, block, length, epoch, sig, start, timeout), "waiting for peers' posts",
            epoch, posts=True)

    def close(self, collective=True):
        self.drop_plans()
        self.loops = None
