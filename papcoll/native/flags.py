"""Flags: 64-bit words in memory shared between processes, stored with release and loaded with
acquire ordering, and the bounded waits on them (native/papcoll_native.h).

A flag set is a 1-D uint64 array (a view of an mmap, a shared window...) whose element stride
may exceed 8 bytes, so flags can be padded to cache lines: ``Flags(segment_u64[::8])``. Use the
:class:`Flags` object in hot loops: it validates the array once and caches its address (finding
an array's address costs about a microsecond); the module-level functions validate on every
call. Every wait is bounded: timeouts are finite seconds >= 0 (0 = test once). A wait is one
native pc_wait with the GIL released, which Ctrl-C does not interrupt: papcoll's own waits run
them in slices of at most lib.SLICE (progress.wait).
"""
import os

import numpy as np

from .lib import ENOENT, ETIMEDOUT, address, check_index, lib, start_index, timeout_ns, u64

_U64 = np.dtype(np.uint64)


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
        where = address(array)
        if where % 8:
            raise ValueError(f"flags must be 8-byte aligned (address 0x{where:x})")
        self.array, self.address, self.stride, self.size = array, where, stride, array.size
        self._writable = array.flags.writeable
        self._mask = self._mask_addr = None

    def __len__(self):
        return self.size

    def _at(self, index):
        return self.address + check_index(index, self.size, "flag index") * self.stride

    def load(self, index):
        """The value of flag index (acquire)."""
        return lib.pc_flag_load(self._at(index))

    def store(self, index, value):
        """Publish value in flag index (release): earlier writes become visible first."""
        if not self._writable:
            raise ValueError("cannot store into a read-only flags array")
        lib.pc_flag_store(self._at(index), u64(value, "flag value"))

    def wait_ge(self, index, target, timeout):
        """Wait until flag index >= target: True, or False after timeout seconds."""
        return lib.pc_wait_ge(self._at(index), u64(target, "target"), timeout_ns(timeout)) == 0

    def _pending(self, pending):
        # The last mask's address is cached: PAP loops pass the same array each time.
        if pending is not self._mask:
            if not isinstance(pending, np.ndarray) or pending.dtype not in (np.bool_, np.uint8):
                raise TypeError("pending must be a numpy bool or uint8 array")
            if pending.ndim != 1 or not pending.flags.c_contiguous:
                raise ValueError("pending must be a one-dimensional C-contiguous array")
            if pending.size > self.size:
                raise ValueError(f"pending has {pending.size} entries for {self.size} flags")
            self._mask, self._mask_addr = pending, address(pending)
        return self._mask_addr, pending.size

    def wait_any_ge(self, pending, target, timeout, start=0):
        """Index of a pending flag >= target, scanning from start (wrapping), or -1
        after timeout seconds. Pass start = one past the index served last (first
        (p + 1) % n) to serve peers in arrival order."""
        mask, n = self._pending(pending)
        rc = lib.pc_wait_any_ge(self.address, self.stride, mask, n, u64(target, "target"),
                                start_index(start, n), timeout_ns(timeout))
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
        rc = lib.pc_wait_ready_ge(self.address, self.stride, mask, n, u64(target, "target"),
                                  start_index(start, n), address(out), timeout_ns(timeout))
        return out[:max(self._check_wait(rc), 0)]

    def ready_ge(self, pending, target, start=0, out=None):
        """Indices of the pending flags already >= target (no waiting; may be empty)."""
        return self.wait_ready_ge(pending, target, 0, start, out)

    @staticmethod
    def _check_wait(rc):
        if rc >= 0:
            return rc
        if rc == ETIMEDOUT:
            return -1
        if rc == ENOENT:
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

