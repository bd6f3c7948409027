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

from .. import native
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
        self.read_by_cma()
        self.everyone = np.ones(self.n, np.uint8)

    def alltoall(self, send, recv):
        self.start_call()
        board = self.board
        epoch = board.next_epoch()
        block, sig = recv.block, self.signature(recv.block)
        source = self.private_copy(recv.data) if send is None else send.data
        board.post(epoch, sig, native.buffer_address(source) if source.nbytes else 0)
        if self.tracing:
            self.trace_each("sent", range(self.n))
        self.cma_read(epoch, sig, self.others if send is None else self.everyone,
                      self.me * block, recv.data, block, block,   # my own is in place already
                      "waiting for peers' buffers")
        self.cma_release(epoch)

    def close(self, collective=True):
        self.reads = self.releases = None
