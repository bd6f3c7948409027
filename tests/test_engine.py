"""The one-sided engine (native/papcoll_exchange.c, pc_xcall_run) in one process, no MPI: every
rank's Exchange over the loop transport (PC_LOOP: a put is a copy into the peer's memory and a
store on its board), stepped by hand. Running one rank's call a pass at a time, in an order
the test chooses, drives it through its states -- waiting, seeing a peer's data or
advertisement, writing to it, done -- and checks what each state promises: a call is done only
once every block is in, each block is the right one (every byte names its source, destination
and index), the engine sees exactly the arrivals that happened, and a peer whose call differs
is named with what it called."""
import errno
import types

import numpy as np
import pytest

from papcoll import _native, signature
from papcoll.native import ETIMEDOUT, EPROTO, xport
from papcoll.native.lib import address
from papcoll.algorithms.calls import Persistent
from papcoll.algorithms.exchange import Exchange
from papcoll.trace import NoTrace
from papcoll.transport.base import Descriptor

DONE = 1


class LoopTransport:
    """What Exchange needs of a transport, for rank ``rank`` of ``ranks``' memory (``ranks``
    holds every rank's boards, inbox and adverts area: a dict of arrays per rank)."""
    inline = 1 << 62

    def __init__(self, rank, ranks):
        n, mine = len(ranks), ranks[rank]
        self.rank, self.size, self.inbox = rank, n, mine["inbox"]
        self.advert_area = mine["adverts"]
        self.native = xport.XPort(xport.PC_LOOP, n, rank, mine["boards"])
        self.native.set_inbox_bytes([ranks[q]["inbox"].nbytes for q in range(n)])
        for q, theirs in enumerate(ranks):
            self.native.loop_peer(q, theirs["boards"], theirs["adverts"], theirs["inbox"])

    def expose(self, array):
        return Descriptor(address(array), array.nbytes, 0)

    def source_key(self, data):
        return 0


def exchanges(n, slot):
    """An Exchange for each of ``n`` ranks sharing this process, inboxes of ``slot``-byte slots."""
    memory = [{"boards": np.zeros(2 * 2 * n, np.uint64),
               "inbox": np.zeros(2 * n * slot, np.uint8),
               "adverts": np.zeros(n * xport.ADVERT_BYTES, np.uint8)} for _ in range(n)]
    algo = types.SimpleNamespace(ctx=types.SimpleNamespace(trace=NoTrace(), timeout=5.0),
                                 mismatch=lambda rank, theirs, mine: (rank, theirs, mine))
    return [Exchange(algo, LoopTransport(r, memory), range(n)) for r in range(n)], memory


def data(src, dst, block, call=1):
    """Block ``src`` -> ``dst``: every byte names call, source, destination and index."""
    return ((call * 64 + src * 8 + dst) * 7 + np.arange(block)).astype(np.uint8)


def begin(x, scheme, block, call=1, code=7):
    """Rank x.rank's call ``call`` as Exchange.run starts one (without driving it): (the
    engine's call, the receive buffer)."""
    n, me, sig = x.size, x.rank, signature.make(code, block)
    send = np.concatenate([data(me, q, block, call) for q in range(n)])
    recv = np.zeros(n * block, np.uint8)
    recv[me * block:(me + 1) * block] = send[me * block:(me + 1) * block]
    x.begin(sig)
    c = x.prepare(scheme, block, block if scheme == xport.COPY else 0)
    if scheme != xport.COPY:
        x.adverts += 1
    x.start(c, block)
    if scheme != xport.COPY:
        c.s.advert(0, recv.ctypes.data, recv.nbytes, 0)
    c.s.src, c.s.lkey = send, 0
    c.s.out = recv if scheme == xport.COPY else None
    c.keep = send
    return c, recv


def step(c):
    """One pass of the engine over call ``c``: it never waits (timeout 0)."""
    return c.s.run(0)


def received_right(recv, me, n, block, call=1):
    return all((recv[q * block:(q + 1) * block] == data(q, me, block, call)).all()
               for q in range(n))


