"""The native core (papcoll.native): flags, bounded waits and CMA, between a
parent and a forked child. No MPI needed."""
import errno
import mmap
import os
import struct
import time

import numpy as np
import pytest

from papcoll import native
from papcoll.errors import TransportError


# ---- helpers -----------------------------------------------------------------

def shared_u64(n):
    """n zeroed uint64 words in an anonymous MAP_SHARED mapping (survives fork)."""
    return np.frombuffer(mmap.mmap(-1, n * 8), dtype=np.uint64)


def fork(child):
    """Run child() in a forked process; its exit status is 0 iff it returned."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            child()
            code = 0
        finally:
            os._exit(code)
    return pid


def join(pid, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0, "child failed"
            return
        time.sleep(0.001)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("child did not finish")


def read_exact(fd, n):
    chunks = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        assert chunk, "peer closed its pipe"
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


class Peer:
    """A forked process owning a buffer of random bytes (private, not shared):
    CMA is the only way into it. dump() returns its current contents."""

    def __init__(self, nbytes, seed=1):
        self.expected = np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8)
        from_parent, to_child = os.pipe()
        from_child, to_parent = os.pipe()
        self.pid = fork(lambda: self._serve(from_parent, to_parent))
        os.close(from_parent)
        os.close(to_parent)
        self._cmd, self._reply = to_child, from_child
        self.address, = struct.unpack("Q", read_exact(from_child, 8))

    def _serve(self, commands, replies):
        buf = self.expected.copy()
        os.write(replies, struct.pack("Q", buf.ctypes.data))
        while os.read(commands, 1) == b"d":
            os.write(replies, buf.tobytes())

    def dump(self):
        os.write(self._cmd, b"d")
        return np.frombuffer(read_exact(self._reply, self.expected.size), dtype=np.uint8)

    def close(self):
        os.write(self._cmd, b"q")
        os.close(self._cmd)
        os.close(self._reply)
        join(self.pid)


@pytest.fixture
def peer():
    p = Peer(3 << 20)
    yield p
    p.close()


# ---- flags across processes ------------------------------------------------------

def test_flag_store_load_across_fork():
    flags, data = shared_u64(1), shared_u64(1000)

    def child():
        data[:] = np.arange(1000, dtype=np.uint64) * 3
        native.flag_store(flags, 0, 42)  # release: data is visible before the flag

    pid = fork(child)
    assert native.wait_ge(flags, 0, 42, timeout=5.0)
    assert native.flag_load(flags, 0) == 42
    assert (data == np.arange(1000, dtype=np.uint64) * 3).all()
    join(pid)


def test_wait_ge_sees_a_late_store():
    flags = shared_u64(2)

    def child():
        time.sleep(0.05)
        native.flag_store(flags, 1, 7)

    t0 = time.monotonic()
    pid = fork(child)
    assert native.wait_ge(flags, 1, 7, timeout=5.0)
    assert time.monotonic() - t0 >= 0.04
    join(pid)


@pytest.mark.parametrize("timeout", [0.05, 0.25])  # 0.25 s runs in several native slices
def test_wait_ge_times_out_on_time(timeout):
    flags = native.Flags(shared_u64(1))
    t0 = time.monotonic()
    assert flags.wait_ge(0, 1, timeout) is False
    elapsed = time.monotonic() - t0
    assert timeout <= elapsed < timeout + 0.45


def test_zero_timeout_tests_once():
    flags = native.Flags(np.array([3], dtype=np.uint64))
    assert flags.wait_ge(0, 3, 0)
    assert not flags.wait_ge(0, 4, 0)


@pytest.mark.parametrize("timeout", [-1, float("nan"), float("inf")])
def test_every_wait_is_bounded(timeout):
    with pytest.raises(ValueError, match="timeout"):
        native.wait_ge(np.zeros(1, np.uint64), 0, 1, timeout)


def test_wait_any_ge_picks_ready_and_honours_pending():
    flags = native.Flags(np.array([5, 0, 5, 9], dtype=np.uint64))
    pending = np.array([1, 1, 0, 1], dtype=np.uint8)
    assert flags.wait_any_ge(pending, 5, 0, start=0) == 0
    assert flags.wait_any_ge(pending, 5, 0, start=1) == 3   # 1 not ready, 2 not pending
    assert flags.wait_any_ge(pending, 6, 0, start=0) == 3
    assert flags.wait_any_ge(pending, 10, 0.01) == -1
    pending[:] = 0
    with pytest.raises(ValueError, match="no flag is pending"):
        flags.wait_any_ge(pending, 5, 0)


def test_wait_any_ge_across_fork_serves_the_one_that_arrives():
    flags = shared_u64(4)

    def child():
        time.sleep(0.03)
        native.flag_store(flags, 2, 1)

    pid = fork(child)
    pending = np.ones(4, dtype=bool)
    assert native.wait_any_ge(flags, pending, 1, timeout=5.0, start=3) == 2
    join(pid)


def test_wait_ready_ge_returns_the_whole_batch_in_scan_order():
    flags = native.Flags(np.array([1, 0, 1, 1, 1], dtype=np.uint64))
    pending = np.array([True, True, True, False, True])
    assert flags.wait_ready_ge(pending, 1, 1.0, start=2).tolist() == [2, 4, 0]
    assert native.ready_ge(flags.array, pending, 1).tolist() == [0, 2, 4]
    assert native.ready_ge(flags.array, pending, 2).size == 0
    out = np.empty(5, dtype=np.intp)
    assert flags.ready_ge(pending, 1, out=out).base is out


def test_padded_flags_use_the_view_stride():
    segment = shared_u64(64)
    flags = native.Flags(segment[::8])   # one flag per 64-byte cache line
    assert len(flags) == 8 and flags.stride == 64
    flags.store(3, 11)
    assert segment[24] == 11 and segment.sum() == 11
    pending = np.ones(8, dtype=np.uint8)
    assert flags.wait_any_ge(pending, 11, 0, start=4) == 3
    assert flags.ready_ge(pending, 1).tolist() == [3]


def test_flag_argument_errors():
    with pytest.raises(TypeError, match="uint64"):
        native.Flags(np.zeros(4, dtype=np.int64))
    with pytest.raises(TypeError):
        native.Flags([0, 0])
    with pytest.raises(ValueError, match="one-dimensional"):
        native.Flags(np.zeros((2, 2), dtype=np.uint64))
    with pytest.raises(ValueError, match="aligned"):
        native.Flags(np.frombuffer(bytearray(20), dtype=np.uint64, count=2, offset=4))
    flags = native.Flags(np.zeros(4, dtype=np.uint64))
    with pytest.raises(IndexError, match="out of range"):
        flags.load(4)
    with pytest.raises(ValueError, match="64 unsigned bits"):
        flags.store(0, 1 << 64)
    with pytest.raises(TypeError, match="pending"):
        flags.wait_any_ge(np.ones(4, dtype=np.int32), 1, 0)
    with pytest.raises(ValueError, match="entries"):
        flags.wait_any_ge(np.ones(5, dtype=bool), 1, 0)
    with pytest.raises(IndexError, match="start"):
        flags.wait_any_ge(np.ones(4, dtype=bool), 1, 0, start=4)
    readonly = np.zeros(2, dtype=np.uint64)
    readonly.flags.writeable = False
    assert native.flag_load(readonly, 1) == 0
    with pytest.raises(ValueError, match="read-only"):
        native.flag_store(readonly, 0, 1)


def test_flags_hold_their_memory_while_they_live():
    region = mmap.mmap(-1, 4096)
    flags = native.Flags(np.frombuffer(region, np.uint64)[::8])
    flags.store(2, 7)
    with pytest.raises(BufferError):
        region.close()                   # the Flags' view still reads it
    del flags
    region.close()                       # the view went with the Flags


def test_posts_need_their_words_between_flags():
    flags = native.Flags(np.zeros(8, np.uint64))
    with pytest.raises(ValueError, match="32 bytes apart"):
        flags.post(0, 1, 2, 3)
    padded = np.zeros(32, np.uint64)
    posts = native.Flags(padded[::4])
    posts.post(1, 5, 0xab, 0x1000)
    assert padded[4:8].tolist() == [5, 0, 0xab, 0x1000]    # flag, sig bank 0, bank 1, address
    assert posts.post_sig(1, 5) == 0xab and posts.post_address(1) == 0x1000
    with pytest.raises(IndexError, match="out of range"):
        posts.post(8, 1, 0, 0)


def test_native_functions_refuse_bad_arguments():
    from mpi4py import MPI
    from papcoll import _native
    with pytest.raises(TypeError):
        _native.mpi_pack(None, 1, "not a datatype", bytearray(4), False)
    with pytest.raises(ValueError, match="read-only"):
        _native.mpi_pack(None, 1, MPI.INT, b"1234", False)
    with pytest.raises(TypeError, match="contiguous buffer"):
        _native.cma_copy(os.getpid(), [0], 4096, False)
    with pytest.raises(ValueError, match="64 unsigned bits"):
        _native.cma_copy(os.getpid(), bytearray(1), -1, False)
    with pytest.raises(ValueError, match="64 unsigned bits"):
        _native.inbox_slot(0, 4, 1 << 64, 8)
    with pytest.raises(ValueError, match="64 unsigned bits"):
        _native.notice_current(-1, 0)


def test_a_notice_is_current_for_its_own_sequence_number_only():
    """The calibration reads a board's notice words through the one format (pc_notice_word)."""
    from papcoll.native import xport
    boards = np.zeros(4, np.uint64)
    assert not xport.notice_current(int(boards[0]), 1)
    boards[0] = (7 << 40) | (1 << 32) | 100        # seq 7, code 1, 100 bytes
    assert xport.notice_current(int(boards[0]), 7)
    assert not any(xport.notice_current(int(boards[0]), s) for s in (6, 8))


