"""``cma_pap``: PAP-aware alltoall inside a node with single-copy CMA reads (large blocks).

A call, on the node board (node/board.py; the CMA check and PIDs in node/cma.py):

1. **post**: publish my send buffer's address and my call's signature, then raise my flag to
   the epoch: my arrival signal.
2. **collect**: read my block out of every process's send buffer with process_vm_readv as
   soon as its flag shows the epoch, in arrival order from my successor (when all are there,
   step i reads from rank + i while rank - i reads from me: one reader per process, no
   page-table lock contention); after each read, raise my ACKS entry for that process. One
   native call. A process whose signature differs from mine is never read: its buffer may be
   shorter than the blocks I expect, and reading past it would disclose its memory. After the
   reads, a process that gave up in this call (an error ended it: it left without waiting for
   my acknowledgement, and its buffer may be the user's again) makes the call fail: it marked
   GAVE_UP before returning, so if any byte I read had changed, I see the mark. (One that gave
   up in a later call had my acknowledgement first.)
3. **release**: wait until every peer's ACKS entry for me shows the epoch. Only then may I
   return: the user may change the send buffer as soon as I do.

MPI.IN_PLACE: my outgoing block for q and q's block for me share one place in the buffer, and
neither of us can wait for the other to read first (each would wait forever). So I copy my
send blocks to a private buffer (kept between calls) and publish that instead.

Step 3 also makes a second epoch safe: nobody can still be reading my buffer of epoch e once I
publish the one of epoch e + 1, so one address per process is enough.
"""
import numpy as np

from .. import native, rendezvous
from .intranode import IntraNodeAlgorithm, spans_nodes
from .registry import register


@register("cma_pap", "PAP-aware intra-node alltoall, single-copy CMA reads (large)")
class CmaPap(IntraNodeAlgorithm):
    @classmethod
    def unsupported(cls, ctx):
        reason = spans_nodes(ctx)
        if reason is None and ctx.cma is not None and not ctx.cma.available:
            reason = f"CMA: unavailable: {ctx.cma.reason}"
        return reason

    def __init__(self, ctx):
        super().__init__(ctx)
        board = self.board
        self.loops = native.PeerLoops(board.posts, batch=1 if self.tracing else None)
        self.pids = ctx.cma.pids.copy()
        self.pids[self.me] = 0                        # my own block: a memcpy
        self.releases = native.PeerLoops(board.acks_for_me)
        self.everyone = np.ones(self.n, np.uint8)
        self.others = self.everyone.copy()
        self.others[self.me] = 0
        self.spare = np.empty(0, np.uint8)           # the private send copy for IN_PLACE

    def alltoall(self, send, recv):
        self.start_call()
        board = self.board
        epoch = board.next_epoch()
        block, sig = recv.block, self.signature(recv.block)
        if send is None:
            source = self.private_copy(recv.data)
            self.loops.expect(self.others)           # my own block is already in place
        else:
            source = send.data
            self.loops.expect(self.everyone)
        board.post(epoch, sig, native.buffer_address(source) if source.nbytes else 0)
        if self.tracing:
            self.trace_each("sent", range(self.n))
        self.serve(self.loops, lambda start, timeout: self.loops.cma_collect(
            epoch, sig, start, self.pids, self.me * block, recv.data, block, block,
            board.my_acks, timeout), "waiting for peers' buffers", epoch)
        gone = board.gave_up(range(self.n), self.ctx.calls)
        if gone:                # their buffers may have changed under my reads: not my data
            raise rendezvous.not_coming(self.ctx.comm, f"{self.name} (reading peers' buffers)",
                                        board.user_ranks(gone), board.user_ranks(gone), int)
        self.releases.expect(self.others)
        self.wait_all(self.releases, epoch, "waiting for peers to read my buffer")

    def private_copy(self, data):
        if self.spare.nbytes < data.nbytes:
            self.spare = np.empty(data.nbytes, np.uint8)
        spare = self.spare[:data.nbytes]
        np.copyto(spare, data)
        return spare

    def close(self, collective=True):
        self.loops = self.releases = None
