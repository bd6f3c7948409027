"""MPI worker (2+ ranks, inside the SoftRoCE VM): the verbs transport's native half by itself
(native/papcoll_xport.c, through papcoll.native.xport), below the engine.

Writes into the inbox and into an exposed buffer (an empty one too), with and without a notice;
checks the bytes and the notice words (sequence number, signature code and the length the
completion reports); writes through the staging ring; sequence numbers past the immediate's
bits; then makes a write fail (a wrong rkey) and checks the error carries the device's completion status text. Rank 0 prints
RAW OK.
"""
import gc
import time

import numpy as np
from mpi4py import MPI

from papcoll.errors import TransportError
from papcoll.native import now_ns, xport
from papcoll.native.xport import (ADVERT, ADVERT_BYTES, DATA, advert_fields,
                                  advert_record)
from papcoll.progress import Deadline
from papcoll.transport.base import Descriptor
from papcoll.transport.verbs import VerbsTransport

# The notice word as native/papcoll_xport.h documents it, written out here to check the C
# encoding from outside: seq (23 bits, what a 32-bit immediate holds) << 40 | code << 32 | length.
SEQ_BITS = 23
WAIT = 60e9                      # ns: generous, software RDMA in an emulated VM


def notice_word(seq, code, length):
    return ((seq % (1 << SEQ_BITS)) << 40) | (code << 32) | length


comm = MPI.COMM_WORLD.Dup()
rank, size = comm.Get_rank(), comm.Get_size()
right, left = (rank + 1) % size, (rank - 1) % size
SLOT = 256
t = VerbsTransport(comm, 2 * size * SLOT, Deadline(60))   # inbox: 2 banks x size slots
x = t.native


def put(peer, where, offset, data, notice=None, rkey=0):
    """One write of ``data`` through the native half: to the peer's adverts or inbox at
    ``offset``, or (TO_EXPOSED) to remote address ``offset`` under ``rkey``."""
    x.deadline = now_ns() + int(WAIT)                       # a full send queue may wait
    t._check(x.put(peer, where, offset, rkey, data, t.source_key(data),
                   *(notice or ())), "RDMA write")


def complete():
    t._check(x.complete(WAIT * 1e-9), "waiting for RDMA write completions")
    t.end_call()


def wait_notice(kind, peer, seq):
    """Wait for the seq-th notice of kind from peer; return its word."""
    end = time.monotonic() + WAIT * 1e-9
    while True:
        t._check(x.poll(), "polling")
        word = int(t._boards[kind, seq % 2, peer])
        if word >> 40 == seq % (1 << SEQ_BITS):
            return word
        assert time.monotonic() < end, f"no notice {kind}/{seq} from {peer}: {word:#x}"
        time.sleep(1e-4)


def advertise(descriptor, seq):
    """My advert record for ``descriptor`` at the left neighbour (epoch and signature: the
    transport never reads them); the right neighbour's, once it is here."""
    record = np.frombuffer(advert_record(*descriptor, 1, 7), np.uint8)
    put(left, xport.TO_ADVERTS, rank * ADVERT_BYTES, record, notice=(ADVERT, seq, 7))
    wait_notice(ADVERT, right, seq)
    at = right * ADVERT_BYTES
    addr, nbytes, rkey, _, _ = advert_fields(t._local.fixed[at:at + ADVERT_BYTES])
    return Descriptor(addr, nbytes, rkey)


# 1. Inbox write with a notice (WRITE_WITH_IMM): bytes, sequence, code and length together.
block = np.arange(SLOT, dtype=np.uint8) ^ rank
put(right, xport.TO_INBOX, (1 * size + rank) * SLOT, block, notice=(DATA, 1, 7))
assert wait_notice(DATA, left, 1) == notice_word(1, 7, SLOT)
at = (1 * size + left) * SLOT
assert np.array_equal(t.inbox[at:at + SLOT], np.arange(SLOT, dtype=np.uint8) ^ left)

