"""Cross Memory Attach inside a node: single-copy transfers with process_vm_readv/writev.

A :class:`CmaNode` is set up once per Communicator and node, over its node board (board.py),
in two bounded meetings of the node's processes: every process allows CMA on itself
(``allow_ptrace_any``: Yama ptrace_scope 1 needs the opt-in) and shares its PID and the address
of a probe byte; each reads every peer's probe for real, which proves that CMA works here; the
second meeting says that nobody reads the probes any more and shares the verdicts. If CMA does
not work (EPERM under ptrace_scope >= 2, ENOSYS, a seccomp filter...), ``reason`` says why in
one line, the same on every process, and papcoll uses shared memory. The opt-in is dropped
again (``drop_ptrace_any``) when the last CmaNode of the process closes.

Buffer addresses travel per operation in posts on the board (word ``PC_POST_ADDR``) --
cma_pap's in the exchange posts, the primitives' in posts of their own --, acknowledgements in
ACKS and DONE words; one address per process is enough because whoever
publishes a buffer does not leave the operation before every process that accesses it has
said so (DONE or ACKS): nobody can still need my address of operation e once I publish one for
e + 1.

The one-to-all and all-to-one primitives of Chakraborty et al. ("Contention-aware
kernel-assisted MPI collectives") are methods: many readers of one process contend for its
page-table lock, so ``scatter_read``/``gather_write`` let at most k peers at a time at the root
(throttle factor k; k = n - 1 is parallel read/write), and ``scatter_write``/``gather_read``
have the root do every copy itself, one at a time, in the order the peers arrive. Their default
k is the one ``papcoll.bench cma-model`` measured on this machine when ``PAPCOLL_CMA_MODEL``
names its result, else ``THROTTLE``.
"""
import os

import numpy as np

from .. import config, native, progress, rendezvous, signature
from ..errors import PapcollTimeoutError, TransportError
from ..progress import Deadline
from .board import primitive_lines

THROTTLE = 4      # k without a measured model (the CMA paper's best on Broadwell)
MEASURED = "measured"   # the primitives' default k: the model's throttle, else THROTTLE
YAMA = "/proc/sys/kernel/yama/ptrace_scope"
PRIMITIVE = 0     # signature code of the primitives' posts (algorithms have codes >= 1)
_opted_in = 0     # CmaNodes of this process that keep PR_SET_PTRACER_ANY (a process-wide setting)


def turn_after(me, root, k, n):
    """Whose access to the root must end before mine starts when k of n processes at a time
    access it, in the order root+1, root+2, ...: the one k places earlier (None: no wait)."""
    position = (me - root) % n
    if k is None or position <= k:
        return None
    return (me - k) % n


