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
straight out of the poster's board region, as in shm_pap -- or, for blocks above CMA_BLOCK
(shm_layout.py) when every node allows CMA, read them out of the poster's send buffer, whose
address the post carries, as in cma_pap (intranode.py: read, acknowledge, and return only once
my node has read my buffer, so the user may reuse it). Everyone decides alike, by the block
size and a CMA flag agreed when the algorithm is set up, so a round's pieces are the same on
every node. Those reads use no board slot, so a round is then bounded only by the segment's
budget: a 1 MiB call is one round instead of sixteen.

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

**Memory.** A piece is at most the board's slot (unless the call reads by CMA), and at most
what keeps a node's four areas (2 banks of outbox, 2 of inbound, each ppn x (N - ppn) pieces)
within SEGMENT_BUDGET (shm_layout.py); the areas are sized for the largest piece, and only the
pages a call touches take memory. They are one POSIX segment per node and algorithm instance
(node/segment.py: bounded set-up, nothing left in /dev/shm); the done flags live in the
master's control page.
"""
import ctypes

from mpi4py import MPI

from .. import native, progress, rendezvous, signature
from ..native import xport
from ..native.lib import address, lib
from ..native.plan import GATHER, MASTERS, HierStruct
from ..node.segment import LINE, Segment
from ..progress import Deadline
from ..transport import open_transport
from ..trace import NoTrace
from ..transport.base import keep
from .intranode import IntraNodeAlgorithm, _ranks
from .calls import Call
from .onesided import Exchange
from .registry import register
from .shm_layout import CMA_BLOCK, Layout, Lists, piece_max, step_of

GATHERING = "gathering the node's blocks"          # the phases, as errors name them
EXCHANGING = "waiting for masters' aggregates"
SCATTERING = "waiting for remote nodes' blocks"


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
        deadline = Deadline(ctx.timeout)
        # CMA inside the nodes for large blocks only if every node has it: pieces and rounds
        # must be alike everywhere (and a node's ranks must be consecutive: one read per peer).
        able = ctx.cma is not None and ctx.cma.available and all(
            ranks == list(range(ranks[0], ranks[0] + len(ranks))) for ranks in self.nodes)
        self.cma = all(rendezvous.exchange(ctx.comm, f"{self.name}: CMA", able,
                                           deadline).values())
        if self.cma:
            self.read_by_cma()
        self.piece_max = (piece_max(self.ppn, topo.size, False),
                          piece_max(self.ppn, topo.size, self.cma))   # by "CMA in this call"
        self.layout = Layout(self.ppn, self.piece_max[True])
        bank = self.layout.bank(self.k)
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
        self.rounds = ctypes.c_uint64(0)     # the round counter, the plans' too

    round = property(lambda self: self.rounds.value,
                     lambda self, value: setattr(self.rounds, "value", value))

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

    def by_cma(self, block):
        """Whether a call with ``block`` bytes per peer reads my node's blocks for me from
        their senders' buffers (single copy) rather than through the board (two)."""
        return self.cma and block > CMA_BLOCK

    def lists_for(self, block, epoch):
        """The copy lists of this round of a call with ``block`` bytes per peer, at board
        ``epoch`` (cached by block size, and the two banks' parities)."""
        return self.lists_in(block, (epoch % 2, self.round % 2))

    def lists_in(self, block, banks):
        """The copy lists for ``block`` bytes per peer in ``banks`` (the board epoch's parity,
        the round's)."""
        lists = self.copy_lists.get(block)
        if lists is None:
            if len(self.copy_lists) >= 8:
                self.copy_lists.clear()
            lists = self.copy_lists[block] = {}
        plan = lists.get(banks)
        if plan is None:
            plan = lists[banks] = Lists(self, block, *banks, self.by_cma(block))
            plan.gate = _Gate(self, plan.local)
        return plan

    # ---- a call ------------------------------------------------------------------------------

    def alltoall(self, send, recv):
        self.start_call()
        block, trace = recv.block, self.ctx.trace
        sig, cma = self.signature(block), self.by_cma(block)
        source = recv.data if send is None else send.data
        if cma and send is None:       # published to my node: not where its blocks land
            source = self.private_copy(source)
        for offset in range(0, max(block, 1), self.piece_max[cma]):
            self.round += 1
            epoch = self.board.next_epoch()
            plan = self.lists_for(block, epoch)
            length = min(plan.piece, block - offset)
            src, dst = source[offset:], recv.data[offset:]
            trace.phase("gather")
            plan.post.copy(length, src=src)                  # local blocks and remote rows
            self.board.post(epoch, sig, native.buffer_address(source) if cma else 0)
            if send is not None:
                plan.own.copy(length, dst=dst, src=src)
            if cma:                    # my node's blocks for me, straight from their buffers
                first = self.ranks[0] * block
                self.cma_read(epoch, sig, self.others, self.ranks[self.me] * block + offset,
                              dst[first:], block, length, GATHERING)
            plan.local.expect(plan.all_local)
            remote = plan.remote
            remote.expect(plan.all_remote)
            if self.master:
                trace.phase("masters")
                self.masters_phase(plan, sig, epoch, length, dst)
            elif not cma:
                self.serve(plan.local, lambda start, timeout: plan.local.serve(
                    epoch, sig, start, timeout, length, dst=dst), GATHERING, epoch)
            trace.phase("scatter")
            if not (self.master and self.pap) and remote.left:  # a PAP master's engine
                self.serve(remote, lambda start, timeout: remote.serve(   # copied them in
                    self.round, 0, start, timeout, length, dst=dst), SCATTERING, self.round,
                    names=plan.blame,
                    traced=plan.traced, signalled_by=plan.hands_on, start=self.k)
            if cma:
                self.cma_release(epoch)

    # ---- the plan: the whole call in C (native/papcoll_hier.c) -------------------------------

    def plan(self, sendbuf, recvbuf, recv):
        block = recv.block
        if (not isinstance(self.ctx.trace, NoTrace) or self.by_cma(block)
                or not 0 < block <= self.piece_max[False]):
            return None      # a traced call records its phases; one round a call; no CMA reads
        rounds = [self.lists_in(block, (e, r)) for e in (0, 1) for r in (0, 1)]
        sig = self.signature(block)
        for r, lists in enumerate(rounds):
            self.hier_round(lists, r % 2, sig)
        x = self.exchange                 # a master's: the counters of its calls
        counters = (self.board.epoch, self.rounds,
                    *((x.counter, x.advert_counter) if x else (self.rounds, self.rounds)))
        plan = native.Plan.hier(self, rounds, self.ctx.size, counters, self.start, self.k,
                                native.SLICE)
        return plan if plan.bind(sendbuf, recvbuf, recv, sig) else None

    def hier_round(self, lists, bank, sig):
        """``lists``' struct pc_hier (``lists.s``), for calls of signature ``sig``."""
        c = None
        if self.master:
            c = lists.masters.get(bank) or lists.masters.setdefault(
                bank, self.masters_call(lists, bank))
            c.s.code = signature.code_of(sig)        # its sig: the plan's
            # Kept for the plan's life: the masters' transport is this algorithm's own, and
            # the outbox (in the node segment, which outlives it) is all it ever sends from.
            c.s.lkey = self.exchange.transport.source_key(self.outbox)
        posts, post = self.board.posts, lists.post
        remote = None if self.master and self.pap else ctypes.pointer(lists.scatter)
        lists.s = HierStruct(
            npost=post.dst.size, post_dst=post._dst, post_src=post._src, own=lists.own_at,
            post=posts.address + self.me * posts.stride, local=ctypes.pointer(lists.gate.s),
            remote=remote, all_local=address(lists.all_local),
            all_remote=address(lists.all_remote),
            masters=None if c is None else ctypes.pointer(c.s),
            done=self.done.address + len(self.nodes) * self.done.stride
            if self.master and not self.pap else None)

    def plan_failed(self, plan, rc):
        """Go on with the call the plan left, in the phase it left it in, or raise its
        error."""
        lists = plan.rounds[self.board.epoch.value % 2 * 2 + self.round % 2]
        self.start_call()
        if self.exchange is not None:
            self.exchange.sig, self.exchange.deadline = plan.s.sig, self.deadline

        def step(seconds):
            rc = plan.resume(seconds)
            if rc not in (1, native.ETIMEDOUT):
                self.plan_error(lists, plan.s.phase, rc)
            return rc == 1

        if rc != native.ETIMEDOUT:
            self.plan_error(lists, plan.s.phase, rc)
        progress.wait(step, self.deadline, lambda: self.waiting(lists, plan.s.phase, True),
                      lambda: self.waiting(lists, plan.s.phase))

    def waiting(self, lists, phase, error=False):
        """The check (or, ``error``, the timeout error) of a plan's call waiting in
        ``phase``."""
        if phase == MASTERS:
            c = lists.masters[self.round % 2]
            return (self.exchange.error if error else self.exchange.check)(c, EXCHANGING, c.gate)
        if phase == GATHER:
            loops, what, target, names, by = (lists.local, GATHERING, self.board.epoch.value,
                                              self.ranks, None)
        else:
            loops, what, target, names, by = (lists.remote, SCATTERING, self.round, lists.blame,
                                              lists.hands_on)
        if error:
            return self.timeout(what, _ranks(names, loops.missing()))
        self.elsewhere(what, loops, target, names, by)

    def plan_error(self, lists, phase, rc):
        """Raise the error of a plan's call that ended with ``rc`` in ``phase``."""
        if phase == MASTERS:
            c = lists.masters[self.round % 2]
            self.exchange.failure(c, rc, EXCHANGING, c.gate)
        if phase == GATHER and rc == native.EPROTO:
            raise lists.gate.mismatch(lists.gate.s.sources.failed)
        raise ValueError(f"{self.name}: the native call failed ({rc})")

    def masters_phase(self, plan, sig, epoch, length, dst):
        """My node's aggregates to every other master, once the gate (my node's posts) has
        completed them, in one engine call (onesided.py): theirs handed on to my node as they
        land, even before (PAP: a flag each, and my own part copied at once), or once all have
        (Direct: the one flag, raised here)."""
        x, bank = self.exchange, self.round % 2
        x.begin(sig)
        c = plan.masters.get(bank)
        if c is None:
            c = plan.masters[bank] = self.masters_call(plan, bank)
        lib.pc_head_aggregates(c.s.src, c.s.src_off, c.xport.n, c.xport.me, sig)
        x.start(c)
        gate = c.gate
        plan.local.expect(plan.all_local)
        g, s = gate.s, gate.s.sources
        s.target, s.sig, s.start, g.open = epoch, sig, self.start % self.n, 0
        g.list.dst, g.list.src = plan.local.lists.bases(length, dst, None)
        g.list.len = c.s.hand_len = length
        if self.pap:
            c.s.hand_dst = plan.remote.lists.bases(length, dst, None)[0]
        c.s.lkey = x.transport.source_key(self.outbox)
        x.drive(c, EXCHANGING, gate)
        x.transport.end_call()
        if not self.pap:
            self.done.store(len(self.nodes), self.round)

    def masters_call(self, plan, bank):
        """The engine's call for my rounds in ``bank`` with ``plan``'s block size: to master r
        my aggregate for its node (plan.lengths[r] bytes, header first) into its inbound
        area; from r its aggregate into mine; the gate: my node's posts (plan.local)."""
        layout, k, x = self.layout, self.k, self.exchange
        masters = range(len(self.nodes))
        gate = plan.gate
        lists = plan.remote.lists if self.pap else None
        c = Call(x, xport.COPY if self.pap else xport.ORDER, 2 * len(masters) + self.n,
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
    """The gather as a step (struct pc_gate): my node's posts, served by the engine (their
    blocks for me copied in) before it writes anything -- a master's gate -- or by the native
    call; errors and names as the algorithm's own."""

    def __init__(self, algo, loops):
        self.algo, self.loops, self.names = algo, loops, algo.ranks
        self.s = step_of(loops)

    def still_coming(self):
        self.algo.elsewhere(GATHERING, self.loops, self.s.sources.target, self.names)

    def timeout(self):
        return self.algo.timeout(GATHERING, [self.names[q] for q in self.loops.missing()])

    def mismatch(self, peer):
        s = self.s.sources
        err = self.loops.mismatch(peer, s.target, s.sig)
        return self.algo.mismatch(self.names[err.peer], err.theirs, err.mine)


@register("pap_shm_direct", "PAP-aware hierarchical Direct: one done flag per remote master")
class PapShmDirect(ShmDirect):
    pap = True
