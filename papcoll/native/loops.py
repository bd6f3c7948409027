"""The intra-node PAP loops (native/papcoll_native.h): a whole exchange step in one C call,
serving every peer as its post shows up.

:class:`PeerLoops` holds the loops' state, their polled sources (struct pc_sources, a
papcoll._native.Sources: which peers are pending, the order served, where the next scan
starts); :class:`SegmentLoops` adds the exchange through a node segment, over which a plan
(plan.py) runs whole calls; :class:`ListLoops` pairs sources with copy lists
(:class:`CopyList`), which a hierarchical round's tasks serve.

Every post carries the signature of its call (``PC_POST_SIG``: two banks after the flag); a
loop that finds a peer's signature different from its own raises :class:`SignatureMismatch`
before it reads a byte of that peer's data.
"""
import errno
import operator
import os

import numpy as np
from mpi4py import MPI

from .. import _native
from .cma import cma_error
from .flags import Flags
from .lib import ENOENT, EPROTO, ETIMEDOUT, bytes_view, check_index, start_index


class SignatureMismatch(Exception):
    """Process ``peer`` posted ``theirs`` for the epoch where this process posted ``mine``."""

    def __init__(self, peer, theirs, mine):
        self.peer, self.theirs, self.mine = peer, theirs, mine
        super().__init__(f"process {peer} posted signature {theirs:#x}, this one {mine:#x}")


def post(flags, i, epoch, sig, address=0):
    """Fill process i's post in ``flags`` for ``epoch`` (native pc_post, the one writer of a
    post): ``address`` (CMA; 0: none) and ``sig``, then the flag (release)."""
    flags.post(i, epoch, sig, address)


def post_sig(flags, i, epoch):
    """Process i's signature for ``epoch`` in its post (native pc_post_sig), read after the
    flag."""
    return flags.post_sig(i, epoch)


def post_address(flags, i):
    """The buffer address process i's post publishes (native pc_post_address)."""
    return flags.post_address(i)


def buffer_address(array):
    """The address of a contiguous buffer's data: mpi4py's buffer view takes a tenth of
    ``__array_interface__``'s time, read-only or not."""
    return MPI.buffer(array).address


def _check_blocks(buf, stride, length, count, what):
    """Check that the blocks i < count of buf, at i * stride of length bytes each, all lie
    inside it (the C loops refuse them too, without saying which)."""
    nbytes = buf.nbytes
    if count and (length < 0 or stride < 0 or (count - 1) * stride + length > nbytes):
        raise ValueError(f"{what}: {count} blocks of {length} bytes, stride {stride}, do not "
                         f"fit in its {nbytes} bytes")


