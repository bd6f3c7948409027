"""Cross Memory Attach: copies between a local buffer (numpy array or any contiguous buffer)
and raw addresses in another process (``pc_cma_*`` in native/papcoll_native.h). A failure
raises :class:`papcoll.errors.TransportError` (an ``OSError``) whose ``errno`` is the kernel's
and whose message names the pid and the address."""
import errno
import operator
import os

import numpy as np

from .. import _native
from ..errors import TransportError
from .lib import uint_vector


def cma_error(rc, op, pid, nbytes, remote, segment=None):
    e = -rc
    where = f"segment {segment}: " if segment is not None else ""
    hint = " (check ptrace_scope; the target may need allow_ptrace_any())" \
        if e == errno.EPERM else ""
    return TransportError(e, f"CMA {op} {where}{nbytes} bytes at remote 0x{remote:x} in pid "
                             f"{pid}: {os.strerror(e)}{hint}")


def _cma_one(op, write, pid, local, remote_addr):
    rc = _native.cma_copy(pid, local, remote_addr, write)
    if rc < 0:
        raise cma_error(rc, op, pid, memoryview(local).nbytes, remote_addr)


def cma_read(pid, local, remote_addr):
    """Fill local (all its bytes) from address remote_addr in process pid."""
    _cma_one("read of", False, pid, local, remote_addr)


def cma_write(pid, remote_addr, local):
    """Copy all bytes of local to address remote_addr in process pid."""
    _cma_one("write of", True, pid, local, remote_addr)


def _cma_vector(op, write, pid, local, local_offsets, remote_addrs, lengths):
    lens = uint_vector(lengths, "lengths")
    remotes = uint_vector(remote_addrs, "remote_addrs")
    rc, i = _native.cma_vector(pid, local, uint_vector(local_offsets, "local_offsets"),
                               remotes, lens, write)
    if rc < 0:
        raise cma_error(rc, op, pid, int(lens[i]), int(remotes[i]), segment=i)
    return rc


def cma_readv(pid, local, local_offsets, remote_addrs, lengths):
    """Segment i: copy lengths[i] bytes from remote_addrs[i] in pid to
    local[local_offsets[i]:] (offsets in bytes). Up to IOV_MAX segments per
    syscall. Returns the byte total; on failure the earlier segments are done
    and the error names the failing segment."""
    return _cma_vector("readv", False, pid, local, local_offsets,
                       remote_addrs, lengths)


def cma_writev(pid, local, local_offsets, remote_addrs, lengths):
    """Segment i: copy lengths[i] bytes from local[local_offsets[i]:] to
    remote_addrs[i] in pid; as cma_readv."""
    return _cma_vector("writev", True, pid, local, local_offsets,
                       remote_addrs, lengths)


def cma_probe(pid, remote_addr, riov_len, *, riov_count=1, riov_stride=None, local=None,
              reps=100):
    """Per-call times (int64 ns array of length reps) of process_vm_readv with one
    local iovec (all of local, or 0 bytes if None) and riov_count remote iovecs of
    riov_len bytes at remote_addr + k * riov_stride (default riov_len). See
    pc_cma_probe for the combinations that isolate alpha, l and beta."""
    stride = riov_len if riov_stride is None else riov_stride
    if operator.index(reps) < 1:
        raise ValueError(f"need reps >= 1 (got {reps})")
    times = np.empty(reps, dtype=np.int64)
    rc = _native.cma_probe(pid, local, remote_addr, riov_count, riov_len, stride, times)
    if rc < 0:
        raise cma_error(rc, "probe of", pid, riov_count * riov_len, remote_addr)
    return times


def allow_ptrace_any():
    """Let other processes of this user use CMA on this one under Yama
    ptrace_scope 1 (a no-op without Yama). Raises TransportError on failure."""
    rc = _native.allow_ptrace_any()
    if rc < 0:
        raise TransportError(-rc, f"prctl(PR_SET_PTRACER, ANY): {os.strerror(-rc)}")


def drop_ptrace_any():
    """Undo allow_ptrace_any. Raises TransportError on failure."""
    rc = _native.drop_ptrace_any()
    if rc < 0:
        raise TransportError(-rc, f"prctl(PR_SET_PTRACER, 0): {os.strerror(-rc)}")