class CmaNode:
    """Collective over the processes of ``board`` (ranks of ``comm``), bounded by ``deadline``:
    PIDs and the check. ``available`` / ``reason`` tell whether CMA works between all of them;
    operations give up after ``timeout`` seconds. ``close()`` is local and safe twice."""

    def __init__(self, board, comm, deadline, timeout=60.0):
        global _opted_in
        self.board, self.timeout = board, timeout
        self.n, self.me, self.ranks = board.n, board.me, board.ranks
        self.throttle = config.cma_throttle() or THROTTLE
        segment = board.segment
        at_post, at_done, self._at_acks = primitive_lines(self.n)
        self.posts = native.Flags(segment.words(at_post))       # the primitives' own posts
        self.done = native.Flags(segment.words(at_done))
        self.my_acks = native.Flags(segment.my_words(self._at_acks, self.n))
        self.loops = native.PeerLoops(self.posts)
        self.epoch = 0
        reason = None
        try:
            native.allow_ptrace_any()
            _opted_in += 1
            self._opted_in = True
        except TransportError as err:
            reason, self._opted_in = f"cannot allow CMA on this process: {err}", False
        probe = np.array([self.me + 1], np.uint8)
        meet = lambda what, value: rendezvous.exchange(comm, what, value, deadline, self.ranks)
        try:
            found = meet("CMA check", (os.getpid(), probe.ctypes.data))
            self.pids = np.array([found[r][0] for r in self.ranks], np.int32)
            reason = reason or self._read_probes([found[r][1] for r in self.ranks])
            verdicts = meet("CMA checked", reason)        # nobody reads the probes any more
        except BaseException:
            self.close()
            raise
        self.reason = next((verdicts[r] for r in self.ranks if verdicts[r]), None)

    @property
    def available(self):
        return self.reason is None

    def _read_probes(self, probes):
        """Why CMA does not work from this process to its peers (None if it does)."""
        got = np.zeros(1, np.uint8)
        for peer in range(self.n):
            if peer == self.me:
                continue
            try:
                native.cma_read(int(self.pids[peer]), got, probes[peer])
            except TransportError as err:
                return (f"process_vm_readv from rank {self.ranks[peer]} failed: {err}"
                        f"{_yama_note()}")
            if got[0] != peer + 1:
                return f"process_vm_readv from rank {self.ranks[peer]} returned wrong data"
        return None

    def close(self):
        global _opted_in
        if self._opted_in:
            self._opted_in = False
            _opted_in -= 1
            if _opted_in == 0:
                native.drop_ptrace_any()
        self.loops = self.posts = self.done = self.my_acks = None

    # ---- one operation -------------------------------------------------------------------

    def begin(self):
        """Start the next operation (every process of the node does so): its epoch."""
        if self.reason is not None:
            raise TransportError(f"CMA is unavailable here: {self.reason}")
        self.deadline = Deadline(self.timeout)
        self.epoch += 1
        return self.epoch

    def post(self, array, epoch):
        """Publish the address of ``array`` for operation ``epoch``."""
        native.post(self.posts, self.me, epoch, signature.make(PRIMITIVE, array.nbytes),
                    native.buffer_address(array) if array.nbytes else 0)

    def wait(self, flags, index, epoch, what):
        """Wait until ``flags[index] >= epoch`` or raise naming local rank ``index``."""
        progress.wait(lambda seconds: flags.wait_ge(index, epoch, seconds), self.deadline,
                      lambda: PapcollTimeoutError(f"CMA {what}", [self.ranks[index]],
                                                  self.timeout))

    def wait_all(self, flags, peers, epoch, what):
        """Wait until ``flags[q] >= epoch`` for every q in peers, or raise naming the missing."""
        loops = native.PeerLoops(flags)
        loops.expect(peers)
        progress.wait(lambda seconds: loops.wait_all(epoch, seconds), self.deadline,
                      lambda: PapcollTimeoutError(f"CMA {what}", self.user_ranks(loops.missing()),
                                                  self.timeout))

    def user_ranks(self, peers):
        return [self.ranks[q] for q in peers]

    def address(self, peer):
        """The buffer address ``peer`` published (read after its flag)."""
        return native.post_address(self.posts, peer)

    def _others(self, root):
        return [q for q in range(self.n) if q != root]

    # ---- one-to-all ----------------------------------------------------------------------

    def scatter_read(self, root, send, recv, k=MEASURED):
        """One-to-all, reader-driven: every process reads its block of ``send`` (root's, n
        blocks of recv.nbytes) into ``recv``, at most ``k`` at a time in the order root+1,
        root+2, ... (throttled read; None: all at once, parallel read)."""
        k = self.throttle if k == MEASURED else k
        epoch = self.begin()
        if self.me == root:
            self.post(send, epoch)
            recv[:] = send[root * recv.nbytes:(root + 1) * recv.nbytes]
            self.wait_all(self.done, self._others(root), epoch, "scatter: waiting for readers")
            return
        self._throttled(root, k, epoch, lambda addr: native.cma_read(
            int(self.pids[root]), recv, addr + self.me * recv.nbytes))

    def scatter_write(self, root, send, recv):
        """One-to-all, root-driven: the root writes each process's block into its ``recv``
        itself, one at a time, in the order the processes arrive (sequential write)."""
        epoch = self.begin()
        if self.me != root:
            self.post(recv, epoch)
            self.wait(self.acks_of(root), self.me, epoch, "scatter: waiting for the root")
            return
        recv[:] = send[root * recv.nbytes:(root + 1) * recv.nbytes]
        size = recv.nbytes

        def write(peer):
            native.cma_write(int(self.pids[peer]), self.address(peer),
                             send[peer * size:(peer + 1) * size])
        self._root_serves(root, epoch, write, "scatter: waiting for processes")

    # ---- all-to-one ----------------------------------------------------------------------

    def gather_write(self, root, send, recv, k=MEASURED):
        """All-to-one, writer-driven: every process writes ``send`` into its block of the
        root's ``recv``, at most ``k`` at a time (throttled write; None: parallel write)."""
        k = self.throttle if k == MEASURED else k
        epoch = self.begin()
        if self.me == root:
            self.post(recv, epoch)
            recv[root * send.nbytes:(root + 1) * send.nbytes] = send
            self.wait_all(self.done, self._others(root), epoch, "gather: waiting for writers")
            return
        self._throttled(root, k, epoch, lambda addr: native.cma_write(
            int(self.pids[root]), addr + self.me * send.nbytes, send))

    def gather_read(self, root, send, recv):
        """All-to-one, root-driven: the root reads every process's ``send`` into its block of
        ``recv`` itself, one at a time, in the order the processes arrive (sequential read)."""
        epoch = self.begin()
        if self.me != root:
            self.post(send, epoch)
            self.wait(self.acks_of(root), self.me, epoch, "gather: waiting for the root")
            return
        size = send.nbytes
        recv[root * size:(root + 1) * size] = send
        self.loops.expect(self._others(root))
        sig = signature.make(PRIMITIVE, size)

        def step(seconds):
            self.loops.cma_collect(epoch, sig, (root + 1) % self.n, self.pids, 0, recv, size,
                                   size, self.my_acks, seconds)
            return not self.loops.left
        if self.loops.left:
            progress.wait(step, self.deadline,
                          lambda: PapcollTimeoutError("CMA gather: waiting for processes",
                                                      self.user_ranks(self.loops.missing()),
                                                      self.timeout))

    # ---- shared steps --------------------------------------------------------------------

    def acks_of(self, peer):
        """``peer``'s ACKS words of the primitives (entry q: the epoch in which it last served
        q)."""
        return native.Flags(self.board.segment.page_words(peer, self._at_acks, self.n))

    def _throttled(self, root, k, epoch, access):
        """A non-root's turn in a throttled operation: wait for the root's buffer and for the
        process k places earlier, access the root's buffer, say DONE."""
        self.wait(self.posts, root, epoch, "waiting for the root's buffer")
        before = turn_after(self.me, root, k, self.n)
        if before is not None:
            self.wait(self.done, before, epoch, "waiting for my turn")
        access(self.address(root))
        self.done.store(self.me, epoch)

    def _root_serves(self, root, epoch, serve, what):
        """The root serves every other process as soon as it has posted, starting at root+1;
        each is told by its ACKS entry."""
        pending = np.ones(self.n, np.uint8)
        pending[root] = 0
        out = np.empty(self.n, np.intp)
        start = (root + 1) % self.n

        def step(seconds):
            nonlocal start
            for peer in self.posts.wait_ready_ge(pending, epoch, seconds, start, out):
                serve(int(peer))
                self.my_acks.store(peer, epoch)
                pending[peer] = 0
                start = (int(peer) + 1) % self.n
            return not pending.any()
        if pending.any():
            progress.wait(step, self.deadline,
                          lambda: PapcollTimeoutError(f"CMA {what}",
                                                      self.user_ranks(np.flatnonzero(pending)),
                                                      self.timeout))