# ---- DLPack (native/papcoll_dlpack.h) --------------------------------------------

@pytest.mark.parametrize("dtype,code,bits,lanes,typecode", [
    ("int32", 0, 32, 1, "i"), ("uint8", 1, 8, 1, "B"), ("float64", 2, 64, 1, "d"),
    ("complex128", 5, 128, 1, "D")])
def test_dlpack_dtype_reads_the_capsule_without_consuming_it(dtype, code, bits, lanes, typecode):
    from papcoll import _native, foreign
    capsule = np.zeros(3, dtype).__dlpack__()
    assert _native.dlpack_dtype(capsule) == (1, code, bits, lanes)
    assert _native.dlpack_dtype(capsule) == (_native.kDLCPU, code, bits, lanes)  # unconsumed
    assert foreign.typecode(np.zeros(3, dtype)) == typecode


def test_dlpack_dtype_refuses_what_is_not_an_unconsumed_dltensor():
    import datetime
    from papcoll import _native
    capsule = np.zeros(3).__dlpack__()

    class Once:                                 # hands numpy our capsule, which it consumes
        def __dlpack__(self, **kwargs):
            return capsule

        def __dlpack_device__(self):
            return (1, 0)

    np.from_dlpack(Once())                      # renames it "used_dltensor"
    for obj in (np.zeros(3), b"dltensor", datetime.datetime_CAPI, capsule):
        with pytest.raises(TypeError, match="DLPack capsule"):
            _native.dlpack_dtype(obj)


