"""ctypes binding of the native core (native/papcoll_native.h).

Flags are uint64 words in memory shared between processes (a numpy view of a
multiprocessing.shared_memory block, an mmap, an MPI shared window...). A flag
set is a 1-D uint64 array whose element stride may exceed 8 bytes, so flags
can be padded to cache lines with a strided view: ``Flags(segment_u64[::8])``.

Use the :class:`Flags` object in hot loops: it validates the array once and
caches its address (finding an array's address costs about a microsecond). The
module-level ``flag_*``/``wait_*``/``ready_ge`` functions validate on every
call. Every wait is bounded: timeouts are finite seconds >= 0 (0 = test once).
A long wait runs in slices of at most 0.1 s so that Ctrl-C gets through.

CMA functions copy between a local buffer (numpy array or any contiguous
buffer) and raw addresses in another process (see ``pc_cma_*`` in the header);
a failure raises :class:`papcoll.errors.TransportError` (an ``OSError``) whose
``errno`` is the kernel's and whose message names the pid and the address.

The intra-node loops (:class:`PeerLoops`, :class:`SegmentLoops`) run a whole
PAP-aware exchange step in one call: serve every peer as its flag shows up. A
:class:`Lane` runs whole calls over a SegmentLoops' exchange without Python:
``lane_alltoall`` is the one function that takes Python objects (the buffers),
from native/papcoll_lane.c in the same library, loaded as a module.
"""
import ctypes
import errno
import functools
import math
import operator
import os

import numpy as np
from mpi4py import MPI

from .errors import TransportError

IOV_MAX = os.sysconf("SC_IOV_MAX")

_U64 = np.dtype(np.uint64)
_SLICE_NS = 100_000_000  # longest single native wait, so signals are handled
_ETIMEDOUT = -errno.ETIMEDOUT
_ENOENT = -errno.ENOENT


def _load():
    try:
        from . import _native as module    # the same library, as a module: lane_alltoall
    except ImportError as e:
        raise ImportError("papcoll._native is not built; run ./scripts/setup") from e
    lib = ctypes.CDLL(module.__file__)
    c = ctypes
    ptr, i64, u64, size, ssize, pid = (c.c_void_p, c.c_int64, c.c_uint64, c.c_size_t,
                                       c.c_ssize_t, c.c_int)
    for name, restype, argtypes in [
        ("pc_now_ns", i64, []),
        ("pc_flag_store", None, [ptr, u64]),
        ("pc_flag_load", u64, [ptr]),
        ("pc_set_spin", None, [i64]),
        ("pc_wait_ge", c.c_int, [ptr, u64, i64]),
        ("pc_wait_any_ge", c.c_int, [ptr, size, ptr, size, u64, size, i64]),
        ("pc_wait_ready_ge", c.c_int, [ptr, size, ptr, size, u64, size, ptr, i64]),
        ("pc_cma_read", ssize, [pid, ptr, ptr, size]),
        ("pc_cma_write", ssize, [pid, ptr, ptr, size]),
        ("pc_cma_readv", ssize, [pid, size, ptr, ptr, ptr, c.POINTER(size)]),
        ("pc_cma_writev", ssize, [pid, size, ptr, ptr, ptr, c.POINTER(size)]),
        ("pc_cma_probe", ssize, [pid, ptr, size, c.c_size_t, size, size, size, size, ptr]),
        ("pc_allow_ptrace_any", c.c_int, []),
        ("pc_cma_collect", c.c_int, [ptr, size, ptr, size, u64, size, ptr, size, ptr, size,
                                     size, ptr, size, ptr, size, c.POINTER(size), i64]),
        ("pc_wait_all_ge", c.c_int, [ptr, size, ptr, size, u64, i64]),
        ("pc_exchange_blocks", c.c_int, [ptr, ptr, ptr, size, size, u64, size, i64]),
    ]:
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    module.set_in_place(MPI.IN_PLACE)
    return lib, module.lane_alltoall


