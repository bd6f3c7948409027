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
import time

from .. import rendezvous
from ..errors import PapcollTimeoutError, TransportError
from ..native import SignatureMismatch
from ..progress import Deadline
from ..trace import NoTrace
from .registry import Algorithm

SLICE = 0.1   # longest native wait, so that Ctrl-C gets through between slices


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
        self.tracing = not isinstance(ctx.trace, NoTrace)

    def start_call(self):
        """A call begins: its deadline (the Communicator opens its trace record)."""
        self.deadline = Deadline(self.ctx.timeout)

    def serve(self, loops, collect, what, posts=False):
        """Call ``collect(start, timeout)`` (a native loop over ``loops``) until it has served
        every pending peer; each served peer's block has arrived. ``posts``: the first call also
        posts my blocks (traced as "sent" then). Raises at the deadline, or when a peer's call
        differs."""
        start = self.start
        while True:
            try:
                served = collect(start, self.left())
            except SignatureMismatch as err:
                raise self.mismatch(self.ranks[err.peer], err.theirs, err.mine) from None
            except TransportError as err:
                peer = getattr(err, "peer", None)
                if peer is None:
                    raise
                raise TransportError(err.errno, f"{self.name}: rank {self.ranks[peer]}: "
                                                f"{err}") from None
            if posts and self.tracing:
                self.trace_each("sent", range(self.n))
            posts = False
            if len(served):
                start = (int(served[-1]) + 1) % self.n
                if self.tracing:
                    self.trace_each("received", served)
            else:
                self.still_coming(what, loops, self.board.epoch.value)
            if not loops.left:
                return

    def wait_all(self, loops, target, what):
        """Wait until every pending flag of ``loops`` is >= target. Raises at the deadline."""
        while not loops.wait_all(target, self.left()):
            self.still_coming(what, loops, target)

    def still_coming(self, what, loops, target):
        """After a native wait on ``loops`` in vain: raise at the deadline, or as soon as one
        of the peers still missing is known not to come (rendezvous.elsewhere)."""
        peers = loops.missing()
        if self.deadline.expired():
            raise self.timeout(what, peers)
        local = dict(zip(self.board.user_ranks(peers), peers))
        rendezvous.elsewhere(self.ctx.comm, list(local), int, f"{self.name} ({what})",
                             lambda rank: loops.flags.load(local[rank]) >= target)

    def left(self):
        """Seconds to the deadline, at most SLICE: one native wait."""
        return min(max(self.deadline.end - time.monotonic(), 0.0), SLICE)

    def timeout(self, what, peers):
        """The timeout error for the local ranks ``peers``: those that gave up on the
        Communicator themselves are not the ones missing."""
        gave_up = self.board.gave_up(peers)
        missing = [q for q in peers if q not in gave_up]
        return PapcollTimeoutError(f"{self.name} {what}", self.board.user_ranks(missing),
                                   self.ctx.timeout, self.board.user_ranks(gave_up))

    def trace_each(self, what, peers):
        for q in peers:
            if q != self.me:
                self.ctx.trace.event(what, self.ranks[q])
