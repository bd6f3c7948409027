"""The native core's library (native/, built as papcoll._native) and the argument checks
Python's side of it shares. Nothing here knows what the functions are for."""
import errno
import operator
import os

import numpy as np
from mpi4py import MPI

SLICE = 0.1           # seconds: the longest native wait, so that Ctrl-C gets through

IOV_MAX = os.sysconf("SC_IOV_MAX")

ETIMEDOUT = -errno.ETIMEDOUT
ENOENT = -errno.ENOENT
EPROTO = -errno.EPROTO
EMSGSIZE = -errno.EMSGSIZE


try:
    from .. import _native
except ImportError as e:
    raise ImportError("papcoll._native is not built; run ./scripts/setup") from e


def _same_mpi():
    """The core calls MPI through the mpi.h it was built with (setup.py): refuse to run over
    another MPI than mpi4py's, whose handles would mean nothing to it."""
    ours = _native.mpi_library().splitlines()[:1]
    theirs = MPI.Get_library_version().rstrip("\0").splitlines()[:1]   # Open MPI counts its NUL
    if ours != theirs:
        raise ImportError(f"papcoll._native was built for another MPI ({ours}) than "
                          f"the one mpi4py loaded ({theirs}): rerun ./scripts/setup")


_same_mpi()
now_ns = _native.now_ns


# ---- argument checks ---------------------------------------------------------

def address(array):
    # ndarray.ctypes.data builds a helper object on every call (~1 us); this is faster.
    return array.__array_interface__["data"][0]


def check_index(value, size, what):
    i = operator.index(value)
    if not 0 <= i < size:
        raise IndexError(f"{what} {i} out of range for {size} flags")
    return i


def start_index(start, n):
    s = operator.index(start)
    if n and not 0 <= s < n:
        raise IndexError(f"start {s} out of range for a pending mask of {n} entries")
    return s


def bytes_view(buf, writable, what):
    """A contiguous buffer as a numpy array (checked: C-contiguous, writable if asked)."""
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
    return buf


def uint_vector(values, what):
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


def counter():
    """A 64-bit counter that C reads and advances too (a plan's epochs): one uint64, which the
    plans' structs hold."""
    return np.zeros(1, np.uint64)


def counted(name):
    """A property over the :func:`counter` ``name`` of the instance, as an int."""
    return property(lambda self: int(getattr(self, name)[0]),
                    lambda self, value: getattr(self, name).__setitem__(0, value))
