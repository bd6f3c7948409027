"""Flags: 64-bit words in memory shared between processes, stored with release and loaded with
acquire ordering, and the bounded waits on them (native/papcoll_native.h).

A flag set is a 1-D uint64 array (a view of an mmap, a shared window...) whose element stride
may exceed 8 bytes, so flags can be padded to cache lines: ``Flags(segment_u64[::8])``. Use the
:class:`Flags` object in hot loops: it validates the array once and holds it (native
papcoll_pyflags.c); the module-level functions validate on every call. Every wait is
bounded: timeouts are finite seconds >= 0 (0 = test once). A wait is one native pc_wait with
the GIL released, which Ctrl-C does not interrupt: papcoll's own waits run them in slices of at
most lib.SLICE (progress.wait).
"""
import numpy as np

from .. import _native


class Flags(_native.Flags):
    """A set of shared 64-bit flags: a 1-D uint64 array, validated once (native Flags, which
    holds the array's memory while it lives).

    Flag i is ``array[i]``; a strided view (``seg[::8]``) pads flags to cache lines. Stores are
    release, loads acquire (see pc_flag_* in the header). Pending masks are 1-D bool/uint8
    arrays of length <= len(flags); flag i is waited for when ``pending[i]`` is true. Each
    process's post (papcoll_native.h) starts at its flag: ``post``, ``post_sig`` and
    ``post_address``, for flags at least 32 bytes apart.
    """

    __slots__ = ()

    def wait_ready_ge(self, pending, target, timeout, start=0, out=None):
        """Indices (intp array, scan order from start) of ALL pending flags >= target
        once at least one is; empty after timeout seconds (0 = poll once). out: an
        optional intp array of len(pending) to reuse; the result is a view of it."""
        if out is None:
            out = np.empty(len(pending), dtype=np.intp)
        return out[:max(self._wait_ready(pending, target, timeout, start, out), 0)]

    def ready_ge(self, pending, target, start=0, out=None):
        """Indices of the pending flags already >= target (no waiting; may be empty)."""
        return self.wait_ready_ge(pending, target, 0, start, out)


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