# ---- status for `python -m papcoll info` ----------------------------------------------------

def _yama_scope():
    try:
        with open(YAMA) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def _yama_note():
    scope = _yama_scope()
    return "" if scope is None else f" (Yama ptrace_scope={scope})"


def _probe_from_child():
    """Whether a child process may read this process's memory with CMA, as a sibling rank
    would after this process opted in: None, or why not. The opt-in ends with the probe
    unless a CmaNode of this process keeps it."""
    try:
        native.allow_ptrace_any()
    except TransportError as err:
        return f"cannot allow CMA on this process: {err}"
    try:
        code = _child_reads(np.array([42], np.uint8))
    finally:
        if _opted_in == 0:
            native.drop_ptrace_any()
    if code == 0:
        return None
    if 0 < code < 254:
        return f"process_vm_readv: {os.strerror(code)}{_yama_note()}"
    return f"process_vm_readv failed (child exit status {code}){_yama_note()}"


def _child_reads(probe):
    """The exit status of a child that reads ``probe`` (one byte) with CMA: 0 if it read it,
    the errno, or 254/255."""
    parent, address, want = os.getpid(), probe.ctypes.data, int(probe[0])
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            got = np.zeros(1, np.uint8)
            native.cma_read(parent, got, address)
            code = 0 if got[0] == want else 255
        except TransportError as err:
            code = err.errno or 254
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def cma_status():
    """One line: whether CMA works between processes of this user here, and why."""
    reason = _probe_from_child()
    if reason is not None:
        return f"CMA: unavailable: {reason}; using shared memory"
    scope = _yama_scope()
    if scope is None:
        how = "no Yama ptrace restrictions"
    elif scope == 0:
        how = "Yama ptrace_scope=0"
    else:
        how = f"Yama ptrace_scope={scope}, opted in with PR_SET_PTRACER"
    return f"CMA: available ({how})"

