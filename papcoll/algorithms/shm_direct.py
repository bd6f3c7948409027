"""``shm_direct`` and ``pap_shm_direct``: the hierarchical Direct of the PAP alltoall paper
(Qian & Afsahi, section 4.3) -- across nodes, small blocks.

A call moves its blocks in rounds of at most ``piece`` bytes per block (one round for the
small blocks these algorithms are for), each round in three phases:

1. **Gather** (not PAP-aware: a node's aggregate is complete only once every local process has
   contributed). Each process copies its blocks for the processes of its own node into its
   region of the node board, as shm_pap does, and its blocks for every remote node into its
   row of that node's aggregate, in the node's outbox; then it posts on the board (flag and
   call signature). One native call and the post.
2. **Masters.** Each node's master takes the local blocks meant for it as their posts arrive;
   once all are in, its node's aggregates are complete, and it writes one to every other
   master -- ppn x ppn' blocks -- straight into that node's inbound area: the masters'
   transport's inbox *is* the node segment, so nothing is copied twice on the receiving node.
   An Exchange (onesided.py) among the masters, copy-based (the inbound area is always ready:
   writes never wait), in arrival order for pap_shm_direct, in step order for shm_direct.
3. **Scatter.** ``shm_direct``: the master waits for every aggregate, then raises one done
   flag, and every local process copies its parts. ``pap_shm_direct``: one done flag per
   remote master, raised by my master as that master's aggregate lands (it hands its notice
   on); local processes copy their part of each as soon as its flag rises, in arrival order.
   One native call (the master, which must keep polling its transport, copies its own parts
   once its exchange is done).

Blocks between processes of one node never go through the master: other processes copy them
straight out of the poster's board region, as in shm_pap.

**Two banks**, by the round's parity, for the outbox and the inbound areas, and by the board
epoch's for the board regions (as in shm_pap: other algorithms' exchanges interleave on the
board). A round is a full exchange: nobody finishes round r before every process of every node has
posted round r. So a process that writes bank b again in round r + 2 has finished round r + 1,
which every process entered only after finishing round r -- including its copies out of bank
b. The done flags and the masters' notices carry the round, so a flag from round r - 2 is never
taken for round r.

**No zero-copy scheme in phase 2.** A remote master could only write straight into a local
process's own receive buffer through that process's registration, but its connection reaches
the master's address space alone; the node segment is the one memory that both the master's
connection and every local process can reach.

**Memory.** A piece is at most the board's slot, and at most what keeps a node's four areas
(2 banks of outbox, 2 of inbound, each ppn x (N - ppn) pieces) within SEGMENT_BUDGET. The
areas are one POSIX segment per node and algorithm instance (node/segment.py: bounded set-up,
nothing left in /dev/shm); the done flags live in the master's control page.
"""
import numpy as np
from mpi4py import MPI

from .. import native, rendezvous
from ..node.board import slot_bytes
from ..node.segment import LINE, Segment
from ..progress import Deadline
from ..transport import open_transport
from ..transport.base import keep
from .intranode import IntraNodeAlgorithm
from ..native import xport
from .onesided import Exchange, _Call
from .registry import register

SEGMENT_BUDGET = 64 << 20     # bytes of outbox and inbound areas per node, both banks
PIECE_ALIGN = 64              # pieces above this are multiples of a cache line
HEADER = 64                   # bytes before each aggregate: the sender's call signature


