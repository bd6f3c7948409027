"""Where a hierarchical call's blocks go (``shm_direct``, ``pap_shm_direct``): the layout of
aggregates in a node's outbox and inbound areas, and a round's copy lists and steps.

shm_direct.py says why the protocol is correct; this module only computes addresses, once per
block size and pair of banks.
"""
import numpy as np

from .. import native
from ..native.plan import Step
from ..node.board import slot_bytes

SEGMENT_BUDGET = 64 << 20     # bytes of outbox and inbound areas per node, both banks
PIECE_ALIGN = 64              # pieces above this are multiples of a cache line
HEADER = 64                   # bytes before each aggregate: the sender's call signature
CMA_BLOCK = 128 << 10         # blocks above this go between a node's processes by CMA (measured:
                              # docs/policy.md, "The hierarchical call's CMA crossover")


def piece_max(ppn, size, cma):
    """The largest piece, the same on every node (their layouts must agree): within
    SEGMENT_BUDGET for the node with the most remote traffic (ppn processes each writing a
    piece to every remote process, 2 areas x 2 banks), and, unless ``cma`` (a node's blocks
    between its processes are read from their send buffers), within the board slot of the
    largest node."""
    piece = max(1, SEGMENT_BUDGET // max(1, 4 * max(p * (size - p) for p in ppn)))
    if not cma:
        piece = min(piece, slot_bytes(max(ppn)))
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


def step_of(loops):
    """A struct pc_step over ``loops`` (ListLoops): its sources' lists served as their flags
    rise, every arrived source in each pass -- a step of the round's schedule
    (papcoll_hier.c). Its sources are over the loops' flags, pending and served arrays:
    target, signature and start are the step's own."""
    step = Step()
    loops.over(step.sources)
    loops.lists.over(step.list)
    return step


class Lists:
    """The copy lists of a round for calls of one block size, from ``algo``'s layout: board
    regions in ``board_bank`` (the board epoch's parity: exchanges of other algorithms
    interleave there), outbox and inbound areas in ``bank`` (the algorithm's round's):

    * ``post``: my blocks for my node's processes to my board region, for remote processes to
      my rows of their nodes' aggregates in my node's outbox;
    * ``own_at``: my block for me, at this offset of both buffers;
    * ``local``: from each of my node's processes (its post: flag and signature), its block
      for me out of its board region (no copies when ``cma``: the algorithm reads those
      blocks from the posters' send buffers, and only their posts are served here);
    * ``remote``: from each remote node (its done flag; pap) or from all (one flag), my column
      of its aggregate in my node's inbound area.

    ``gather`` and ``scatter`` are the round's steps over ``local`` and ``remote``; ``s`` its
    schedule (shm_direct.py builds it).
    """

    def __init__(self, algo, block, board_bank, bank, cma=False):
        board, me, n, k = algo.board, algo.me, algo.n, algo.k
        self.cma = cma
        self.piece = piece = max(1, min(block, algo.piece_max[cma]))
        layout = algo.layout
        regions = native.buffer_address(board.segment.regions)

        def slot(owner, peer):                       # owner's board slot for peer, this bank
            return (regions + owner * board.segment.region_stride
                    + (board_bank * n + peer) * board.slot)

        outbox = native.buffer_address(algo.outbox) + bank * layout.bank(k) + HEADER
        inbound = native.buffer_address(algo.inbound) + bank * layout.bank(k) + HEADER
        dst, src = [], []
        for i, q in enumerate([] if cma else algo.ranks):
            if i != me:
                dst.append(slot(me, i))
                src.append(q * block)
        for r in algo.remote:
            for t, q in enumerate(algo.nodes[r]):
                dst.append(outbox + layout.at(k, r) + (me * algo.ppn[r] + t) * piece)
                src.append(q * block)
        self.post = native.CopyList([0, len(dst)], dst, src, piece)
        self.own_at, self.node_at = algo.ranks[me] * block, algo.ranks[0] * block
        first, dst, src = [0], [], []
        for i, q in enumerate(algo.ranks):
            if i != me and not cma:
                dst.append(q * block)
                src.append(slot(i, me))
            first.append(len(dst))
        self.local = native.ListLoops(board.posts, native.CopyList(first, dst, src, piece))
        self.all_local = np.ones(n, np.uint8)       # with CMA: their posts, no copies
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
        self.remote = native.ListLoops(flags, native.CopyList(first, dst, src, piece))
        self.lengths = [layout.size(k, r, piece) if r != k else 0
                        for r in range(len(algo.nodes))]
        self.gather, self.scatter = step_of(self.local), step_of(self.remote)
        self.masters = self.s = self.events = self.tasks = None