class PeerLoops:
    """The C loops of an exchange among the n processes of a node (pc_cma_collect,
    pc_wait_all_ge), validated once.

    ``flags`` (a :class:`Flags` of n) are the words 0 of the processes' posts. The loops keep
    their state in ``sources`` (a struct pc_sources, papcoll._native.Sources, over
    ``pending``, uint8, 1 = peer still to serve, and ``served``, the order served; given, an
    exchange's own), which :meth:`expect` resets; a timed-out call
    leaves ``pending`` marking the missing peers, and ``start`` one past the peer served last.
    With ``batch=1`` every call serves one peer, so the caller can see each arrival in turn.
    """

    def __init__(self, flags, batch=None, sources=None):
        if not isinstance(flags, Flags):
            raise TypeError(f"flags must be a papcoll.native.Flags, not {type(flags).__name__}")
        self.flags, self.n = flags, flags.size
        self.pending = np.zeros(self.n, np.uint8)
        self.served = np.zeros(self.n, np.uintp)
        self.batch = operator.index(batch or self.n)
        if not 1 <= self.batch <= max(self.n, 1):
            raise ValueError(f"batch must be 1..{self.n}, not {self.batch}")
        self.sources = self.over(_native.Sources() if sources is None else sources)
        self.sources.max_served = self.batch
        self._mask = None

    def over(self, s):
        """``s`` (a Sources) over these loops' flags, pending and served arrays."""
        s.flags, s.stride, s.pending, s.n, s.served = (self.flags, self.flags.stride,
                                                       self.pending, self.n, self.served)
        s.max_served = self.n
        return s

    def _aim(self, target, sig, start):
        """The next call's target and signature, its scan from ``start``."""
        s = self.sources
        s.target, s.sig, s.start = target, sig, start_index(start, self.n)

    @property
    def start(self):
        """Where the next scan starts: the loops move it one past the peer they served last."""
        return self.sources.start

    @start.setter
    def start(self, value):
        self.sources.start = start_index(value, self.n)

    @property
    def failed(self):
        """The peer whose signature differed, or whose read failed, in the last call."""
        return self.sources.failed

    @property
    def left(self):
        """How many peers are still pending (the C loops clear ``pending`` as they serve)."""
        return int(np.count_nonzero(self.pending))

    def expect(self, peers):
        """Serve ``peers`` in the next calls: a bool/uint8 mask of n (the fast form, for hot
        paths: precompute it) or a sequence of indices."""
        if peers is self._mask:
            np.copyto(self.pending, peers, casting="unsafe")
            return
        if isinstance(peers, np.ndarray) and peers.shape == (self.n,) and peers.dtype in (
                np.bool_, np.uint8):
            np.copyto(self.pending, peers, casting="unsafe")
            self._mask = peers       # the same mask again costs one copy (it must not change)
        else:
            self.pending.fill(0)
            self.pending[list(peers)] = 1

    def missing(self):
        """Indices of the peers still pending."""
        return np.flatnonzero(self.pending).tolist()

    def mismatch(self, peer, epoch, sig):
        """The SignatureMismatch of ``peer``, whose post for ``epoch`` differs from ``sig``."""
        return SignatureMismatch(peer, post_sig(self.flags, peer, epoch), sig)

    def _served_now(self, rc):
        if rc == ETIMEDOUT:
            return self.served[:0]
        if rc < 0:
            raise ValueError(f"native loop rejected its arguments ({os.strerror(-rc)})")
        return self.served[:rc]

    def cma_collect(self, target, sig, start, pids, remote_offset, dst, dst_stride, length, acks,
                    timeout):
        """Read ``length`` bytes at (peer i's published address + remote_offset) in process
        ``pids[i]`` (int32 array; 0 = this process) into ``dst[i * dst_stride:]`` for each
        pending peer i whose flag is >= target and whose signature is ``sig``, in arrival
        order from ``start``; after each, store target in ``acks`` (a writable Flags of n).
        Returns the indices served (empty after timeout seconds); a failed read raises
        TransportError naming the pid (its ``peer`` is i), a different signature
        SignatureMismatch."""
        n = self.n
        if not (isinstance(pids, np.ndarray) and pids.dtype == np.int32 and pids.size == n
                and pids.flags.c_contiguous):
            raise TypeError(f"pids must be a contiguous int32 array of {n}")
        if not (isinstance(acks, Flags) and acks.size == n and acks.writable):
            raise TypeError(f"acks must be a writable Flags of {n}")
        _check_blocks(dst, dst_stride, length, n, "dst")
        self._aim(target, sig, start)
        rc = self.sources.cma_collect(pids, remote_offset, dst, dst_stride, length, acks,
                                      timeout)
        if rc == EPROTO:
            raise self.mismatch(self.failed, target, sig)
        if rc < 0 and rc not in (ETIMEDOUT, -errno.EINVAL, ENOENT):
            raise self.read_error(rc, pids, remote_offset, length)
        return self._served_now(rc)

    def read_error(self, rc, pids, remote_offset, length):
        """The TransportError of a CMA read (as :meth:`cma_collect`'s) that failed with ``rc``
        at source ``failed``, named by pid; its ``peer`` is the source, for the caller, who
        knows its rank."""
        i = self.failed
        remote = post_address(self.flags, i) + remote_offset
        error = cma_error(rc, "read of", int(pids[i]), length, remote)
        error.peer = i
        return error

    def wait_all(self, target, timeout):
        """Wait until every pending flag is >= target: True, or False after timeout seconds
        (``missing()`` then names the peers still short)."""
        self.sources.target = target
        rc = self.sources.wait_all_ge(timeout)
        if rc == -errno.EINVAL:
            raise ValueError("native wait rejected its arguments")
        return rc == 0