_lib, lane_alltoall = _load()
now_ns = _lib.pc_now_ns
now_ns.__doc__ = "CLOCK_MONOTONIC in nanoseconds (the clock of every native deadline)."


# ---- argument checks ---------------------------------------------------------

def _address(array):
    # ndarray.ctypes.data builds a helper object on every call (~1 us); this is faster.
    return array.__array_interface__["data"][0]


def _index(value, size, what):
    i = operator.index(value)
    if not 0 <= i < size:
        raise IndexError(f"{what} {i} out of range for {size} flags")
    return i


def _start(start, n):
    s = operator.index(start)
    if n and not 0 <= s < n:
        raise IndexError(f"start {s} out of range for a pending mask of {n} entries")
    return s


def _timeout_ns(timeout):
    t = float(timeout)
    if not (math.isfinite(t) and t >= 0):
        raise ValueError(f"timeout must be finite seconds >= 0 (every wait is bounded), "
                         f"not {timeout!r}")
    return int(t * 1e9)


def _u64(value, what):
    v = operator.index(value)
    if not 0 <= v < 1 << 64:
        raise ValueError(f"{what} must fit in 64 unsigned bits, not {v}")
    return v


def _pid(pid):
    p = operator.index(pid)
    if not 0 < p < 1 << 31:
        raise ValueError(f"pid must be a positive process id, not {p}")
    return p


def _bytes_view(buf, writable, what):
    """A contiguous buffer as (array, address, nbytes), the array keeping it alive."""
    if not isinstance(buf, np.ndarray):
        try:
            buf = np.frombuffer(buf, dtype=np.uint8)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{what} must be a numpy array or a contiguous buffer, "
                            f"not {type(buf).__name__}") from e
    if not buf.flags.c_contiguous:
        raise ValueError(f"{what} must be C-contiguous (got strides {buf.strides})")
    if writable and not buf.flags.writeable:
        raise ValueError(f"{what} is read-only")
    return buf, _address(buf), buf.nbytes


def _uint_vector(values, what):
    a = np.asarray(values)
    if a.size == 0:
        a = a.astype(np.uintp)
    if a.ndim != 1:
        raise ValueError(f"{what} must be one-dimensional (got shape {a.shape})")
    if a.dtype.kind not in "iu":
        raise TypeError(f"{what} must hold integers (got dtype {a.dtype})")
    if a.dtype.kind == "i" and a.size and a.min() < 0:
        raise ValueError(f"{what}[{int(np.argmax(a < 0))}] is negative")
    return np.ascontiguousarray(a, dtype=np.uintp)


def _cma_error(rc, op, pid, nbytes, remote, segment=None):
    e = -rc
    where = f"segment {segment}: " if segment is not None else ""
    hint = " (check ptrace_scope; the target may need allow_ptrace_any())" \
        if e == errno.EPERM else ""
    return TransportError(e, f"CMA {op} {where}{nbytes} bytes at remote 0x{remote:x} in pid "
                             f"{pid}: {os.strerror(e)}{hint}")


# ---- flags ---------------------------------------------------------------------

SPIN = 2e-6   # seconds a wait spins before it yields its core, unless set_spin says otherwise


def set_spin(seconds):
    """How long every native wait of this process spins before it yields (process-wide):
    ``SPIN`` normally, 0 where processes outnumber cores (see pc_set_spin)."""
    _lib.pc_set_spin(_timeout_ns(seconds))


def _sliced(fn, args, timeout):
    """Call fn(*args, timeout_ns) in slices of at most _SLICE_NS until it does
    not time out or the whole timeout is used up; return its last result. A
    timed-out slice has lasted at least its length, so no clock is needed."""
    ns = _timeout_ns(timeout)
    while True:
        rc = fn(*args, min(ns, _SLICE_NS))
        if rc != _ETIMEDOUT or ns <= _SLICE_NS:
            return rc
        ns -= _SLICE_NS


