"""MPI worker (2+ ranks, inside the SoftRoCE VM): the verbs transport by itself.

Writes into the inbox and into an exposed buffer (an empty one too), with and without a notice;
checks the bytes and the notice words (sequence number, signature code and the length the
completion reports); sequence numbers past the immediate's bits; then makes a write fail (a wrong rkey) and checks
the error carries the device's completion status text. Rank 0 prints RAW OK.
"""
import gc

import numpy as np
from mpi4py import MPI

from papcoll.errors import TransportError
from papcoll.progress import Deadline, wait_until
from papcoll.native.xport import ADVERT_BYTES, Advert
from papcoll.transport.base import ADVERT, ADVERTS, DATA, INBOX, Descriptor
from papcoll.transport.verbs import VerbsTransport

# The notice word as native/papcoll_xport.h documents it, written out here to check the C
# encoding from outside: seq (23 bits, what a 32-bit immediate holds) << 40 | code << 32 | length.
SEQ_BITS = 23


def notice_word(seq, code, length):
    return ((seq % (1 << SEQ_BITS)) << 40) | (code << 32) | length


def seq_of(word):
    return word >> 40


def code_of(word):
    return (word >> 32) & 0xFF


def length_of(word):
    return word & 0xFFFFFFFF


def record_for(descriptor):
    """An advert record for ``descriptor`` (epoch and signature: the transport never reads
    them), as the bytes a put sends."""
    return np.frombuffer(bytes(Advert(*descriptor, 0, 1, 7)), np.uint8)


def descriptor_of(advert):
    return Descriptor(advert.addr, advert.bytes, advert.rkey)

comm = MPI.COMM_WORLD.Dup()
rank, size = comm.Get_rank(), comm.Get_size()
right, left = (rank + 1) % size, (rank - 1) % size
SLOT = 256
t = VerbsTransport(comm, 2 * size * SLOT, Deadline(60))   # inbox: 2 banks x size slots


def wait_notice(kind, peer, seq):
    """Wait for the seq-th notice of kind from peer; return its word."""
    board = t.board(kind, seq % 2)

    def arrived():
        t.poll()
        return seq_of(int(board[peer])) == seq % (1 << SEQ_BITS)
    wait_until(arrived, Deadline(60), "raw test", lambda: [peer])
    return int(board[peer])


# 1. Inbox write with a notice (WRITE_WITH_IMM): bytes, sequence, code and length together.
block = np.arange(SLOT, dtype=np.uint8) ^ rank
t.put(right, INBOX, (1 * size + rank) * SLOT, block, notice=(DATA, 1, 7))
word = wait_notice(DATA, left, 1)
assert word == notice_word(1, 7, SLOT) and code_of(word) == 7 and length_of(word) == SLOT
at = (1 * size + left) * SLOT
assert np.array_equal(t.inbox[at:at + SLOT], np.arange(SLOT, dtype=np.uint8) ^ left)

# 2. Expose a receive buffer, advertise it, and write into it from the left neighbour.
recv = np.zeros(4096 + 3, np.uint8)
t.put(left, ADVERTS, rank * ADVERT_BYTES, record_for(t.expose(recv)), notice=(ADVERT, 1, 7))
wait_notice(ADVERT, right, 1)
descriptor = descriptor_of(t.advert(right))
payload = np.full(4096 + 3, rank + 1, np.uint8)            # above the inline size: registered
t.put(right, descriptor, 0, payload, notice=(DATA, 2, 7))
assert length_of(wait_notice(DATA, left, 2)) == 4096 + 3
assert (recv == left + 1).all(), recv[:8]
try:                                                       # past the exposed buffer: refused
    t.put(right, descriptor, 8, payload)
    raise AssertionError("a put past an exposed buffer was posted")
except TransportError as err:
    assert "overruns" in str(err), err
t.complete()

# 2b. An empty receive buffer (a call of 0-byte blocks) registers nothing -- an MR cannot be
# empty; CI once hit EINVAL here -- and still takes the empty write that carries the notice.
before = len(t._local.exposed)
empty = np.empty(0, np.uint8)
record = record_for(t.expose(empty))
assert len(t._local.exposed) == before
t.put(left, ADVERTS, rank * ADVERT_BYTES, record, notice=(ADVERT, 2, 7))
wait_notice(ADVERT, right, 2)
t.put(right, descriptor_of(t.advert(right)), 0, empty, notice=(DATA, 3, 7))
assert length_of(wait_notice(DATA, left, 3)) == 0
t.complete()

# 3. Sequence numbers outgrow the immediate's bits: the low bits go round, banks alternate.
comm.Barrier()
for seq in ((1 << SEQ_BITS) - 1, 1 << SEQ_BITS, (1 << SEQ_BITS) + 1):
    t.put(right, INBOX, rank * SLOT, block[:8], notice=(DATA, seq, 9))
    assert wait_notice(DATA, left, seq) == notice_word(seq, 9, 8)
t.complete()

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
    bad = descriptor._replace(rkey=descriptor.rkey ^ 0x5A5A5A)
    try:
        t.put(right, bad, 0, payload, notice=None)
        t.complete()
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