# 2. Expose a receive buffer, advertise it, and write into it from the left neighbour.
BIG = t.inline + 3                  # above what is copied at the post: a registered source
recv = np.zeros(BIG, np.uint8)
descriptor = advertise(t.expose(recv), 1)
assert descriptor.nbytes == recv.nbytes
payload = np.full(BIG, rank + 1, np.uint8)
put(right, xport.TO_EXPOSED, descriptor.address, payload, notice=(DATA, 2, 7),
    rkey=descriptor.rkey)
assert wait_notice(DATA, left, 2) == notice_word(2, 7, BIG)
assert (recv == left + 1).all(), recv[:8]
complete()

# 2a. Writes above the inline size, up to t.inline, go through the staging ring: their source
# is free at the post (overwritten at once here), the ring wraps and fills (four rings' worth),
# and the bytes that land are the ones posted.
assert t.inline >= 4097, t.inline
lengths = [65, 1000, t.inline, 4097] * 64
ends = np.cumsum(lengths)
stream = np.zeros(int(ends[-1]), np.uint8)
theirs = advertise(t.expose(stream), 4)
source = np.empty(t.inline, np.uint8)
staged = x.vstats["bcopies"]
for i, (end, n) in enumerate(zip(ends, lengths)):
    source[:n] = (np.arange(end - n, end) * 7 + rank) % 251
    put(right, xport.TO_EXPOSED, theirs.address + int(end - n), source[:n], rkey=theirs.rkey,
        notice=(DATA, 5, 7) if i == len(lengths) - 1 else None)
    source[:n] = 0                  # the write has its bytes already
assert x.vstats["bcopies"] - staged == len(lengths)
assert wait_notice(DATA, left, 5) == notice_word(5, 7, lengths[-1])
assert np.array_equal(stream, (np.arange(stream.size) * 7 + left) % 251), "staged bytes differ"
complete()

# 2b. An empty receive buffer (a call of 0-byte blocks) registers nothing -- an MR cannot be
# empty; CI once hit EINVAL here -- and still takes the empty write that carries the notice.
before = len(t._local.exposed)
empty = np.empty(0, np.uint8)
theirs = advertise(t.expose(empty), 2)
assert len(t._local.exposed) == before
put(right, xport.TO_EXPOSED, theirs.address, empty, notice=(DATA, 3, 7), rkey=theirs.rkey)
assert wait_notice(DATA, left, 3) == notice_word(3, 7, 0)
complete()

# 3. Sequence numbers outgrow the immediate's bits: the low bits go round, banks alternate.
comm.Barrier()
for seq in ((1 << SEQ_BITS) - 1, 1 << SEQ_BITS, (1 << SEQ_BITS) + 1):
    put(right, xport.TO_INBOX, rank * SLOT, block[:8], notice=(DATA, seq, 9))
    assert wait_notice(DATA, left, seq) == notice_word(seq, 9, 8)
complete()

# 4. Registration cache: a freed buffer's registration goes with it.
before = len(t._local.exposed)
scratch = np.zeros(1 << 16, np.uint8)
t.expose(scratch)
del scratch
gc.collect()
assert len(t._local.exposed) == before

# 5. A failing write reports the device's status text.
comm.Barrier()
if rank == 0:
    try:
        put(right, xport.TO_EXPOSED, descriptor.address, payload,
            rkey=descriptor.rkey ^ 0x5A5A5A)
        complete()
        raise AssertionError("a write with a wrong rkey completed")
    except TransportError as err:
        assert "remote access error" in str(err).lower(), err
        print(f"error surfaced: {err}", flush=True)
comm.Barrier()
MPI.COMM_WORLD.Barrier()
if rank == 0:
    print("RAW OK", flush=True)
# The failed QP is in the error state now; close still frees everything in order, twice.
t.close()
t.close()