class Flags:
    """A set of shared 64-bit flags: a 1-D uint64 array, validated once.

    Flag i is ``array[i]``; a strided view (``seg[::8]``) pads flags to cache
    lines. Stores are release, loads acquire (see pc_flag_* in the header).
    Pending masks are 1-D bool/uint8 arrays of length <= len(flags); flag i is
    waited for when ``pending[i]`` is true.
    """

    __slots__ = ("array", "address", "stride", "size", "_writable", "_mask", "_mask_addr")

    def __init__(self, array):
        if not isinstance(array, np.ndarray):
            raise TypeError(f"flags must be a numpy uint64 array, not {type(array).__name__}")
        if array.dtype != _U64:
            raise TypeError(f"flags must have dtype uint64 (native order), not {array.dtype}")
        if array.ndim != 1:
            raise ValueError(f"flags must be one-dimensional (got shape {array.shape})")
        stride = array.strides[0] if array.size > 1 else 8
        if stride <= 0 or stride % 8:
            raise ValueError(f"flags need a positive stride that is a multiple of 8 bytes, "
                             f"not {stride}")
        address = _address(array)
        if address % 8:
            raise ValueError(f"flags must be 8-byte aligned (address 0x{address:x})")
        self.array, self.address, self.stride, self.size = array, address, stride, array.size
        self._writable = array.flags.writeable
        self._mask = self._mask_addr = None

    def __len__(self):
        return self.size

    def load(self, index):
        """The value of flag index (acquire)."""
        return _lib.pc_flag_load(self.address + _index(index, self.size, "flag index") * self.stride)

    def store(self, index, value):
        """Publish value in flag index (release): earlier writes become visible first."""
        if not self._writable:
            raise ValueError("cannot store into a read-only flags array")
        _lib.pc_flag_store(self.address + _index(index, self.size, "flag index") * self.stride,
                           _u64(value, "flag value"))

    def wait_ge(self, index, target, timeout):
        """Wait until flag index >= target: True, or False after timeout seconds."""
        addr = self.address + _index(index, self.size, "flag index") * self.stride
        return _sliced(_lib.pc_wait_ge, (addr, _u64(target, "target")), timeout) == 0

    def _pending(self, pending):
        # The last mask's address is cached: PAP loops pass the same array each time.
        if pending is not self._mask:
            if not isinstance(pending, np.ndarray) or pending.dtype not in (np.bool_, np.uint8):
                raise TypeError("pending must be a numpy bool or uint8 array")
            if pending.ndim != 1 or not pending.flags.c_contiguous:
                raise ValueError("pending must be a one-dimensional C-contiguous array")
            if pending.size > self.size:
                raise ValueError(f"pending has {pending.size} entries for {self.size} flags")
            self._mask, self._mask_addr = pending, _address(pending)
        return self._mask_addr, pending.size

    def wait_any_ge(self, pending, target, timeout, start=0):
        """Index of a pending flag >= target, scanning from start (wrapping), or -1
        after timeout seconds. Pass start = one past the index served last (first
        (p + 1) % n) to serve peers in arrival order."""
        mask, n = self._pending(pending)
        rc = _sliced(_lib.pc_wait_any_ge,
                     (self.address, self.stride, mask, n, _u64(target, "target"),
                      _start(start, n)), timeout)
        return self._check_wait(rc)

    def wait_ready_ge(self, pending, target, timeout, start=0, out=None):
        """Indices (intp array, scan order from start) of ALL pending flags >= target
        once at least one is; empty after timeout seconds (0 = poll once). out: an
        optional intp array of len(pending) to reuse; the result is a view of it."""
        mask, n = self._pending(pending)
        if out is None:
            out = np.empty(n, dtype=np.intp)
        elif not (isinstance(out, np.ndarray) and out.dtype == np.intp and out.ndim == 1
                  and out.size >= n and out.flags.c_contiguous and out.flags.writeable):
            raise ValueError(f"out must be a writable contiguous intp array of >= {n} entries")
        rc = _sliced(_lib.pc_wait_ready_ge,
                     (self.address, self.stride, mask, n, _u64(target, "target"),
                      _start(start, n), _address(out)), timeout)
        return out[:max(self._check_wait(rc), 0)]

    def ready_ge(self, pending, target, start=0, out=None):
        """Indices of the pending flags already >= target (no waiting; may be empty)."""
        return self.wait_ready_ge(pending, target, 0, start, out)

    @staticmethod
    def _check_wait(rc):
        if rc >= 0:
            return rc
        if rc == _ETIMEDOUT:
            return -1
        if rc == _ENOENT:
            raise ValueError("no flag is pending: waiting would only time out")
        raise ValueError(f"native wait rejected its arguments ({os.strerror(-rc)})")