def piece_max(ppn, size):
    """The largest piece, the same on every node (their layouts must agree): within the board
    slot of the largest node, and within SEGMENT_BUDGET for the node with the most remote
    traffic (ppn processes each writing a piece to every remote process, 2 areas x 2 banks)."""
    piece = max(1, min(slot_bytes(max(ppn)),
                       SEGMENT_BUDGET // max(1, 4 * max(p * (size - p) for p in ppn))))
    return piece - piece % PIECE_ALIGN if piece > PIECE_ALIGN else piece


class Layout:
    """Where aggregates sit in every node's outbox and inbound areas: node k's areas hold one
    place per remote node r, in node order, each a HEADER (the sender's call signature) and
    then ppn_k x ppn_r pieces of up to ``piece_max`` bytes (rows: node k's processes in the
    outbox, node r's in the inbound area). Places are sized for the largest piece, so they lie
    where every rank expects them whatever the block size of its call: a disagreement is read
    in the header, never in another call's blocks."""

    def __init__(self, ppn, piece_max):
        self.ppn, self.piece_max = ppn, piece_max
        self.prefix = np.concatenate([[0], np.cumsum(ppn)]).tolist()

    def at(self, node, other):
        """Offset, in a bank of ``node``'s area, of its place for (outbox) or from (inbound)
        node ``other``."""
        before = self.prefix[other] - (self.ppn[node] if node < other else 0)
        nodes_before = other - (1 if node < other else 0)
        return self.ppn[node] * before * self.piece_max + nodes_before * HEADER

    def bank(self, node):
        """The bytes of one bank of ``node``'s outbox, or of its inbound area."""
        others = self.prefix[-1] - self.ppn[node]
        return self.ppn[node] * others * self.piece_max + (len(self.ppn) - 1) * HEADER

    def size(self, node, other, piece):
        """The bytes an aggregate of pieces of ``piece`` bytes, header included, takes."""
        return HEADER + self.ppn[node] * self.ppn[other] * piece


@register("shm_direct", "hierarchical Direct: node gather, Direct among masters, one done flag")
class ShmDirect(IntraNodeAlgorithm):
    pap = False

    @classmethod
    def unsupported(cls, ctx):
        if len(ctx.topology.nodes) == 1:
            return ("hierarchical, and this communicator is one node: use shm_pap or cma_pap "
                    "(the policy does)")
        return None

    def __init__(self, ctx):
        super().__init__(ctx)
        topo = ctx.topology
        self.nodes, self.k = topo.nodes, topo.node
        self.ppn = [len(ranks) for ranks in self.nodes]
        self.remote = [r for r in range(len(self.nodes)) if r != self.k]
        self.masters = topo.masters          # master of node r: masters[r], in the masters' comm r
        self.master = self.me == 0
        self.piece_max = piece_max(self.ppn, topo.size)
        self.layout = Layout(self.ppn, self.piece_max)
        bank = self.layout.bank(self.k)
        deadline = Deadline(ctx.timeout)
        self.segment = Segment(ctx.comm, (len(self.nodes) + 1) * LINE, 0, deadline, self.ranks,
                               shared_bytes=4 * bank)
        shared = self.segment.shared
        self.outbox, self.inbound = shared[:2 * bank], shared[2 * bank:4 * bank]
        # Done flags, in my master's control page: one per node (pap), and "all" (shm_direct).
        self.done = native.Flags(self.segment.page_words(0, 0, len(self.nodes) + 1))
        self.exchange = self.comm = None
        try:
            rendezvous.agree(ctx.comm, f"{self.name}: masters communicator", deadline)
            self.comm = ctx.comm.Split(0 if self.master else MPI.UNDEFINED, ctx.rank)
            if self.master:
                self.exchange = Exchange(self, open_transport(self.comm, self.inbound, deadline,
                                                              self.masters, self.name),
                                         self.masters, traced=[list(r) for r in self.nodes])
        except BaseException:
            self.close(collective=False)
            raise
        self.copy_lists = {}
        self.round = 0

    def close(self, collective=True):
        if self.exchange is not None:
            self.exchange.transport.close(collective)
            self.exchange = None
        if collective and self.comm not in (None, MPI.COMM_NULL):
            self.comm.Free()
        self.comm = None
        self.copy_lists = {}      # (not .clear(): a failed __init__ closes before it made them)
        if collective:
            self.segment.close()
        else:             # remote masters may still write into it, and MPI still exposes it
            keep(self.segment)

    # ---- the copy lists ----------------------------------------------------------------------

    def lists_for(self, block, epoch):
        """The copy lists of this round of a call with ``block`` bytes per peer, at board
        ``epoch`` (cached by block size, and the two banks' parities)."""
        banks = (epoch % 2, self.round % 2)
        lists = self.copy_lists.get(block)
        if lists is None:
            if len(self.copy_lists) >= 8:
                self.copy_lists.clear()
            lists = self.copy_lists[block] = {}
        plan = lists.get(banks)
        if plan is None:
            plan = lists[banks] = _Lists(self, block, *banks)
        return plan

    # ---- a call ------------------------------------------------------------------------------

    def alltoall(self, send, recv):
        self.start_call()
        block, trace = recv.block, self.ctx.trace
        sig = self.signature(block)
        source = recv.data if send is None else send.data
        for offset in range(0, max(block, 1), self.piece_max):
            self.round += 1
            epoch = self.board.next_epoch()
            plan = self.lists_for(block, epoch)
            length = min(plan.piece, block - offset)
            src, dst = source[offset:], recv.data[offset:]
            trace.phase("gather")
            plan.post.copy(length, src=src)                  # local blocks and remote rows
            self.board.post(epoch, sig)
            if send is not None:
                plan.own.copy(length, dst=dst, src=src)
            plan.local.expect(plan.all_local)
            remote = plan.remote
            remote.expect(plan.all_remote)
            if self.master:
                trace.phase("masters")
                self.masters_phase(plan, sig, epoch, length, dst)
            else:
                self.serve(plan.local, lambda start, timeout: plan.local.serve(
                    epoch, sig, start, timeout, length, dst=dst), "gathering the node's blocks",
                    epoch)
            trace.phase("scatter")
            if self.master and self.pap or not remote.left:
                continue              # a PAP master's engine copied my parts as they landed
            self.serve(remote, lambda start, timeout: remote.serve(
                self.round, 0, start, timeout, length, dst=dst),
                "waiting for remote nodes' blocks", self.round, names=plan.blame,
                traced=plan.traced, signalled_by=plan.hands_on, start=self.k)

    def masters_phase(self, plan, sig, epoch, length, dst):
        """My node's aggregates to every other master, once the gate (my node's posts) has
        completed them, in one engine call (onesided.py): theirs handed on to my node as they
        land, even before (PAP: a flag each, and my own part copied at once), or once all have
        (Direct: the one flag, raised here)."""
        x, bank, layout, k = self.exchange, self.round % 2, self.layout, self.k
        x.begin(sig)
        outbox = self.outbox[bank * layout.bank(k):]
        for r in self.remote:
            outbox[layout.at(k, r):][:8].view(np.uint64)[0] = sig
        c = plan.masters.get(bank)
        if c is None:
            c = plan.masters[bank] = self.masters_call(plan, bank)
        x.start(c)
        gate = c.gate
        plan.local.expect(plan.all_local)
        g = gate.s
        g.target, g.sig, g.start, g.open = epoch, sig, self.start % self.n, 0
        g.dst, g.src = plan.local.lists.bases(length, dst, None)
        g.len = c.s.hand_len = length
        if self.pap:
            c.s.hand_dst = plan.remote.lists.bases(length, dst, None)[0]
        c.s.lkey = x.transport.source_key(self.outbox)
        x.drive(c, "waiting for masters' aggregates", gate)
        x.transport.end_call()
        if not self.pap:
            self.done.store(len(self.nodes), self.round)

    def masters_call(self, plan, bank):
        """The engine's call for my rounds in ``bank`` with ``plan``'s block size: to master r
        my aggregate for its node (plan.lengths[r] bytes, header first) into its inbound
        area; from r its aggregate into mine; the gate: my node's posts (plan.local)."""
        layout, k, x = self.layout, self.k, self.exchange
        masters = range(len(self.nodes))
        gate = _Gate(self, plan.local)
        lists = plan.remote.lists if self.pap else None
        c = _Call(x, xport.COPY if self.pap else xport.ORDER, 2 * len(masters) + self.n,
                  gate=gate, src_off=[bank * layout.bank(k) + layout.at(k, r) for r in masters],
                  len=plan.lengths,
                  dst_off=[bank * layout.bank(r) + layout.at(r, k) for r in masters],
                  in_off=[bank * layout.bank(k) + layout.at(k, r) for r in masters],
                  first=None if lists is None else lists.first,
                  hand_dst_off=None if lists is None else lists.dst,
                  hand_src=None if lists is None else lists.src)
        c.s.src = native.buffer_address(self.outbox)
        if self.pap:
            c.s.flags, c.s.flag_stride = self.done.address, self.done.stride
        return c


class _Gate:
    """The masters' gate (struct pc_gate): my node's posts, served by the engine (their blocks
    for me copied in) before it writes anything; errors and names as the algorithm's own."""
    WHAT = "gathering the node's blocks"

    def __init__(self, algo, loops):
        self.algo, self.loops, self.names = algo, loops, algo.ranks
        x = loops.lists
        self.s = xport.Gate(flags=loops.flags.address, flag_stride=loops.flags.stride,
                            pending=loops._pending, n=loops.n, first=x._first, dst_off=x._dst,
                            src_off=x._src, served=loops._served)

    def still_coming(self):
        self.algo.elsewhere(self.WHAT, self.loops, self.s.target, self.names)

    def timeout(self):
        return self.algo.timeout(self.WHAT, [self.names[q] for q in self.loops.missing()])

    def mismatch(self, peer):
        err = self.loops.mismatch(peer, self.s.target, self.s.sig)
        return self.algo.mismatch(self.names[err.peer], err.theirs, err.mine)


@register("pap_shm_direct", "PAP-aware hierarchical Direct: one done flag per remote master")
class PapShmDirect(ShmDirect):
    pap = True


class _Lists:
    """The copy lists of a round for calls of one block size, from ``algo``'s layout: board
    regions in ``board_bank`` (the board epoch's parity: exchanges of other algorithms
    interleave there), outbox and inbound areas in ``bank`` (the algorithm's round's):

    * ``post``: my blocks for my node's processes to my board region, for remote processes to
      my rows of their nodes' aggregates in my node's outbox;
    * ``own``: my block for me, send buffer to receive buffer;
    * ``local``: from each of my node's processes (its post: flag and signature), its block
      for me out of its board region;
    * ``remote``: from each remote node (its done flag; pap) or from all (one flag), my column
      of its aggregate in my node's inbound area.
    """

    def __init__(self, algo, block, board_bank, bank):
        board, me, n, k = algo.board, algo.me, algo.n, algo.k
        self.piece = piece = max(1, min(block, algo.piece_max))
        layout = algo.layout
        regions = native.buffer_address(board.segment.regions)

        def slot(owner, peer):                       # owner's board slot for peer, this bank
            return (regions + owner * board.segment.region_stride
                    + (board_bank * n + peer) * board.slot)

        outbox = native.buffer_address(algo.outbox) + bank * layout.bank(k) + HEADER
        inbound = native.buffer_address(algo.inbound) + bank * layout.bank(k) + HEADER
        dst, src = [], []
        for i, q in enumerate(algo.ranks):
            if i != me:
                dst.append(slot(me, i))
                src.append(q * block)
        for r in algo.remote:
            for t, q in enumerate(algo.nodes[r]):
                dst.append(outbox + layout.at(k, r) + (me * algo.ppn[r] + t) * piece)
                src.append(q * block)
        self.post = native.CopyList([0, len(dst)], dst, src, piece, relative="src")
        rank = algo.ranks[me]
        self.own = native.CopyList([0, 1], [rank * block], [rank * block], piece,
                                   relative="both")
        first, dst, src = [0], [], []
        for i, q in enumerate(algo.ranks):
            if i != me:
                dst.append(q * block)
                src.append(slot(i, me))
            first.append(len(dst))
        self.local = native.ListLoops(board.posts, native.CopyList(first, dst, src, piece,
                                                                   relative="dst"))
        self.all_local = np.ones(n, np.uint8)
        first, dst, src = [0], [], []
        for r in range(len(algo.nodes)):             # my own node: no copies, never pending
            for t, q in enumerate(algo.nodes[r] if r != k else []):
                dst.append(q * block)
                src.append(inbound + layout.at(k, r) + (t * n + me) * piece)
            first.append(len(dst))
        # Remote blocks reach me through my master, so a wait for them awaits it with the
        # remote masters: whichever of them is alive gives up too, and is then excused and
        # its own wait followed (rendezvous.blame).
        mine = self.hands_on = [algo.masters[k]]           # who raises their flags
        if algo.pap:      # one source per node, its flag
            flags = native.Flags(algo.done.array[:-1])
            self.blame = [[algo.masters[r]] + mine for r in range(len(algo.nodes))]
            self.traced = [ranks if r != k else [] for r, ranks in enumerate(algo.nodes)]
            self.all_remote = np.ones(len(algo.nodes), np.uint8)
            self.all_remote[k] = 0
        else:             # one source, every remote node, the one flag
            flags, first = native.Flags(algo.done.array[-1:]), [0, len(dst)]
            self.blame = [[algo.masters[r] for r in algo.remote] + mine]
            self.all_remote = np.ones(1, np.uint8)
            self.traced = [[q for r in algo.remote for q in algo.nodes[r]]]
        self.remote = native.ListLoops(flags, native.CopyList(first, dst, src, piece,
                                                              relative="dst"))
        self.lengths = [layout.size(k, r, piece) if r != k else 0
                        for r in range(len(algo.nodes))]
        self.masters = {}                            # bank -> the engine's call (a master's)
