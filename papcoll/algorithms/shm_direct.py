"""``shm_direct`` and ``pap_shm_direct``: the hierarchical Direct of the PAP alltoall paper
(Qian & Afsahi, section 4.3) -- across nodes, small blocks.

A call moves its blocks in rounds of at most ``piece`` bytes per block (one round for the
small blocks these algorithms are for), each round in three phases -- each a task, or a few,
of the round's schedule in C (native/papcoll_hier.c; :meth:`ShmDirect.tasks` lists each role's):

1. **Gather** (not PAP-aware: a node's aggregate is complete only once every local process has
   contributed). Each process copies its blocks for the processes of its own node into its
   region of the node board, as shm_pap does, and its blocks for every remote node into its
   row of that node's aggregate, in the node's outbox; then it posts on the board (flag and
   call signature), and serves its node's posts as they rise.
2. **Masters.** Each node's master takes the local blocks meant for it as their posts arrive;
   once all are in, its node's aggregates are complete, and it writes one to every other
   master -- ppn x ppn' blocks -- straight into that node's inbound area: the masters'
   transport's inbox *is* the node segment, so nothing is copied twice on the receiving node.
   An Exchange (exchange.py) among the masters, copy-based (the inbound area is always ready:
   writes never wait), in arrival order for pap_shm_direct, in step order for shm_direct.
3. **Scatter.** ``shm_direct``: the master waits for every aggregate, then raises one done
   flag, and every local process copies its parts. ``pap_shm_direct``: one done flag per
   remote master, raised by my master as that master's aggregate lands (it hands its notice
   on); local processes copy their part of each as soon as its flag rises, in arrival order,
   and the master its own, as it lands (the hand-on task takes the masters' call's per-source
   events), even while its gather still waits for a late local process.

Blocks between processes of one node never go through the master: other processes copy them
straight out of the poster's board region, as in shm_pap -- or, for blocks above CMA_BLOCK
(shm_layout.py) when every node allows CMA, read them out of the poster's send buffer, whose
address the post carries, as in cma_pap (intranode.py: read, acknowledge, and return only once
my node has read my buffer, so the user may reuse it). Those reads are a task of their own
(papcoll_reads.c): a master's overlap its call among the masters, whose writes need my node's
posts -- the rows of the aggregates, copied before each post -- and not these blocks.
Everyone decides alike, by the block size and a CMA flag agreed when the algorithm is set up,
so a round's pieces are the same on every node. Those reads use no board slot, so a round is
then bounded only by the segment's budget: a 1 MiB call is one round instead of sixteen.

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

import numpy as np
from mpi4py import MPI

from .. import native, progress, rendezvous, signature
from ..native import xport
from ..native.lib import counted, counter
from ..native.plan import POSTED, Hier, schedule
from ..node.segment import LINE, Segment
from ..progress import Deadline
from ..transport import open_transport
from ..trace import NoTrace
from ..transport.base import keep
from .intranode import IntraNodeAlgorithm, _ranks
from .calls import Call
from .exchange import Exchange
from .registry import register
from .shm_layout import CMA_BLOCK, Layout, Lists, piece_max

GATHERING = "gathering the node's blocks"          # the phases, as errors name them
EXCHANGING = "waiting for masters' aggregates"
SCATTERING = "waiting for remote nodes' blocks"
RELEASING = "waiting for peers to read my buffer"


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
            step = f"{self.name}: masters communicator"
            rendezvous.agree(ctx.comm, step, deadline)
            with rendezvous.held(step, deadline):
                self.comm = ctx.comm.Split(0 if self.master else MPI.UNDEFINED, ctx.rank)
            if self.master:
                self.exchange = Exchange(self, open_transport(self.comm, self.inbound, deadline,
                                                              self.masters, self.name),
                                         self.masters, traced=[list(r) for r in self.nodes])
        except BaseException:
            self.close(collective=False)
            raise
        self.copy_lists = {}
        self.rounds = counter()     # the round counter, the plans' too
        # The schedule's log, replayed into a trace: its phases, and its sources when the
        # trace takes events.
        self.logged = not isinstance(ctx.trace, NoTrace)

    round = counted("rounds")

    def close(self, collective=True):
        self.drop_plans()         # first: a plan's rounds point into what follows
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

    # ---- the copy lists and the rounds' schedules ---------------------------------------

    def by_cma(self, block):
        """Whether a call with ``block`` bytes per peer reads my node's blocks for me from
        their senders' buffers (single copy) rather than through the board (two)."""
        return self.cma and block > CMA_BLOCK

    def lists_for(self, block, epoch):
        """The copy lists and schedule of this round of a call with ``block`` bytes per peer,
        at board ``epoch`` (cached by block size, and the two banks' parities)."""
        return self.lists_in(block, (epoch % 2, self.round % 2))

    def lists_in(self, block, banks):
        """The copy lists and schedule for ``block`` bytes per peer in ``banks`` (the board
        epoch's parity, the round's)."""
        lists = self.copy_lists.get(block)
        if lists is None:
            if len(self.copy_lists) >= 8:
                self.copy_lists.clear()
            lists = self.copy_lists[block] = {}
        plan = lists.get(banks)
        if plan is None:
            plan = lists[banks] = Lists(self, block, *banks, self.by_cma(block))
            self.schedule(plan, banks[1], self.signature(block))
        return plan

    def tasks(self, cma):
        """My role's schedule of a round (native/papcoll_hier.c and papcoll_reads.c define
        the tasks): (task, the tasks it waits for, the task whose per-source events it takes),
        in order of dependence, and in the order a wait blames them."""
        tasks = [("gather", (), None)]
        if cma:
            tasks.append(("reads", (), None))
        if self.master:
            tasks += [("masters", (), None), ("own", ("masters",), None)]
            tasks += ([("handon", (), "masters")] if self.pap else
                      [("done", ("masters",), None), ("scatter", ("done",), None)])
        else:
            tasks += [("own", (), None), ("scatter", (), None)]
        if cma:
            tasks.append(("release", (), None))
        return tasks

    def schedule(self, lists, bank, sig):
        """``lists.s``: the struct pc_hier (a Hier) of their rounds, calls of signature ``sig``, its
        tasks my role's, and a master's call among the masters (``lists.masters``)."""
        c = lists.masters = self.masters_call(lists, bank, sig) if self.master else None
        posts, post, done = self.board.posts, lists.post, self.done
        h = lists.s = Hier(
            npost=post.dst.size, post_dst=post.dst, post_src=post.src, own=lists.own_at,
            post=(posts, self.me * posts.stride), local=lists.gather, remote=lists.scatter,
            all_local=lists.all_local, all_remote=lists.all_remote, start=self.start % self.n,
            scatter_start=self.k % lists.remote.n, node_at=lists.node_at, sig=sig,
            masters=None if c is None else c.s,
            done=(done, len(self.nodes) * done.stride) if self.master and not self.pap
            else None,
            flags=done if self.master and self.pap else None, flag_stride=done.stride)
        if lists.cma:
            acks = self.board.my_acks
            h.reads, h.releases = self.reads.sources, self.releases.sources
            h.pids, h.acks, h.ack_stride = self.pids, acks, acks.stride
            h.others = self.others
        tasks = self.tasks(lists.cma)
        lists.tasks = [task for task, _, _ in tasks]
        schedule(h, tasks)
        if self.logged:
            lists.events = np.zeros(2 * (2 * self.n + len(self.nodes) + 8), np.int64)
            h.sched.events, h.sched.max_events = lists.events, lists.events.size // 2

    def masters_call(self, lists, bank, sig):
        """The engine's call of signature ``sig`` for my rounds in ``bank`` with ``lists``'
        block size: to master r my aggregate for its node (lists.lengths[r] bytes, header
        first) into its inbound area; from r its aggregate into mine."""
        layout, k, x = self.layout, self.k, self.exchange
        masters = range(len(self.nodes))
        c = Call(x, xport.COPY if self.pap else xport.ORDER, 3 * len(masters),
                 src_off=[bank * layout.bank(k) + layout.at(k, r) for r in masters],
                 len=lists.lengths,
                 dst_off=[bank * layout.bank(r) + layout.at(r, k) for r in masters],
                 in_off=[bank * layout.bank(k) + layout.at(k, r) for r in masters])
        c.s.src = self.outbox
        # Kept for the call's life: the masters' transport is this algorithm's own, and the
        # outbox (in the node segment, which outlives it) is all it ever sends from.
        c.s.lkey = x.transport.source_key(self.outbox)
        c.s.code = signature.code_of(sig)
        return c

    # ---- a call: each round one run of its schedule ------------------------------------------

    def alltoall(self, send, recv):
        self.start_call()
        block = recv.block
        sig, cma = self.signature(block), self.by_cma(block)
        source = recv.data if send is None else send.data
        if cma and send is None:       # published to my node: not where its blocks land
            source = self.private_copy(source)
        for offset in range(0, max(block, 1), self.piece_max[cma]):
            self.round += 1
            epoch = self.board.next_epoch()
            lists = self.lists_for(block, epoch)
            x = self.exchange
            if x is not None:
                x.begin(sig)
            lists.s.begin(source, recv.data, block, offset, min(lists.piece, block - offset),
                          self.round, epoch, cma, x.epoch if x else 0, x.adverts if x else 0)
            self.finish(lists)

    def finish(self, lists, rc=None):
        """Run ``lists``' round (started; ``rc``: a plan's first slice) to its end under the
        call's deadline, or raise its error: a peer's, named, as soon as it is known not to
        come (rendezvous)."""
        h = lists.s

        def step(seconds):
            rc = h.run(seconds)
            if rc not in (1, native.ETIMEDOUT):
                self.round_error(lists, rc)
            return rc == 1

        if self.exchange is not None:
            self.exchange.sig, self.exchange.deadline = h.sig, self.deadline
        try:
            if rc is None or rc == native.ETIMEDOUT:
                progress.wait(step, self.deadline, lambda: self.waiting(lists, True),
                              lambda: self.waiting(lists))
            elif rc != 1:
                self.round_error(lists, rc)
        finally:
            if self.logged:
                self.replay(lists)
        if lists.cma:
            gone = self.board.gave_up(range(self.n), self.ctx.calls)
            if gone:             # a reader gave up: its buffer may have changed under my reads
                raise rendezvous.not_coming(self.ctx.comm, f"{self.name} (reading peers' "
                                            "buffers)", self.board.user_ranks(gone),
                                            self.board.user_ranks(gone), int)

    def plan(self, sendbuf, recvbuf, recv):
        """The whole call in C, entered once (one round, no CMA reads, not traced)."""
        block = recv.block
        if (not isinstance(self.ctx.trace, NoTrace) or self.by_cma(block)
                or not 0 < block <= self.piece_max[False]):
            return None
        rounds = [self.lists_in(block, (e, r)) for e in (0, 1) for r in (0, 1)]
        sig = self.signature(block)
        x = self.exchange                 # a master's: the counters of its calls
        counters = (self.board.epoch, self.rounds,
                    *((x.counter, x.advert_counter) if x else (self.rounds, self.rounds)))
        plan = native.Plan.hier(self, rounds, self.ctx.size, counters, native.SLICE)
        return plan if plan.bind(sendbuf, recvbuf, recv, sig) else None

    def plan_failed(self, plan, rc):
        """Go on with the round the plan left, or raise its error."""
        self.start_call()
        self.finish(plan.rounds[int(self.board.epoch[0]) % 2 * 2 + self.round % 2], rc)

    # ---- where a round waits, and its errors -------------------------------------------------

    def stuck(self, lists):
        """The first task of the round's schedule not complete (None: all are)."""
        done = lists.s.sched.done
        return next((task for i, task in enumerate(lists.tasks) if not done >> i & 1), None)

    def waiting(self, lists, error=False):
        """The check (or, ``error``, the timeout error) of a round still running."""
        task, h = self.stuck(lists), lists.s
        if task in ("masters", "handon", "done"):
            c, x = lists.masters, self.exchange
            return (x.error if error else x.check)(c, EXCHANGING)
        if task in ("gather", "reads"):
            loops = lists.local if task == "gather" else self.reads
            what, target, names, by = GATHERING, h.epoch, self.ranks, None
        elif task == "scatter":
            loops, what, target, names, by = (lists.remote, SCATTERING, h.round, lists.blame,
                                              lists.hands_on)
        else:
            loops, what, target, names, by = (self.releases, RELEASING, h.epoch, self.ranks,
                                              None)
        if error:
            return self.timeout(what, _ranks(names, loops.missing()))
        self.elsewhere(what, loops, target, names, by)

    def round_error(self, lists, rc):
        """Raise the error of a round that ended with ``rc``."""
        h = lists.s
        task = lists.tasks[h.sched.failed] if h.sched.failed >= 0 else None
        if task == "masters":
            self.exchange.failure(lists.masters, rc, EXCHANGING)
        if task in ("gather", "reads"):
            loops = lists.local if task == "gather" else self.reads
            peer = (lists.gather.sources if task == "gather" else self.reads.sources).failed
            if rc == native.EPROTO:
                err = loops.mismatch(peer, h.epoch, h.sig)
                raise self.mismatch(self.ranks[peer], err.theirs, err.mine)
            if task == "reads":
                raise self.named(self.reads.read_error(rc, self.pids, h.own + h.offset, h.len))
        raise ValueError(f"{self.name}: the native call failed ({rc})")

    def replay(self, lists):
        """The schedule's log of this slice, into the Communicator's trace: a task's post
        begins its phase; a source it served is "received" from its ranks (with CMA, the
        reads', not the posts'). The masters' call's own events too."""
        s, trace = lists.s.sched, self.ctx.trace
        for i in range(s.nevents):
            what, when = int(lists.events[2 * i]), int(lists.events[2 * i + 1]) * 1e-9
            task, q = lists.tasks[what >> 56], what & POSTED
            if q == POSTED:
                trace.phase(PHASES.get(task, task), when)
                if task == "gather":
                    self.trace_each("sent", range(self.n), when=when)
            elif task == "reads" or task == "gather" and not lists.cma:
                self.trace_each("received", [q], when=when)
            else:
                self.trace_each("received", [q], lists.traced, when=when)
        s.nevents = 0
        if lists.masters is not None:
            self.exchange.replay(lists.masters)


PHASES = {"reads": "gather", "handon": "scatter", "done": "scatter"}    # a task's phase


@register("pap_shm_direct", "PAP-aware hierarchical Direct: one done flag per remote master")
class PapShmDirect(ShmDirect):
    pap = True