def flag_store(arr, index, value):
    """arr[index] = value with release ordering (see Flags.store)."""
    Flags(arr).store(index, value)


def flag_load(arr, index):
    """arr[index] with acquire ordering (see Flags.load)."""
    return Flags(arr).load(index)


def wait_ge(arr, index, target, timeout):
    """Wait until arr[index] >= target: True, or False after timeout seconds."""
    return Flags(arr).wait_ge(index, target, timeout)


def wait_any_ge(arr, pending, target, timeout, start=0):
    """See Flags.wait_any_ge: a ready pending index, or -1 on timeout."""
    return Flags(arr).wait_any_ge(pending, target, timeout, start)


def wait_ready_ge(arr, pending, target, timeout, start=0):
    """See Flags.wait_ready_ge: all ready pending indices, empty on timeout."""
    return Flags(arr).wait_ready_ge(pending, target, timeout, start)


def ready_ge(arr, pending, target, start=0):
    """See Flags.ready_ge: the pending indices already >= target."""
    return Flags(arr).ready_ge(pending, target, start)


# ---- Cross Memory Attach ----------------------------------------------------------

def _cma_one(fn, op, writable, pid, local, remote_addr):
    pid, remote = _pid(pid), _u64(remote_addr, "remote_addr")
    _, addr, n = _bytes_view(local, writable, "local")
    rc = fn(pid, addr, remote, n)
    if rc < 0:
        raise _cma_error(rc, op, pid, n, remote)


def cma_read(pid, local, remote_addr):
    """Fill local (all its bytes) from address remote_addr in process pid."""
    _cma_one(_lib.pc_cma_read, "read of", True, pid, local, remote_addr)


def cma_write(pid, remote_addr, local):
    """Copy all bytes of local to address remote_addr in process pid."""
    _cma_one(_lib.pc_cma_write, "write of", False, pid, local, remote_addr)


def _cma_vector(fn, op, writable, pid, local, local_offsets, remote_addrs, lengths):
    pid = _pid(pid)
    _, base, nbytes = _bytes_view(local, writable, "local")
    offsets = _uint_vector(local_offsets, "local_offsets")
    remotes = _uint_vector(remote_addrs, "remote_addrs")
    lens = _uint_vector(lengths, "lengths")
    if not offsets.size == remotes.size == lens.size:
        raise ValueError(f"local_offsets, remote_addrs and lengths differ in length "
                         f"({offsets.size}, {remotes.size}, {lens.size})")
    bad = (lens > nbytes) | (offsets > nbytes - np.minimum(lens, nbytes))
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"segment {i} (offset {offsets[i]}, length {lens[i]}) exceeds the "
                         f"{nbytes}-byte local buffer")
    addrs = offsets + np.uintp(base)
    err_seg = ctypes.c_size_t()
    rc = fn(pid, lens.size, _address(addrs), _address(remotes), _address(lens),
            ctypes.byref(err_seg))
    if rc < 0:
        i = err_seg.value
        raise _cma_error(rc, op, pid, int(lens[i]), int(remotes[i]), segment=i)
    return rc


def cma_readv(pid, local, local_offsets, remote_addrs, lengths):
    """Segment i: copy lengths[i] bytes from remote_addrs[i] in pid to
    local[local_offsets[i]:] (offsets in bytes). Up to IOV_MAX segments per
    syscall. Returns the byte total; on failure the earlier segments are done
    and the error names the failing segment."""
    return _cma_vector(_lib.pc_cma_readv, "readv", True, pid, local, local_offsets,
                       remote_addrs, lengths)


