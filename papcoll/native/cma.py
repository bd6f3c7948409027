"""Cross Memory Attach: copies between a local buffer (numpy array or any contiguous buffer)
and raw addresses in another process (``pc_cma_*`` in native/papcoll_native.h). A failure
raises :class:`papcoll.errors.TransportError` (an ``OSError``) whose ``errno`` is the kernel's
and whose message names the pid and the address."""
import ctypes
import errno
import operator
import os

import numpy as np

from ..errors import TransportError
from .lib import IOV_MAX, address, bytes_view, check_pid, lib, u64, uint_vector


def cma_error(rc, op, pid, nbytes, remote, segment=None):
    e = -rc
    where = f"segment {segment}: " if segment is not None else ""
    hint = " (check ptrace_scope; the target may need allow_ptrace_any())" \
        if e == errno.EPERM else ""
    return TransportError(e, f"CMA {op} {where}{nbytes} bytes at remote 0x{remote:x} in pid "
                             f"{pid}: {os.strerror(e)}{hint}")


def _cma_one(fn, op, writable, pid, local, remote_addr):
    pid, remote = check_pid(pid), u64(remote_addr, "remote_addr")
    _, addr, n = bytes_view(local, writable, "local")
    rc = fn(pid, addr, remote, n)
    if rc < 0:
        raise cma_error(rc, op, pid, n, remote)


def cma_read(pid, local, remote_addr):
    """Fill local (all its bytes) from address remote_addr in process pid."""
    _cma_one(lib.pc_cma_read, "read of", True, pid, local, remote_addr)


def cma_write(pid, remote_addr, local):
    """Copy all bytes of local to address remote_addr in process pid."""
    _cma_one(lib.pc_cma_write, "write of", False, pid, local, remote_addr)


def _cma_vector(fn, op, writable, pid, local, local_offsets, remote_addrs, lengths):
    pid = check_pid(pid)
    _, base, nbytes = bytes_view(local, writable, "local")
    offsets = uint_vector(local_offsets, "local_offsets")
    remotes = uint_vector(remote_addrs, "remote_addrs")
    lens = uint_vector(lengths, "lengths")
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
    rc = fn(pid, lens.size, address(addrs), address(remotes), address(lens),
            ctypes.byref(err_seg))
    if rc < 0:
        i = err_seg.value
        raise cma_error(rc, op, pid, int(lens[i]), int(remotes[i]), segment=i)
    return rc


def cma_readv(pid, local, local_offsets, remote_addrs, lengths):
    """Segment i: copy lengths[i] bytes from remote_addrs[i] in pid to
    local[local_offsets[i]:] (offsets in bytes). Up to IOV_MAX segments per
    syscall. Returns the byte total; on failure the earlier segments are done
    and the error names the failing segment."""
    return _cma_vector(lib.pc_cma_readv, "readv", True, pid, local, local_offsets,
                       remote_addrs, lengths)


def cma_writev(pid, local, local_offsets, remote_addrs, lengths):
    """Segment i: copy lengths[i] bytes from local[local_offsets[i]:] to
    remote_addrs[i] in pid; as cma_readv."""
    return _cma_vector(lib.pc_cma_writev, "writev", False, pid, local, local_offsets,
                       remote_addrs, lengths)


def cma_probe(pid, remote_addr, riov_len, *, riov_count=1, riov_stride=None, local=None,
              reps=100):
    """Per-call times (int64 ns array of length reps) of process_vm_readv with one
    local iovec (all of local, or 0 bytes if None) and riov_count remote iovecs of
    riov_len bytes at remote_addr + k * riov_stride (default riov_len). See
    pc_cma_probe for the combinations that isolate alpha, l and beta."""
    pid, remote = check_pid(pid), u64(remote_addr, "remote_addr")
    count, length = operator.index(riov_count), operator.index(riov_len)
    stride = length if riov_stride is None else operator.index(riov_stride)
    reps = operator.index(reps)
    if not 0 <= count <= IOV_MAX or length < 0 or stride < 0 or reps < 1:
        raise ValueError(f"need 0 <= riov_count <= {IOV_MAX}, riov_len >= 0, riov_stride >= 0,"
                         f" reps >= 1 (got {count}, {length}, {stride}, {reps})")
    addr, n = (None, 0) if local is None else bytes_view(local, True, "local")[1:]
    times = np.empty(reps, dtype=np.int64)
    rc = lib.pc_cma_probe(pid, addr, n, remote, count, length, stride, reps, address(times))
    if rc < 0:
        raise cma_error(rc, "probe of", pid, count * length, remote)
    return times


def allow_ptrace_any():
    """Let other processes of this user use CMA on this one under Yama
    ptrace_scope 1 (a no-op without Yama). Raises TransportError on failure."""
    rc = lib.pc_allow_ptrace_any()
    if rc < 0:
        raise TransportError(-rc, f"prctl(PR_SET_PTRACER, ANY): {os.strerror(-rc)}")


def drop_ptrace_any():
    """Undo allow_ptrace_any. Raises TransportError on failure."""
    rc = lib.pc_drop_ptrace_any()
    if rc < 0:
        raise TransportError(-rc, f"prctl(PR_SET_PTRACER, 0): {os.strerror(-rc)}")
