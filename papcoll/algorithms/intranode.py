"""What the intra-node algorithms (shm_pap, cma_pap) share: the single-node check, the node
board (node/board.py: posts, signatures, epochs, who gave up) and the wait that serves peers
in arrival order through one native loop call.

Every call is a full exchange on the board, so no process is ever more than one epoch ahead
of a peer. Peers are local ranks; errors name the user's ranks. A peer whose post carries
another signature (another size, another algorithm) is never read: the call raises
MismatchError. Traces record "sent" for every peer when my blocks become readable by all (the
post: nothing is sent to anyone in particular) and "received" for each peer as its block is
copied in.
"""
import numpy as np

from .. import native, progress, rendezvous
from ..errors import TransportError
from ..native import SignatureMismatch
from ..progress import Deadline
from .registry import Algorithm

def spans_nodes(ctx):
    """Why an intra-node algorithm cannot run on ctx (None if all ranks share one node)."""
    nodes = len(ctx.topology.nodes)
    if nodes == 1:
        return None
    how = " (emulated with PAPCOLL_NODE_SIZE)" if ctx.topology.emulated else ""
    return f"intra-node only, and this communicator spans {nodes} nodes{how}"


class IntraNodeAlgorithm(Algorithm):
    @classmethod
    def unsupported(cls, ctx):
        return spans_nodes(ctx)

    def __init__(self, ctx):
        super().__init__(ctx)
        self.board = ctx.node
        self.n, self.me, self.ranks = self.board.n, self.board.me, self.board.ranks
        self.start = (self.me + 1) % self.n          # contention-free: successors first
        self.tracing = ctx.trace.events

    def read_by_cma(self):
        """Set up :meth:`cma_read` and :meth:`cma_release` (cma_pap.py argues the protocol)."""
        self.pids = self.ctx.cma.pids.copy()
        self.pids[self.me] = 0                        # my own block: a memcpy
        self.reads = native.PeerLoops(self.board.posts, batch=1 if self.tracing else None)
        self.releases = native.PeerLoops(self.board.acks_for_me)
        self.others = np.ones(self.n, np.uint8)
        self.others[self.me] = 0
        self.spare = np.empty(0, np.uint8)           # the private send copy for IN_PLACE

    def cma_read(self, epoch, sig, peers, remote_offset, dst, stride, length, what):
        """Read ``length`` bytes at ``remote_offset`` in the buffer each of ``peers`` (a 0/1
        array of local processes) posted for ``epoch`` into ``dst[i * stride:]`` for process
        i, in arrival order, acknowledging each; then raise if one of them gave up (its buffer
        may have changed under my reads: not my data)."""
        loops, board = self.reads, self.board
        loops.expect(peers)
        if not loops.left:                            # a node of one
            return
        self.serve(loops, lambda start, timeout: loops.cma_collect(
            epoch, sig, start, self.pids, remote_offset, dst, stride, length, board.my_acks,
            timeout), what, epoch)
        gone = board.gave_up(range(self.n), self.ctx.calls)
        if gone:
            raise rendezvous.not_coming(self.ctx.comm, f"{self.name} (reading peers' buffers)",
                                        board.user_ranks(gone), board.user_ranks(gone), int)

    def cma_release(self, epoch):
        """Wait until every other process has read my buffer of ``epoch``."""
        if self.n > 1:
            self.releases.expect(self.others)
            self.wait_all(self.releases, epoch, "waiting for peers to read my buffer")

    def private_copy(self, data):
        """``data`` copied to a buffer of mine (kept between calls), to publish for IN_PLACE."""
        if self.spare.nbytes < data.nbytes:
            self.spare = np.empty(data.nbytes, np.uint8)
        spare = self.spare[:data.nbytes]
        np.copyto(spare, data)
        return spare

    def start_call(self):
        """A call begins: its deadline (the Communicator opens its trace record)."""
        self.deadline = Deadline(self.ctx.timeout)

    def serve(self, loops, collect, what, target, posts=False, names=None, traced=None,
              signalled_by=None, start=None):
        """Call ``collect(start, timeout)`` (a native loop over ``loops``, whose flags must
        reach ``target``) until it has served every pending source; each served source's data
        has arrived. ``names`` maps the loop's sources to the user ranks blamed when they do
        not come -- a rank, or a list (default: the node's processes) --, ``traced`` to the
        lists of user ranks whose blocks a source brings (default: the source's name).
        ``posts``: the first call also posts my blocks (traced as "sent" then).
        ``signalled_by``: the user ranks that raise the loop's flags themselves, when not every
        rank of ``names`` does (a flag another process raises on their behalf). The scan
        starts at source ``start`` (default: my successor).
        Raises at the deadline, or when a peer's call differs."""
        names = self.ranks if names is None else names
        loops.start = (self.start if start is None else start) % loops.n

        def step(seconds):
            nonlocal posts
            self.collect(loops, collect, seconds, names, traced, posts)
            posts = False
            return not loops.left
        progress.wait(step, self.deadline,
                      lambda: self.timeout(what, _ranks(names, loops.missing())),
                      lambda: self.elsewhere(what, loops, target, names, signalled_by))

    def collect(self, loops, collect, seconds, names, traced, posts):
        """One native call of :meth:`serve`, waiting at most ``seconds``."""
        try:
            served = collect(loops.start, seconds)
        except SignatureMismatch as err:
            raise self.mismatch(names[err.peer], err.theirs, err.mine) from None
        except TransportError as err:
            if getattr(err, "peer", None) is None:
                raise
            raise self.named(err, names) from None
        if posts and self.tracing:
            self.trace_each("sent", range(self.n))
        if len(served) and self.tracing:      # (the loop moved loops.start past them)
            self.trace_each("received", served, traced or [[r] for r in names])

    def named(self, err, names=None):
        """A TransportError of source ``err.peer``, naming its user ranks."""
        names = self.ranks if names is None else names
        return TransportError(err.errno, f"{self.name}: rank {names[err.peer]}: {err}",
                              ranks=_ranks(names, [err.peer]))

    def wait_all(self, loops, target, what):
        """Wait until every pending flag of ``loops`` is >= target. Raises at the deadline."""
        progress.wait(lambda seconds: loops.wait_all(target, seconds), self.deadline,
                      lambda: self.timeout(what, self.board.user_ranks(loops.missing())),
                      lambda: self.elsewhere(what, loops, target, self.ranks))

    def elsewhere(self, what, loops, target, names, signalled_by=None):
        """Raise if one of the sources still missing is known not to come (rendezvous). Only
        a rank that raises its flag itself shows its arrival there: a rank whose flag another
        process raises (a remote master's, raised by mine once its blocks are in) may have
        finished the call, and sent its next message, before its flag rises."""
        source = {rank: q for q in loops.missing() for rank in _ranks(names, [q])}
        mine = source.keys() if signalled_by is None else signalled_by
        rendezvous.elsewhere(self.ctx.comm, list(source), int, f"{self.name} ({what})",
                             lambda rank: rank not in mine
                             or loops.flags.load(source[rank]) >= target)

    def timeout(self, what, ranks):
        """The timeout error of a wait for the user's ``ranks``: those that gave up on the
        Communicator themselves are not the cause, but whom they waited for may be
        (rendezvous.timed_out)."""
        return rendezvous.timed_out(self.ctx.comm, f"{self.name} {what}", ranks,
                                    self.ctx.timeout)

    def trace_each(self, what, peers, traced=None, when=None):
        """Trace ``what`` for each rank that ``peers`` (sources of a loop) bring: ``traced``
        maps a source to its ranks (default: the node's processes), myself left out;
        ``when``: its time, if not now."""
        for q in peers:
            for rank in [self.ranks[q]] if traced is None else traced[q]:
                if rank != self.ctx.rank:
                    self.ctx.trace.event(what, rank, when)


def _ranks(names, sources):
    """The user ranks ``names`` gives the loop's ``sources`` (each a rank or a list)."""
    return [r for q in sources for r in (names[q] if isinstance(names[q], list) else [names[q]])]