def cma_writev(pid, local, local_offsets, remote_addrs, lengths):
    """Segment i: copy lengths[i] bytes from local[local_offsets[i]:] to
    remote_addrs[i] in pid; as cma_readv."""
    return _cma_vector(_lib.pc_cma_writev, "writev", False, pid, local, local_offsets,
                       remote_addrs, lengths)


def cma_probe(pid, remote_addr, riov_len, *, riov_count=1, riov_stride=None, local=None,
              reps=100):
    """Per-call times (int64 ns array of length reps) of process_vm_readv with one
    local iovec (all of local, or 0 bytes if None) and riov_count remote iovecs of
    riov_len bytes at remote_addr + k * riov_stride (default riov_len). See
    pc_cma_probe for the combinations that isolate alpha, l and beta."""
    pid, remote = _pid(pid), _u64(remote_addr, "remote_addr")
    count, length = operator.index(riov_count), operator.index(riov_len)
    stride = length if riov_stride is None else operator.index(riov_stride)
    reps = operator.index(reps)
    if not 0 <= count <= IOV_MAX or length < 0 or stride < 0 or reps < 1:
        raise ValueError(f"need 0 <= riov_count <= {IOV_MAX}, riov_len >= 0, riov_stride >= 0,"
                         f" reps >= 1 (got {count}, {length}, {stride}, {reps})")
    addr, n = (None, 0) if local is None else _bytes_view(local, True, "local")[1:]
    times = np.empty(reps, dtype=np.int64)
    rc = _lib.pc_cma_probe(pid, addr, n, remote, count, length, stride, reps, _address(times))
    if rc < 0:
        raise _cma_error(rc, "probe of", pid, count * length, remote)
    return times


def allow_ptrace_any():
    """Let other processes of this user use CMA on this one under Yama
    ptrace_scope 1 (a no-op without Yama). Raises TransportError on failure."""
    rc = _lib.pc_allow_ptrace_any()
    if rc < 0:
        raise TransportError(-rc, f"prctl(PR_SET_PTRACER, ANY): {os.strerror(-rc)}")


# ---- intra-node PAP loops ------------------------------------------------------------

def buffer_address(array):
    """The address of a contiguous buffer's data: mpi4py's buffer view takes a tenth of
    ``__array_interface__``'s time, read-only or not."""
    return MPI.buffer(array).address


def _blocks_at(buf, stride, length, count, what):
    """The address of buf, after checking that its blocks i < count, at i * stride of length
    bytes each, all lie inside it."""
    address, nbytes = buffer_address(buf), buf.nbytes
    if count and (length < 0 or stride < 0 or (count - 1) * stride + length > nbytes):
        raise ValueError(f"{what}: {count} blocks of {length} bytes, stride {stride}, do not "
                         f"fit in its {nbytes} bytes")
    return address