class SegmentLoops(PeerLoops):
    """:class:`PeerLoops` plus the whole exchange through a node segment in one C call
    (``pc_exchange_blocks``): ``flags`` (a writable Flags of n) are the processes' posts,
    ``regions`` (a writable contiguous array) holds their data regions ``region_stride`` bytes
    apart, each two banks of n slots of ``slot`` bytes. Epochs come from ``epoch`` (a
    lib.counter that every user of these posts shares, its plans too). ``x``: the exchange
    (struct pc_exchange), whose sources are the loops'."""

    def __init__(self, flags, me, regions, region_stride, slot, epoch, batch=None):
        x = _native.Exchange()
        super().__init__(flags, batch, x.s)
        n, self.me, self.slot = self.n, check_index(me, self.n, "me"), slot
        if not flags.writable:
            raise ValueError("flags must be writable: this process posts into them")
        regions = bytes_view(regions, True, "regions")
        if (n - 1) * region_stride + 2 * n * slot > regions.nbytes \
                or region_stride < 2 * n * slot:
            raise ValueError(f"regions must hold {n} regions of 2 x {n} slots of {slot} bytes, "
                             f"{region_stride} bytes apart ({regions.nbytes} bytes given)")
        x.me, x.post, x.mine, x.regions = (self.me, (flags, self.me * flags.stride),
                                           (regions, self.me * region_stride), regions)
        x.region_stride, x.slot = region_stride, slot
        self.x, self.epoch = x, epoch

    def next_epoch(self):
        self.epoch[0] += 1
        return int(self.epoch[0])

    def exchange(self, src, dst, block, length, epoch, sig, start, timeout):
        """One epoch: post ``length`` bytes of each of the n blocks of ``src`` (``block``
        bytes apart) and the call's signature ``sig``, unless already posted; then copy
        process i's block for me to ``dst[i * block:]`` as it posts (mine straight from
        ``src``), in arrival order from ``start``. Returns the processes this call served:
        their indices, empty after timeout seconds; a process whose signature differs
        raises SignatureMismatch."""
        s, d = MPI.buffer(src), MPI.buffer(dst)
        need = (self.n - 1) * block + length
        if d.readonly or not 0 <= length <= min(self.slot, block) or s.nbytes < need \
                or d.nbytes < need:
            raise ValueError(f"exchange: {self.n} blocks of {length} of {block} bytes do not "
                             f"fit a {self.slot}-byte slot, src ({s.nbytes} bytes) and writable"
                             f" dst ({d.nbytes} bytes)")
        self._aim(epoch, sig, start)
        rc = self.x.exchange_blocks(src, dst, block, length, timeout)
        if rc == EPROTO:
            raise self.mismatch(self.failed, epoch, sig)
        return self._served_now(rc)


class CopyList:
    """A copy list (struct pc_copies, served by the round's tasks: papcoll_hier.c), validated
    once: source i owns copies ``first[i]`` .. ``first[i + 1] - 1``, copy k moving up to
    ``length`` bytes from src + ``src[k]`` to dst + ``dst[k]``. A side is either offsets into
    the buffers a call passes (its base set per call) or absolute addresses in memory papcoll
    laid out (the node segment, base NULL), where ``length`` is the most that fits each
    place."""

    def __init__(self, first, dst, src, length):
        self.first = np.ascontiguousarray(first, np.uintp)
        self.dst = np.ascontiguousarray(dst, np.uintp)
        self.src = np.ascontiguousarray(src, np.uintp)
        if not (self.first.ndim == 1 and self.first[0] == 0
                and self.first[-1] == self.dst.size == self.src.size
                and (np.diff(self.first.astype(np.int64)) >= 0).all()):
            raise ValueError("a copy list's sources must own consecutive runs of its copies")
        self.n, self.length = self.first.size - 1, operator.index(length)

    def over(self, copies):
        """``copies`` (a struct pc_copies, papcoll._native.Copies) over the list, its bases
        and length set per round."""
        copies.first, copies.dst_off, copies.src_off = self.first, self.dst, self.src


class ListLoops(PeerLoops):
    """:class:`PeerLoops` whose sources bring the parts of a :class:`CopyList`: ``flags`` (a
    Flags of ``lists.n``) are the sources' flags, posts when their signature is checked."""

    def __init__(self, flags, lists, batch=None):
        super().__init__(flags, batch)
        if lists.n != self.n:
            raise ValueError(f"{lists.n} sources in the copy list for {self.n} flags")
        self.lists = lists
