"""The native intra-node loops (papcoll.native.PeerLoops, post_blocks): serving in arrival
order, resuming after a timeout, CMA reads with acknowledgements -- between forked processes."""
import ctypes
import errno
import mmap
import os
import time

import numpy as np
import pytest

from papcoll import native
from papcoll.errors import TransportError


def shared(nbytes):
    return np.frombuffer(mmap.mmap(-1, nbytes), np.uint8)


def flags_of(n, stride=64):
    """n flags, one per cache line, in shared memory."""
    return native.Flags(shared(n * stride).view(np.uint64)[::stride // 8])


def publish(posts, i, address):
    """Word 1 of post i: the buffer address its flag announces."""
    ctypes.c_uint64.from_address(posts.address + i * posts.stride + 8).value = address


def forked(child):
    pid = os.fork()
    if pid == 0:
        try:
            child()
        finally:
            os._exit(0)
    return pid


def test_post_blocks_copies_then_publishes():
    flags = flags_of(2)
    src = np.arange(40, dtype=np.uint8)
    dst = shared(4 * 16)
    native.post_blocks(src, 10, dst, 16, 7, 4, flags, 1, 5)
    assert flags.load(1) == 5 and flags.load(0) == 0
    for i in range(4):
        assert (dst[i * 16:i * 16 + 7] == src[i * 10:i * 10 + 7]).all()
        assert (dst[i * 16 + 7:(i + 1) * 16] == 0).all()
    with pytest.raises(ValueError, match="do not fit"):
        native.post_blocks(src, 10, dst, 16, 11, 4, flags, 1, 6)


def test_collect_serves_in_arrival_order_from_start():
    n, length = 5, 3
    flags = flags_of(n)
    regions = np.arange(n * 8, dtype=np.uint8)          # region i at 8 i
    dst = np.zeros(n * 4, np.uint8)
    loops = native.PeerLoops(flags)
    loops.expect_all()
    for i in (4, 1, 2):
        flags.store(i, 7)
    served = loops.collect_blocks(7, 2, regions, 8, dst, 4, length, 0)
    assert served.tolist() == [2, 4, 1] and loops.left == 2
    assert loops.missing() == [0, 3]
    assert (dst[4:7] == regions[8:11]).all() and (dst[:3] == 0).all()
    flags.store(0, 6)                                   # an older epoch is not an arrival
    assert len(loops.collect_blocks(7, 0, regions, 8, dst, 4, length, 0.01)) == 0
    flags.store(0, 8)
    flags.store(3, 7)
    assert loops.collect_blocks(7, 0, regions, 8, dst, 4, length, 0).tolist() == [0, 3]
    assert loops.left == 0
    assert (dst.reshape(n, 4)[:, :3] == regions.reshape(n, 8)[:, :3]).all()


def test_batch_one_serves_one_per_call():
    flags = flags_of(3)
    for i in range(3):
        flags.store(i, 1)
    loops = native.PeerLoops(flags, batch=1)
    loops.expect(np.array([1, 1, 0], np.uint8))
    src, dst = np.arange(6, dtype=np.uint8), np.zeros(6, np.uint8)
    assert loops.collect_blocks(1, 1, src, 2, dst, 2, 2, 0).tolist() == [1]
    assert loops.collect_blocks(1, 2, src, 2, dst, 2, 2, 0).tolist() == [0]
    assert loops.left == 0 and (dst[4:] == 0).all()


def test_collect_waits_for_a_late_process():
    flags = flags_of(2)
    regions = shared(2 * 64)
    loops = native.PeerLoops(flags)
    loops.expect([1])

    def late():
        time.sleep(0.05)
        regions[64:72] = 9
        flags.store(1, 3)

    pid = forked(late)
    dst = np.zeros(2 * 8, np.uint8)
    t0 = time.monotonic()
    assert loops.collect_blocks(3, 1, regions, 64, dst, 8, 8, 5.0).tolist() == [1]
    assert time.monotonic() - t0 >= 0.04 and (dst[8:] == 9).all()
    os.waitpid(pid, 0)


def test_wait_all_marks_the_missing():
    flags = flags_of(4)
    loops = native.PeerLoops(flags)
    loops.expect([0, 2, 3])
    flags.store(2, 1)
    assert not loops.wait_all(1, 0.02)
    assert loops.missing() == [0, 3]
    flags.store(0, 1)
    flags.store(3, 2)
    assert loops.wait_all(1, 0.02) and loops.left == 0


def test_argument_errors():
    flags = flags_of(2)
    loops = native.PeerLoops(flags)
    loops.expect_all()
    buf = np.zeros(8, np.uint8)
    with pytest.raises(IndexError):
        loops.collect_blocks(1, 2, buf, 4, buf, 4, 4, 0)
    with pytest.raises(ValueError, match="do not fit"):
        loops.collect_blocks(1, 0, buf, 4, buf, 4, 5, 0)
    with pytest.raises(ValueError):
        native.PeerLoops(flags, batch=3)
    with pytest.raises(TypeError):
        native.PeerLoops(np.zeros(2, np.uint64))
    loops.expect([])
    with pytest.raises(ValueError, match="rejected"):     # nothing pending: a bug, not a wait
        loops.collect_blocks(1, 0, buf, 4, buf, 4, 4, 0)


def test_cma_collect_reads_published_buffers_and_acknowledges():
    """Peer 1 is a forked process that publishes a private buffer; peer 0 is this process
    (pid 0: a memcpy). Reads land in arrival order and each is acknowledged."""
    native.allow_ptrace_any()
    posts = flags_of(2)                                 # word 0 epoch, word 1 address
    acks = flags_of(2)
    mine = np.arange(32, dtype=np.uint8)
    gate = shared(8)

    def peer():
        buf = np.arange(100, 132, dtype=np.uint8)       # private: only CMA reaches it
        publish(posts, 1, buf.ctypes.data)
        posts.store(1, 4)
        while not gate[0]:
            time.sleep(0.001)

    pid = forked(peer)
    try:
        publish(posts, 0, mine.ctypes.data)
        posts.store(0, 4)
        assert posts.wait_ge(1, 4, 5.0)                 # both posted: the scan order decides
        pids = np.array([0, pid], np.int32)
        dst = np.zeros(2 * 16, np.uint8)
        loops = native.PeerLoops(posts)
        loops.expect_all()
        served = loops.cma_collect(4, 1, pids, 16, dst, 16, 16, acks, 5.0)
        assert served.tolist() == [1, 0]
        assert (dst[:16] == mine[16:]).all() and (dst[16:] == np.arange(116, 132)).all()
        assert acks.load(0) == 4 and acks.load(1) == 4
    finally:
        gate[0] = 1
        os.waitpid(pid, 0)


def test_cma_collect_failure_names_the_process():
    posts, acks = flags_of(1), flags_of(1)
    publish(posts, 0, 4096)
    posts.store(0, 1)
    gone = os.fork()
    if gone == 0:
        os._exit(0)
    os.waitpid(gone, 0)
    loops = native.PeerLoops(posts)
    loops.expect_all()
    with pytest.raises(TransportError, match=f"pid {gone}") as err:
        loops.cma_collect(1, 0, np.array([gone], np.int32), 0, np.zeros(8, np.uint8), 8, 8,
                          acks, 1.0)
    assert err.value.errno == errno.ESRCH
    assert loops.missing() == [0] and acks.load(0) == 0