class PeerLoops:
    """The C loops of an exchange among the n processes of a node (pc_cma_collect,
    pc_wait_all_ge), validated once.

    ``flags`` (a :class:`Flags` of n) are the peers' arrival flags; for the CMA loop each flag
    is word 0 of the peer's post and word 1 holds its buffer address. The loops keep their
    state in ``pending`` (uint8, 1 = peer still to serve) and ``served`` (the order served),
    which :meth:`expect` resets; a timed-out call leaves ``pending`` marking the missing peers.
    With ``batch=1`` every call serves one peer, so the caller can see each arrival in turn.
    """

    def __init__(self, flags, batch=None):
        if not isinstance(flags, Flags):
            raise TypeError(f"flags must be a papcoll.native.Flags, not {type(flags).__name__}")
        self.flags, self.n = flags, flags.size
        self.pending = np.zeros(self.n, np.uint8)
        self.served = np.zeros(self.n, np.uintp)
        self.batch = operator.index(batch or self.n)
        if not 1 <= self.batch <= max(self.n, 1):
            raise ValueError(f"batch must be 1..{self.n}, not {self.batch}")
        self._pending, self._served = _address(self.pending), _address(self.served)
        self._mask = self._pids = self._pids_addr = None

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

    def _served_now(self, rc):
        if rc == _ETIMEDOUT:
            return self.served[:0]
        if rc < 0:
            raise ValueError(f"native loop rejected its arguments ({os.strerror(-rc)})")
        return self.served[:rc]

    def cma_collect(self, target, start, pids, remote_offset, dst, dst_stride, length, acks,
                    timeout):
        """Read ``length`` bytes at (peer i's published address + remote_offset) in process
        ``pids[i]`` (int32 array; 0 = this process) into ``dst[i * dst_stride:]`` for each
        pending peer i whose flag is >= target, in arrival order from ``start``; after each,
        store target in ``acks`` (a writable Flags of n). Returns the indices served (empty
        after timeout seconds); a failed read raises TransportError naming the pid."""
        n = self.n
        if self._pids is None or pids is not self._pids[0] or acks is not self._pids[1]:
            if not (isinstance(pids, np.ndarray) and pids.dtype == np.int32 and pids.size == n
                    and pids.flags.c_contiguous):
                raise TypeError(f"pids must be a contiguous int32 array of {n}")
            if not (isinstance(acks, Flags) and acks.size == n and acks._writable):
                raise TypeError(f"acks must be a writable Flags of {n}")
            self._pids, self._pids_addr = (pids, acks), _address(pids)
        err = ctypes.c_size_t()
        rc = _lib.pc_cma_collect(self.flags.address, self.flags.stride, self._pending, n,
                                 target, _start(start, n), self._pids_addr, remote_offset,
                                 _blocks_at(dst, dst_stride, length, n, "dst"), dst_stride,
                                 length, acks.address,
                                 acks.stride, self._served, self.batch, ctypes.byref(err),
                                 _timeout_ns(timeout))
        if rc < 0 and rc not in (_ETIMEDOUT, -errno.EINVAL, _ENOENT):
            i = err.value
            remote = ctypes.c_uint64.from_address(self.flags.address + i * self.flags.stride + 8)
            raise _cma_error(rc, "read of", int(pids[i]), length, remote.value + remote_offset)
        return self._served_now(rc)

    def wait_all(self, target, timeout):
        """Wait until every pending flag is >= target: True, or False after timeout seconds
        (``missing()`` then names the peers still short)."""
        rc = _sliced(_lib.pc_wait_all_ge, (self.flags.address, self.flags.stride, self._pending,
                                           self.n, target), timeout)
        if rc == -errno.EINVAL:
            raise ValueError("native wait rejected its arguments")
        return rc == 0


class _Exchange(ctypes.Structure):     # struct pc_exchange
    _fields_ = [(name, ctypes.c_void_p if kind == "p" else ctypes.c_size_t) for name, kind in (
        ("flags", "p"), ("flag_stride", "n"), ("n", "n"), ("me", "n"), ("mine", "p"),
        ("regions", "p"), ("region_stride", "n"), ("slot", "n"), ("pending", "p"),
        ("served", "p"), ("max_served", "n"))]


class _Lane(ctypes.Structure):         # struct pc_lane
    _fields_ = [("x", ctypes.c_void_p), ("epoch", ctypes.c_void_p), ("start", ctypes.c_size_t),
                ("timeout_ns", ctypes.c_int64), ("nbytes", ctypes.c_int64),
                ("itemsize", ctypes.c_int64), ("format", ctypes.c_char * 16),
                ("datatype", ctypes.c_void_p), ("armed", ctypes.c_int)]