@pytest.mark.parametrize("scheme", [xport.COPY, xport.ZCOPY], ids=["copy", "zero-copy"])
def test_a_call_goes_through_its_states_in_the_order_peers_arrive(scheme):
    n, block = 3, 24
    xs, _ = exchanges(n, block)
    calls = [begin(x, scheme, block) for x in xs]
    (c0, r0), (c1, r1), (c2, r2) = calls
    assert step(c0) == ETIMEDOUT                     # alone: nothing can land
    assert [c0.s.arrived(q) for q in (1, 2)] == [0, 0]
    assert step(c2) == ETIMEDOUT                     # 2 arrives; 1 is still missing
    assert [c0.s.arrived(q) for q in (1, 2)] == [0, 1]
    assert step(c0) == ETIMEDOUT and not received_right(r0, 0, n, block)
    if scheme == xport.COPY:                         # 2's block is in; 1's is not
        assert (r0[2 * block:] == data(2, 0, block)).all() and not r0[block:2 * block].any()
    # 1 comes last. Copy-based, every block for it is already in its inbox: done at once.
    # Zero-copy, it writes into both advertised buffers, but theirs for it come only once
    # they have seen its advertisement.
    assert step(c1) == (DONE if scheme == xport.COPY else ETIMEDOUT)
    done = {1} if scheme == xport.COPY else set()
    for _ in range(3):
        for me, c in enumerate((c0, c1, c2)):
            if me not in done and step(c) == DONE:
                done.add(me)
    assert done == {0, 1, 2}
    for me, r in enumerate((r0, r1, r2)):
        assert received_right(r, me, n, block), me


def test_calls_one_after_another_in_both_banks():
    """Rank 1 runs ahead by a call: its next call's blocks go to the other bank and never
    overwrite what rank 0 has yet to copy out."""
    n, block = 2, 16
    xs, _ = exchanges(n, block)
    a0, ra0 = begin(xs[0], xport.COPY, block, call=1)
    a1, ra1 = begin(xs[1], xport.COPY, block, call=1)
    assert step(a1) == ETIMEDOUT and step(a0) == DONE   # 0 finishes call 1...
    assert step(a1) == DONE
    b1, rb1 = begin(xs[1], xport.COPY, block, call=2)   # ...1 is first into call 2
    assert step(b1) == ETIMEDOUT
    b0, rb0 = begin(xs[0], xport.COPY, block, call=2)
    assert step(b0) == DONE and step(b1) == DONE
    assert received_right(ra0, 0, n, block, 1) and received_right(rb0, 0, n, block, 2)
    assert received_right(ra1, 1, n, block, 1) and received_right(rb1, 1, n, block, 2)


def test_a_persistent_requests_records_go_out_only_where_my_peers_lack_them():
    """The records rule (pc_xcall_advertise; exchange.py argues it): a persistent request's
    start writes its advert record -- carrying its first start's epoch -- unless my peers hold
    it already for the same registration; any other call's record, or another registration,
    makes the next start write it again."""
    x = exchanges(2, 16)[0][0]
    recv = np.zeros(32, np.uint8)
    here, there = (Descriptor(address(recv), 32, 0), Descriptor(address(recv) + 16, 16, 0))
    request, other = Persistent(), Persistent()

    def start(persistent, where=here):
        """A zero-copy call's start, as Exchange.launch makes it: (the record it wrote, or
        None, its notices alone)."""
        x.begin(signature.make(7, 16))
        c = x.prepare(xport.ZCOPY, 16, 0)
        x.adverts += 1
        x.start(c, 16)
        c.record[:] = 0
        x.advertise(c, where, persistent)
        written = _native.advert_fields(bytes(c.record))
        assert c.s.notice_only == (not any(written)), written
        return None if c.s.notice_only else written

    assert start(request) == (*here, 1, x.sig)          # its first start: epoch 1
    assert start(request) is None and x.records == 1    # my peers hold it
    assert start(request) is None
    assert start(None) == (*here, 4, x.sig) and x.records == 0   # a call of its own
    assert start(request) == (*here, 1, x.sig)          # again, still its first epoch
    assert start(other) == (*here, 6, x.sig) and x.records == 6
    assert start(request) == (*here, 1, x.sig) and x.records == 1
    assert start(request, there) == (*there, 1, x.sig)  # another registration
    assert start(request, there) is None


def test_a_persistent_late_start_leaves_its_notice_out_where_its_data_follows():
    """A start whose peers hold its record writes no ADVERT notice to a peer already
    advertised: its data of this call says the same (advertised, pc_xcall_run's advertise).
    The early rank, which finds no notice from it, reads its record on its data and writes
    into its buffer; both are right, start after start, whichever rank comes last."""
    n, block = 2, 16
    xs, memory = exchanges(n, block)
    requests = [Persistent() for _ in range(n)]
    recvs = [np.zeros(n * block, np.uint8) for _ in range(n)]

    def start(x, call):
        me = x.rank
        send = np.concatenate([data(me, q, block, call) for q in range(n)])
        recvs[me][:] = 0
        recvs[me][me * block:(me + 1) * block] = send[me * block:(me + 1) * block]
        x.begin(signature.make(7, block))
        c = x.prepare(xport.ZCOPY, block, 0)
        x.adverts += 1
        x.start(c, block)
        x.advertise(c, x.transport.expose(recvs[me]), requests[me])
        c.s.src, c.s.lkey, c.keep = send, 0, send
        return c

    def advert_notice(at, of, x):            # rank at's board: of's ADVERT notice of this call
        word = int(memory[at]["boards"][(x.adverts % 2) * n + of])
        return (word >> 40) & ((1 << 23) - 1) == x.adverts

    for call, late in ((1, 1), (2, 1), (3, 0), (4, 1)):
        early = 1 - late
        ce = start(xs[early], call)
        assert step(ce) == ETIMEDOUT                       # it advertises, and waits
        cl = start(xs[late], call)
        assert cl.s.notice_only == (call > 1)
        assert step(cl) == ETIMEDOUT                       # its data out; the early's to come
        assert advert_notice(early, late, xs[late]) == (call == 1)
        assert step(ce) == DONE and step(cl) == DONE
        for me in range(n):
            assert received_right(recvs[me], me, n, block, call), (call, me)


