"""The node board: one shared segment per Communicator and node, through which every
intra-node algorithm signals and copies.

Control page of process i (each word written by i only, read by the others):

* line 0, the **post** (native/papcoll_native.h, ``PC_POST_*``): word 0 the flag -- the epoch
  of i's latest post, stored last with release ordering --; words 1 and 2 the signature of i's
  call of epoch e, in word 1 + e % 2; word 3 the address of i's published buffer (CMA);
* line 1, ``GAVE_UP``: nonzero once an error ended one of i's calls unfinished (i will not come
  back to this Communicator): 1 + the number of calls i had begun on it then;
* line 2 + q, ``ACKS``: the epoch in which i last finished reading q's buffer (cma_pap);
* the CMA one-to-all/all-to-one primitives' own words (node/cma.py): their post
  (``PRIMITIVE``), ``DONE`` (the epoch of i's last finished access) and ``PRIMITIVE_ACKS + q``.
  They are not full exchanges (a reader need not wait for the other readers), so they keep
  their own epochs, apart from the exchanges'.

Data region of process i: two banks of n slots of ``slot`` bytes (shm_pap's copies).

**Epochs**: the exchanges have one counter (:meth:`next_epoch`, a native.counter the plans
advance too). Every exchange on the board -- a shm_pap piece, a cma_pap call -- is a full
exchange among the node's processes (nobody finishes it before everyone has posted) that takes
the next epoch, so no process is ever more than one epoch ahead of another: what the two banks
of data and of signatures rely on (the argument is in algorithms/shm_pap.py).

**Signatures**: each post carries its call's signature (which algorithm and scheme, and the
block size), and the native loops compare it with their own before they copy a byte. Ranks
whose calls disagree -- different sizes, or different algorithms, as when the policy puts two
sizes on both sides of a threshold -- get a MismatchError naming both calls, never each other's
stale or foreign bytes.
"""

from .. import native
from .segment import LINE, PAGE, Segment

POST, GAVE_UP, ACKS = 0, LINE, 2 * LINE
SLOT_MAX = 64 << 10          # bytes; shm_pap copies larger blocks in pieces
REGION_BUDGET = 4 << 20      # bytes of data region per process: two banks of n slots


def control_bytes(n):
    """A control page's use for n processes."""
    return primitive_lines(n)[-1] + n * LINE


def primitive_lines(n):
    """Where the primitives' words start in a control page for n processes: (their post,
    DONE, their ACKS)."""
    at = ACKS + n * LINE
    return at, at + LINE, at + 2 * LINE


def slot_bytes(n):
    """Slot size for n processes: SLOT_MAX while two banks of n slots fit REGION_BUDGET (up to
    32 processes), less above (down to a page)."""
    return max(PAGE, min(SLOT_MAX, REGION_BUDGET // (2 * n) // PAGE * PAGE))


class NodeBoard:
    """Collective over ``members`` (the ranks of ``comm`` that share my node, ascending; they
    are the user's ranks too), bounded by ``deadline``. Local process i is ``members[i]``.
    ``close()`` is local and safe twice."""

    def __init__(self, comm, members, deadline):
        self.ranks = list(members)
        self._index = {rank: i for i, rank in enumerate(self.ranks)}
        self.n, self.me = len(self.ranks), self.ranks.index(comm.Get_rank())
        self.slot = slot_bytes(self.n)
        self.segment = Segment(comm, control_bytes(self.n), 2 * self.n * self.slot, deadline,
                               self.ranks)
        self.posts = native.Flags(self.segment.words(POST))
        self.my_acks = native.Flags(self.segment.my_words(ACKS, self.n))        # I served q
        self.acks_for_me = native.Flags(self.segment.words(ACKS + self.me * LINE))  # q served me
        self._gave_up = self.segment.words(GAVE_UP)
        self.epoch = native.counter()

    def next_epoch(self):
        self.epoch[0] += 1
        return int(self.epoch[0])

    def post(self, epoch, sig, address=0):
        """Post my call of ``epoch``: ``address`` (CMA; 0: none) and ``sig``, then the flag."""
        native.post(self.posts, self.me, epoch, sig, address)

    def give_up(self, call):
        """Tell the others that an error ended my call number ``call`` unfinished: I will not
        come back."""
        if self._gave_up is not None and not self._gave_up[self.me]:
            self._gave_up[self.me] = call + 1

    def gave_up(self, peers, call):
        """Those of ``peers`` (local indices) that gave up in call number ``call`` or before."""
        return [q for q in peers if 0 < self._gave_up[q] <= call + 1]

    def gave_up_in(self, ranks):
        """{rank: the call it gave up in} for those of ``ranks`` (the communicator's) on my
        node that gave up."""
        if self._gave_up is None:
            return {}
        flags = {r: int(self._gave_up[self._index[r]]) for r in ranks if r in self._index}
        return {r: flag - 1 for r, flag in flags.items() if flag}

    def user_ranks(self, peers):
        return [self.ranks[q] for q in peers]

    def close(self):
        self.posts = self.my_acks = self.acks_for_me = None
        self._gave_up = None
        self.segment.close()