class SegmentLoops(PeerLoops):
    """:class:`PeerLoops` plus the whole exchange through a node segment in one C call
    (``pc_exchange_blocks``): ``flags`` (a writable Flags of n) are the processes' arrival
    flags, ``regions`` (a writable contiguous array) holds their data regions
    ``region_stride`` bytes apart, each two banks of n slots of ``slot`` bytes. Epochs come
    from :meth:`next_epoch`, a counter its :class:`Lane` objects share."""

    def __init__(self, flags, me, regions, region_stride, slot, batch=None):
        super().__init__(flags, batch)
        n, self.me, self.slot = self.n, _index(me, self.n, "me"), slot
        if not flags._writable:
            raise ValueError("flags must be writable: this process posts into them")
        self._regions, address, nbytes = _bytes_view(regions, True, "regions")   # kept alive
        if (n - 1) * region_stride + 2 * n * slot > nbytes or region_stride < 2 * n * slot:
            raise ValueError(f"regions must hold {n} regions of 2 x {n} slots of {slot} bytes, "
                             f"{region_stride} bytes apart ({nbytes} bytes given)")
        self._plan = _Exchange(flags.address, flags.stride, n, self.me,
                               address + self.me * region_stride, address,
                               region_stride, slot, self._pending, self._served, self.batch)
        self._plan_addr = ctypes.addressof(self._plan)
        self._epoch = ctypes.c_uint64(0)

    def next_epoch(self):
        self._epoch.value += 1
        return self._epoch.value

    def exchange(self, src, dst, block, length, epoch, start, timeout):
        """One epoch: post ``length`` bytes of each of the n blocks of ``src`` (``block``
        bytes apart) unless already posted, then copy process i's block for me to
        ``dst[i * block:]`` as it posts (mine straight from ``src``), in arrival order from
        ``start``. Returns the processes this call served: their indices, empty after
        timeout seconds."""
        s, d = MPI.buffer(src), MPI.buffer(dst)
        need = (self.n - 1) * block + length
        if d.readonly or not 0 <= length <= min(self.slot, block) or s.nbytes < need \
                or d.nbytes < need:
            raise ValueError(f"exchange: {self.n} blocks of {length} of {block} bytes do not "
                             f"fit a {self.slot}-byte slot, src ({s.nbytes} bytes) and writable"
                             f" dst ({d.nbytes} bytes)")
        return self._served_now(_lib.pc_exchange_blocks(
            self._plan_addr, s.address, d.address, block, length, epoch, _start(start, self.n),
            _timeout_ns(timeout)))


class Lane:
    """A fast lane over the exchange of ``loops`` (a :class:`SegmentLoops` that serves every
    arrived peer per call): ``run(sendbuf, recvbuf)`` is ``lane_alltoall`` -- a whole call in
    C, returning 1 when done, 0 to decline (the buffers do not have the armed shape; nothing
    was touched) and -ETIMEDOUT when peers did not come in time (``loops.missing()``)."""

    def __init__(self, loops):
        if loops.batch != loops.n:
            raise ValueError("a lane needs loops that serve every arrived peer per call")
        self._loops = loops                       # keeps the plan and the counter alive
        self._lane = _Lane(loops._plan_addr, ctypes.addressof(loops._epoch))
        self.run = functools.partial(lane_alltoall, ctypes.addressof(self._lane))

    def arm(self, nbytes, start, timeout, buffer_format=None, itemsize=0, datatype=None):
        """Serve calls of the shape of one the caller has fully checked: send and receive
        buffers of ``nbytes`` bytes, C-contiguous, either plain with items of ``itemsize``
        bytes and buffer ``format``, or -- with ``datatype`` -- ``[buf, datatype]`` specs
        naming that very object. Peers are served from ``start``; a call gives up after
        ``timeout`` seconds. Returns whether it is armed (a whole, non-empty block per peer,
        and a format short enough to keep)."""
        lane = self._lane
        lane.armed = 0
        code = b"" if datatype is not None else buffer_format.encode("ascii", "replace")
        n = self._loops.n
        if len(code) < _Lane.format.size and nbytes > 0 and nbytes % n == 0:
            self._datatype = datatype             # alive, so its id stays its own
            lane.format, lane.itemsize, lane.nbytes = code, itemsize, nbytes
            lane.datatype = None if datatype is None else id(datatype)
            lane.start, lane.timeout_ns = _start(start, n), _timeout_ns(timeout)
            lane.armed = 1
        return bool(lane.armed)

    def disarm(self):
        self._lane.armed = 0