@pytest.mark.parametrize("scheme", [xport.COPY, xport.ZCOPY], ids=["copy", "zero-copy"])
def test_a_peer_whose_call_differs_is_named_with_what_it_called(scheme):
    n, block = 2, 16
    xs, _ = exchanges(n, 2 * block)
    c0, r0 = begin(xs[0], scheme, block, code=7)
    c1, _ = begin(xs[1], scheme, block, code=9)      # another algorithm's call
    assert step(c1) == ETIMEDOUT
    assert step(c0) == EPROTO
    s = c0.s
    assert s.failed_peer == 1
    theirs = (signature.make(s.failed_code, s.failed_len) if s.failed_in == xport.IN_NOTICE
              else s.failed_sig)
    assert theirs == signature.make(9, block)
    assert not r0[block:].any()                      # nothing of the other call was taken


def test_a_closed_transport_refuses_every_call_through_it():
    """Once its transport closes (before the QPs, windows and boards it points to go), a call
    half done refuses to go on, and nothing reaches the freed memory: -EBADF from the engine,
    a put, a poll and an arrival test alike; closing twice is safe."""
    n, block = 2, 16
    xs, memory = exchanges(n, block)
    (c0, r0), (c1, r1) = [begin(x, xport.COPY, block) for x in xs]
    assert step(c0) == ETIMEDOUT
    native = xs[0].transport.native
    assert native.close() and native.close()
    assert native.kind == 0 and native.closed
    assert step(c0) == -errno.EBADF and c0.s.arrived(1) == -errno.EBADF
    assert native.poll() == -errno.EBADF and native.flush() == -errno.EBADF
    assert native.put(1, xport.TO_INBOX, 0, 0, r0[:1], 0) == -errno.EBADF
    assert step(c1) == DONE                          # its peer's call is whole: 0 had written
    assert received_right(r1, 1, n, block)


def test_a_transport_holds_its_memory_until_closed():
    """An XPort holds views of the memory it points to (its boards, a loop peer's), so a
    mapping under it cannot close while it lives; close() lets go."""
    import mmap
    mapping = mmap.mmap(-1, 4096)
    boards = np.frombuffer(mapping, np.uint64)
    native = xport.XPort(xport.PC_LOOP, 2, 0, boards)
    del boards
    with pytest.raises(BufferError):
        mapping.close()
    native.close()
    mapping.close()


def test_a_transport_refuses_bad_set_up():
    boards = np.zeros(8, np.uint64)
    with pytest.raises(ValueError, match="kind"):
        xport.XPort(0, 2, 0, boards)
    with pytest.raises(ValueError, match="rank 2 of 2"):
        xport.XPort(xport.PC_LOOP, 2, 2, boards)
    with pytest.raises(ValueError, match="boards need 64"):
        xport.XPort(xport.PC_LOOP, 2, 0, boards[:4])
    with pytest.raises(ValueError, match="read-only"):
        xport.XPort(xport.PC_LOOP, 2, 0, bytes(64))
    native = xport.XPort(xport.PC_LOOP, 2, 0, boards)
    with pytest.raises(ValueError, match="2 inbox sizes"):
        native.set_inbox_bytes([1])
    with pytest.raises(ValueError, match="not a fresh verbs"):
        native.open_verbs("dev", 1, 0, np.zeros(64, np.uint8), None, 64, 16)
    with pytest.raises(ValueError, match="no verbs resources"):
        native.register(np.zeros(8, np.uint8))
    native.close()
    with pytest.raises(ValueError, match="closed"):
        native.loop_peer(1, boards, boards, boards)


def test_a_missing_rdma_device_is_an_error_naming_it():
    """This host has libibverbs but no RDMA device: opening one fails cleanly, and the
    transport that failed frees what it made."""
    native = xport.XPort(xport.PC_VERBS, 2, 0, np.zeros(8, np.uint64))
    with pytest.raises(OSError, match="ibv_open_device on no-such-device"):
        native.open_verbs("no-such-device", 1, 0, np.zeros(64, np.uint8), None, 64, 16)
    assert native.close() and native.closed