# ---- Cross Memory Attach -------------------------------------------------------

@pytest.mark.parametrize("size", [0, 1, 3, 4095, 4097, (1 << 20) + 13])
def test_cma_read_sizes(peer, size):
    offset = 7  # unaligned remote start
    local = np.zeros(size, dtype=np.uint8)
    native.cma_read(peer.pid, local, peer.address + offset)
    assert (local == peer.expected[offset:offset + size]).all()


@pytest.mark.parametrize("size", [0, 1, 5, 8191, (2 << 20) + 1])
def test_cma_write_sizes(peer, size):
    offset = 4093  # straddles a page boundary
    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8)
    native.cma_write(peer.pid, peer.address + offset, data)
    expected = peer.expected.copy()
    expected[offset:offset + size] = data
    assert (peer.dump() == expected).all()


def test_cma_accepts_other_dtypes_and_buffers(peer):
    local = np.zeros(5, dtype=np.complex128)   # 80 bytes
    native.cma_read(peer.pid, local, peer.address)
    assert local.tobytes() == peer.expected[:80].tobytes()
    raw = bytearray(33)
    native.cma_read(peer.pid, raw, peer.address + 1)
    assert bytes(raw) == peer.expected[1:34].tobytes()
    native.cma_write(peer.pid, peer.address, b"hello")
    assert peer.dump()[:5].tobytes() == b"hello"


