"""The native intra-node loops (papcoll.native.PeerLoops, SegmentLoops): serving in arrival
order, resuming after a timeout, the plans that run whole calls over them (papcoll.native.Plan:
binding and running), CMA reads with acknowledgements -- between forked processes."""
import errno
import mmap
import os
import time
import types

import numpy as np
import pytest

from papcoll import native
from papcoll.errors import TransportError


def shared(nbytes):
    return np.frombuffer(mmap.mmap(-1, nbytes), np.uint8)


def flags_of(n, stride=64):
    """n flags, one per cache line, in shared memory."""
    return native.Flags(shared(n * stride).view(np.uint64)[::stride // 8])


def forked(child):
    pid = os.fork()
    if pid == 0:
        try:
            child()
        finally:
            os._exit(0)
    return pid


def segment_loops(n, me, slot=8, region_stride=None, batch=None):
    """SegmentLoops over n flags and n regions of two banks of n slots, in shared memory."""
    stride = region_stride or 2 * n * slot
    regions = shared(n * stride)
    return native.SegmentLoops(flags_of(n), me, regions, stride, slot, native.counter(),
                               batch), regions


def slot_of(regions, n, slot, owner, bank, peer):
    start = owner * 2 * n * slot + (bank * n + peer) * slot
    return regions[start:start + slot]


def test_exchange_posts_then_serves_in_arrival_order_from_start():
    n, slot, length = 5, 8, 3
    loops, regions = segment_loops(n, 0, slot)
    src = np.arange(n * 4, dtype=np.uint8) + 100                # my blocks, 4 bytes apart
    dst = np.zeros(n * 4, np.uint8)
    for i in (4, 1, 2):                                         # peers' epoch-7 posts (bank 1)
        slot_of(regions, n, slot, i, 1, 0)[:length] = 10 * i
        loops.flags.store(i, 7)
    served = loops.exchange(src, dst, 4, length, 7, 0, 2, 0)
    assert loops.flags.load(0) == 7                             # posted, then served
    for q in range(1, n):                                       # my own block is not posted
        assert (slot_of(regions, n, slot, 0, 1, q)[:length] == src[4 * q:4 * q + length]).all()
    assert (slot_of(regions, n, slot, 0, 1, 0) == 0).all()
    assert served.tolist() == [2, 4, 0, 1] and loops.left == 1 and loops.missing() == [3]
    assert (dst[4:7] == 10).all() and (dst[:3] == src[:3]).all() and (dst[12:16] == 0).all()
    loops.flags.store(3, 6)                                     # an older epoch is no arrival
    assert len(loops.exchange(src, dst, 4, length, 7, 0, 3, 0.01)) == 0
    slot_of(regions, n, slot, 3, 1, 0)[:length] = 30
    loops.flags.store(3, 7)
    assert loops.exchange(src, dst, 4, length, 7, 0, 3, 0).tolist() == [3]   # resumed: no re-post
    assert loops.left == 0 and (dst[12:15] == 30).all()


def test_batch_one_serves_one_per_call():
    loops, _ = segment_loops(3, 1, batch=1)
    for i in (0, 2):
        loops.flags.store(i, 1)
    src, dst = np.arange(6, dtype=np.uint8), np.zeros(6, np.uint8)
    assert loops.exchange(src, dst, 2, 2, 1, 0, 1, 0).tolist() == [1]
    assert loops.exchange(src, dst, 2, 2, 1, 0, 2, 0).tolist() == [2]
    assert loops.exchange(src, dst, 2, 2, 1, 0, 0, 0).tolist() == [0]
    assert loops.left == 0


def test_exchange_waits_for_a_late_process():
    n, slot = 2, 8
    loops, regions = segment_loops(n, 0, slot)

    def late():
        time.sleep(0.05)
        slot_of(regions, n, slot, 1, 1, 0)[:] = 9
        loops.flags.store(1, 3)

    pid = forked(late)
    dst = np.zeros(2 * 8, np.uint8)
    t0 = time.monotonic()
    # Scanning from 1: my own block (0) at once, then 1 once it posts, in one call.
    assert loops.exchange(np.ones(16, np.uint8), dst, 8, 8, 3, 0, 1, 5.0).tolist() == [0, 1]
    assert time.monotonic() - t0 >= 0.04 and (dst[8:] == 9).all() and (dst[:8] == 1).all()
    os.waitpid(pid, 0)


def bind(plan, send, recv, datatype=None, sig=0):
    """Plan.bind after a checked call with these buffers (``datatype``: the parsed one)."""
    return plan.bind(send, recv, types.SimpleNamespace(datatype=datatype), sig)


def u8(nbytes):
    return np.zeros(nbytes, np.uint8)


def test_a_plan_binds_only_a_shape_it_can_keep():
    loops, _ = segment_loops(2, 0, slot=4096)
    plan = native.Plan.segment(None, loops, 1, 1.0, native.SLICE)
    assert bind(plan, u8(2 * 4097), u8(2 * 4097))               # larger than a slot: in pieces
    assert not bind(plan, u8(7), u8(7))                          # not a whole block per peer
    assert not bind(plan, u8(0), u8(0))
    assert not bind(plan, u8(64), u8(64).view(np.int32))         # formats differ
    long = np.dtype([(name, "<i4") for name in ("aaaa", "bbbb", "cccc", "dddd")])
    assert not bind(plan, np.zeros(4, long), np.zeros(4, long))  # format too long to keep
    readonly = u8(64)
    readonly.flags.writeable = False
    assert not bind(plan, u8(64), readonly)
    both = u8(128)
    assert not bind(plan, both[:64], both[32:96])                # overlapping
    datatype = object()
    assert not bind(plan, [u8(64), datatype], u8(64), datatype)  # forms differ
    assert bind(plan, [u8(64), datatype], (u8(64), datatype), datatype)
    assert plan.run(u8(64), u8(64)) == 0                         # plain: declined, untouched
    assert plan.run([u8(64), object()], [u8(64), object()]) == 0     # another datatype
    plan.disarm()
    assert plan.run([u8(64), datatype], [u8(64), datatype]) == 0
    with pytest.raises(ValueError, match="every arrived peer"):
        native.Plan.segment(None, segment_loops(2, 0, batch=1)[0], 1, 1.0, native.SLICE)


def test_a_plan_runs_whole_calls_in_pieces_between_processes():
    """Two processes, 8-byte slots, 20-byte blocks: each call is three epochs in one C call."""
    n, slot, block = 2, 8, 20
    flags = flags_of(n)
    regions = shared(n * 2 * n * slot)
    results = shared(n * block)

    def process(me):
        loops = native.SegmentLoops(flags, me, regions, 2 * n * slot, slot, native.counter())
        plan = native.Plan.segment(None, loops, (me + 1) % n, 5.0, native.SLICE)
        recv = np.zeros(n * block, np.uint8)
        assert bind(plan, u8(n * block), recv, sig=0x0700 + block)
        for call in range(1, 4):
            send = np.array([[50 * call + 10 * me + peer] * block for peer in range(n)],
                            np.uint8).ravel()
            assert plan.run(send, recv) == 1
            want = np.array([[50 * call + 10 * src + me] * block for src in range(n)], np.uint8)
            assert (recv == want.ravel()).all(), (me, call, recv)
            assert plan.run(send[:-1], recv[:-1]) == 0          # another shape: declined
        assert int(loops.epoch[0]) == 9                            # 3 calls x 3 pieces
        return recv

    pid = forked(lambda: results.__setitem__(slice(None), process(1)))
    mine = process(0)
    os.waitpid(pid, 0)
    # The last call's blocks, each naming its source and destination (the child's, checked
    # here too: an assertion in the child only ends the child).
    assert (mine == np.repeat([150, 160], block)).all()
    assert (results == np.repeat([151, 161], block)).all()


def test_a_plan_gives_up_at_its_timeout():
    loops, _ = segment_loops(2, 0, slot=8)
    plan = native.Plan.segment(None, loops, 1, 0.05, native.SLICE)
    assert bind(plan, u8(16), u8(16))
    t0 = time.monotonic()
    assert plan.run(np.ones(16, np.uint8), np.zeros(16, np.uint8)) == -errno.ETIMEDOUT
    assert 0.04 <= time.monotonic() - t0 < 2 and loops.missing() == [1]


def test_argument_errors():
    loops, regions = segment_loops(2, 0, slot=4)
    buf = np.zeros(8, np.uint8)
    with pytest.raises(IndexError):
        loops.exchange(buf, buf.copy(), 4, 4, 1, 0, 2, 0)
    with pytest.raises(ValueError, match="do not fit"):
        loops.exchange(buf, buf.copy(), 4, 5, 1, 0, 0, 0)       # longer than a block and a slot
    ro = buf.copy()
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        loops.exchange(buf, ro, 4, 4, 1, 0, 0, 0)
    with pytest.raises(ValueError, match="regions"):
        native.SegmentLoops(flags_of(2), 0, regions[:60], 32, 4, native.counter())
    with pytest.raises(ValueError):
        native.PeerLoops(loops.flags, batch=3)
    with pytest.raises(TypeError):
        native.PeerLoops(np.zeros(2, np.uint64))


def test_cma_collect_reads_published_buffers_and_acknowledges():
    """Peer 1 is a forked process that publishes a private buffer; peer 0 is this process
    (pid 0: a memcpy). Reads land in arrival order and each is acknowledged."""
    native.allow_ptrace_any()
    posts = flags_of(2)                                 # word 0 epoch, PC_POST_ADDR address
    acks = flags_of(2)
    mine = np.arange(32, dtype=np.uint8)
    gate = shared(8)

    def peer():
        buf = np.arange(100, 132, dtype=np.uint8)       # private: only CMA reaches it
        native.post(posts, 1, 4, 0, buf.ctypes.data)
        while not gate[0]:
            time.sleep(0.001)

    pid = forked(peer)
    try:
        native.post(posts, 0, 4, 0, mine.ctypes.data)
        assert posts.wait_ge(1, 4, 5.0)                 # both posted: the scan order decides
        pids = np.array([0, pid], np.int32)
        dst = np.zeros(2 * 16, np.uint8)
        loops = native.PeerLoops(posts)
        loops.expect([0, 1])
        served = loops.cma_collect(4, 0, 1, pids, 16, dst, 16, 16, acks, 5.0)
        assert served.tolist() == [1, 0]
        assert (dst[:16] == mine[16:]).all() and (dst[16:] == np.arange(116, 132)).all()
        assert acks.load(0) == 4 and acks.load(1) == 4
    finally:
        gate[0] = 1
        os.waitpid(pid, 0)


def test_cma_collect_failure_names_the_process():
    posts, acks = flags_of(1), flags_of(1)
    native.post(posts, 0, 1, 0, 4096)
    gone = os.fork()
    if gone == 0:
        os._exit(0)
    os.waitpid(gone, 0)
    loops = native.PeerLoops(posts)
    loops.expect([0])
    with pytest.raises(TransportError, match=f"pid {gone}") as err:
        loops.cma_collect(1, 0, 0, np.array([gone], np.int32), 0, np.zeros(8, np.uint8), 8, 8,
                          acks, 1.0)
    assert err.value.errno == errno.ESRCH
    assert loops.missing() == [0] and acks.load(0) == 0


def test_exchange_never_copies_from_a_post_whose_signature_differs():
    n, slot = 3, 8
    loops, regions = segment_loops(n, 0, slot)
    for i, sig in ((1, 0x0100 + 8), (2, 0x0100 + 16)):         # 2's call has 16-byte blocks
        slot_of(regions, n, slot, i, 1, 0)[:] = 7 * i
        native.post(loops.flags, i, 5, sig)
    dst = np.zeros(3 * 8, np.uint8)
    with pytest.raises(native.SignatureMismatch) as err:
        loops.exchange(np.ones(24, np.uint8), dst, 8, 8, 5, 0x0100 + 8, 1, 0)
    assert (err.value.peer, err.value.theirs, err.value.mine) == (2, 0x0110, 0x0108)
    assert (dst[16:] == 0).all() and loops.missing() == [0, 2]    # nothing copied from 2,
    # and the scan (from 1) stopped there, before my own block
    assert (dst[8:16] == 7).all()                                 # 1 agreed: served
    assert native.post_sig(loops.flags, 0, 5) == 0x0108   # mine, bank 1


def test_an_empty_call_still_meets_and_checks_every_signature():
    loops, _ = segment_loops(2, 0, slot=8)
    native.post(loops.flags, 1, 3, 0x0200)
    empty = np.zeros(0, np.uint8)
    assert loops.exchange(empty, empty, 0, 0, 3, 0x0200, 1, 0).tolist() == [1, 0]
    native.post(loops.flags, 1, 4, 0x0208)                        # 8 bytes against my 0
    with pytest.raises(native.SignatureMismatch):
        loops.exchange(empty, empty, 0, 0, 4, 0x0200, 1, 0)


def test_a_plan_reports_a_signature_that_differs():
    loops, _ = segment_loops(2, 0, slot=8)
    plan = native.Plan.segment(None, loops, 1, 1.0, native.SLICE)
    assert bind(plan, u8(16), u8(16), sig=0x0308)
    native.post(loops.flags, 1, 1, 0x0310)
    assert plan.run(np.ones(16, np.uint8), np.zeros(16, np.uint8)) == native.EPROTO
    err = loops.mismatch(loops.failed, int(loops.epoch[0]), plan.s.sig)
    assert (err.peer, err.theirs, err.mine) == (1, 0x0310, 0x0308)


def test_cma_collect_never_reads_a_buffer_whose_signature_differs():
    posts, acks = flags_of(1), flags_of(1)
    native.post(posts, 0, 1, 0x0408, 4096)           # an address that would fault if read
    loops = native.PeerLoops(posts)
    loops.expect([0])
    with pytest.raises(native.SignatureMismatch) as err:
        loops.cma_collect(1, 0x0410, 0, np.array([os.getpid()], np.int32), 0,
                          np.zeros(16, np.uint8), 16, 16, acks, 1.0)
    assert (err.value.theirs, err.value.mine) == (0x0408, 0x0410)
    assert loops.missing() == [0] and acks.load(0) == 0
