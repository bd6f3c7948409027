"""MPI worker (2+ ranks, inside the SoftRoCE VM): the verbs transport by itself.

Writes into the inbox and into an exposed buffer, with and without a notice; checks the bytes
and the notice boards; then makes a write fail (a wrong rkey) and checks the error carries the
device's completion status text. Rank 0 prints RAW OK.
"""
import gc
import struct

import numpy as np
from mpi4py import MPI

from papcoll.errors import TransportError
from papcoll.progress import Deadline, wait_until
from papcoll.transport.base import ADVERT, ADVERTS, DATA, DESCRIPTOR_BYTES, INBOX
from papcoll.transport.verbs import VerbsTransport

comm = MPI.COMM_WORLD.Dup()
rank, size = comm.Get_rank(), comm.Get_size()
right, left = (rank + 1) % size, (rank - 1) % size
SLOT = 256
t = VerbsTransport(comm, SLOT)


def wait_notice(kind, peer, epoch):
    wait_until(lambda: t.notices(kind)[peer] >= epoch, Deadline(60), "raw test", lambda: [peer])


# 1. Inbox write with a notice (WRITE_WITH_IMM): bytes and epoch arrive together.
block = np.arange(SLOT, dtype=np.uint8) ^ rank
t.put(right, INBOX, (1 * size + rank) * SLOT, block, notice=(DATA, 1))
wait_notice(DATA, left, 1)
assert np.array_equal(t.inbox_slot(1, left), np.arange(SLOT, dtype=np.uint8) ^ left)

# 2. Expose a receive buffer, advertise it, and write into it from the left neighbour.
recv = np.zeros(4096 + 3, np.uint8)
desc = np.frombuffer(t.expose(recv), np.uint8)
t.put(left, ADVERTS, rank * DESCRIPTOR_BYTES, desc, notice=(ADVERT, 1))
wait_notice(ADVERT, right, 1)
payload = np.full(4096 + 3, rank + 1, np.uint8)            # above the inline size: registered
t.put(right, t.advert(right), 0, payload, notice=(DATA, 2))
wait_notice(DATA, left, 2)
assert (recv == left + 1).all(), recv[:8]
t.complete()

# 3. Epochs outgrow the 30-bit immediate: the board unwraps them (they grow by one per call).
near = (1 << 30) - 1
t.board[DATA, left] = near                  # as if the left neighbour had made 2^30 - 1 calls
comm.Barrier()
for epoch in (near + 1, near + 2):
    t.put(right, INBOX, rank * SLOT, block[:8], notice=(DATA, epoch))
    wait_notice(DATA, left, epoch)
assert t.notices(DATA)[left] == near + 2

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
    address, rkey, nbytes = struct.unpack("<QII", t.advert(right))
    bad = struct.pack("<QII", address, rkey ^ 0x5A5A5A, nbytes)
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