def random_segments(rng, n, local_size, remote_size):
    """n segments (zero lengths included) at random, non-overlapping local offsets."""
    lengths = rng.integers(0, 600, n)
    lengths[rng.choice(n, n // 10, replace=False)] = 0
    local_offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    perm = rng.permutation(n)   # local order differs from remote order
    local_offsets = local_offsets[perm].copy()
    lengths = lengths[perm].copy()
    assert local_offsets.max() + lengths.max() <= local_size
    remote_offsets = rng.integers(0, remote_size - 600, n)
    return local_offsets, remote_offsets, lengths


def test_cma_readv_more_segments_than_iov_max(peer):
    n = 2 * native.IOV_MAX + 333
    rng = np.random.default_rng(5)
    local = np.zeros(n * 600, dtype=np.uint8)
    loff, roff, lens = random_segments(rng, n, local.size, peer.expected.size)
    moved = native.cma_readv(peer.pid, local, loff, peer.address + roff, lens)
    assert moved == lens.sum()
    for lo, ro, ln in zip(loff, roff, lens):
        assert (local[lo:lo + ln] == peer.expected[ro:ro + ln]).all()


def test_cma_writev_more_segments_than_iov_max(peer):
    n = native.IOV_MAX + 77
    rng = np.random.default_rng(6)
    local = rng.integers(0, 256, n * 600, dtype=np.uint8)
    # Distinct remote regions, so the expected result does not depend on order.
    lens = rng.integers(1, 600, n)
    roff = np.arange(n) * 600
    loff = rng.integers(0, local.size - 600, n)
    assert native.cma_writev(peer.pid, local, loff, peer.address + roff, lens) == lens.sum()
    expected = peer.expected.copy()
    for lo, ro, ln in zip(loff, roff, lens):
        expected[ro:ro + ln] = local[lo:lo + ln]
    assert (peer.dump() == expected).all()


def test_cma_readv_resumes_inside_a_segment():
    """The kernel moves at most MAX_RW_COUNT (2 GiB - 4 KiB) per call, so this
    2 GiB read stops inside segment 127 and must resume at the exact byte."""
    seg, n = 16 << 20, 130
    src = np.random.default_rng(7).integers(0, 256, seg, dtype=np.uint8)
    local = np.zeros(3 * seg, dtype=np.uint8)
    # Segments 0..126 all land on local[:seg] (scratch); 127..129 in turn after it.
    offsets = np.zeros(n, dtype=np.int64)
    offsets[127:] = [seg, 2 * seg, 2 * seg + 100]
    lens = np.full(n, seg)
    lens[128:] = 100
    moved = native.cma_readv(os.getpid(), local, offsets, np.full(n, src.ctypes.data), lens)
    assert moved == lens.sum() > 2 << 30
    assert (local[seg:2 * seg] == src).all()
    assert (local[2 * seg:2 * seg + 100] == src[:100]).all()
    assert (local[2 * seg + 100:2 * seg + 200] == src[:100]).all()


def test_cma_bad_address_is_efault(peer):
    with pytest.raises(TransportError) as info:
        native.cma_read(peer.pid, np.zeros(16, np.uint8), 8)
    assert isinstance(info.value, OSError) and info.value.errno == errno.EFAULT
    assert f"pid {peer.pid}" in str(info.value) and "0x8 " in str(info.value)


def test_cma_readv_error_names_the_segment_and_keeps_earlier_ones(peer):
    local = np.zeros(400, dtype=np.uint8)
    remotes = [peer.address, peer.address + 1000, 4096, peer.address]
    with pytest.raises(OSError) as info:
        native.cma_readv(peer.pid, local, [0, 100, 200, 300], remotes, [100, 100, 100, 100])
    assert info.value.errno == errno.EFAULT and "segment 2:" in str(info.value)
    assert (local[:100] == peer.expected[:100]).all()
    assert (local[100:200] == peer.expected[1000:1100]).all()


def test_cma_gone_process_is_esrch():
    pid = fork(lambda: None)
    join(pid)  # reaped: the pid names no process now
    with pytest.raises(OSError) as info:
        native.cma_read(pid, np.zeros(1, np.uint8), 4096)
    assert info.value.errno == errno.ESRCH and f"pid {pid}" in str(info.value)


def test_cma_argument_errors(peer):
    local = np.zeros(100, dtype=np.uint8)
    with pytest.raises(ValueError, match="exceeds"):
        native.cma_readv(peer.pid, local, [0, 50], [peer.address] * 2, [10, 51])
    with pytest.raises(ValueError, match="differ in length"):
        native.cma_readv(peer.pid, local, [0], [peer.address] * 2, [1, 1])
    with pytest.raises(ValueError, match="negative"):
        native.cma_readv(peer.pid, local, [-1], [peer.address], [1])
    with pytest.raises(ValueError, match="read-only"):
        native.cma_read(peer.pid, b"abc", peer.address)
    with pytest.raises(ValueError, match="contiguous"):
        native.cma_read(peer.pid, local[::2], peer.address)
    with pytest.raises(ValueError, match="pid"):
        native.cma_read(0, local, peer.address)
    assert native.cma_readv(peer.pid, local, [], [], []) == 0


def test_cma_probe_times_each_call(peer):
    page = mmap.PAGESIZE
    one = np.zeros(1, dtype=np.uint8)
    for kwargs in [dict(riov_len=0), dict(riov_len=1, local=one),
                   dict(riov_len=16 * page, local=one),
                   dict(riov_len=1, riov_count=16, riov_stride=page, local=np.zeros(16, np.uint8))]:
        times = native.cma_probe(peer.pid, peer.address, reps=5, **kwargs)
        assert times.shape == (5,) and (times > 0).all()
    with pytest.raises(ValueError, match="riov_count"):
        native.cma_probe(peer.pid, peer.address, 1, riov_count=native.IOV_MAX + 1)
    with pytest.raises(OSError) as info:
        native.cma_probe(peer.pid, 4096, 1, local=one)
    assert info.value.errno == errno.EFAULT


def test_allow_ptrace_any():
    native.allow_ptrace_any()   # succeeds with or without Yama
