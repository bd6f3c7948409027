"""``mpi-rma``: the one-sided interface on MPI-3 RMA, available wherever MPI is.

Boards, adverts and inbox live in one window from ``MPI.Win.Allocate`` (shared memory within a
node for most MPIs); exposed receive buffers are attached to a dynamic window, their descriptor
being their absolute address. Both windows stay in a passive-target epoch (``Lock_all``) for the
transport's life; ``Flush`` completes a put at its target, which orders data before notices.
A target that only polls its own memory must still drive MPI progress (puts to dynamic windows
are completed by the target's progress engine), so ``notices`` calls ``Iprobe`` and ``Win_sync``.
"""
import struct

import numpy as np
from mpi4py import MPI

from .base import ADVERTS, DESCRIPTOR_BYTES, INBOX, KINDS, Transport
from .regcache import RegistrationCache


class MpiRmaTransport(Transport):
    name = "mpi-rma"
    # Writes to exposed user buffers go through a dynamic window, which MPICH serves with active
    # messages (~0.5 GB/s here) while the inbox window is plain shared memory: copying through
    # the inbox won up to 1 MiB blocks in the random-arrival benchmark (README: Tuning).
    copy_threshold = 1 << 20

    @classmethod
    def availability(cls):
        return "available (MPI-3 RMA: shared-memory windows in a node, the MPI's fabric between)"

    def __init__(self, comm, slot):
        super().__init__(comm, slot)
        n = self.size
        self._board_bytes = KINDS * n * 8
        self._adverts_at = self._board_bytes
        self._inbox_at = self._adverts_at + n * DESCRIPTOR_BYTES
        total = self._inbox_at + 2 * n * slot
        self.win = MPI.Win.Allocate(total, 1, comm=comm)
        self.mem = np.frombuffer(self.win.tomemory(), np.uint8)
        self.mem[:] = 0
        self.board = self.mem[:self._board_bytes].view(np.int64).reshape(KINDS, n)
        self.dyn = MPI.Win.Create_dynamic(comm=comm)
        self.cache = RegistrationCache(self._attach, self._detach)
        self._notice = np.zeros(1, np.int64)      # source of notice puts, kept until complete()
        comm.Barrier()                            # boards are zero everywhere before anyone puts
        self.win.Lock_all(MPI.MODE_NOCHECK)
        self.dyn.Lock_all(MPI.MODE_NOCHECK)
        self._open = True

    def inbox_slot(self, bank, peer):
        at = self._inbox_at + (bank * self.size + peer) * self.slot
        return self.mem[at:at + self.slot]

    def advert(self, peer):
        at = self._adverts_at + peer * DESCRIPTOR_BYTES
        return self.mem[at:at + DESCRIPTOR_BYTES].tobytes()

    def expose(self, array):
        return self.cache.get(array)

    def _attach(self, array):
        self.dyn.Attach(array)
        return struct.pack("<QQ", MPI.Get_address(array), array.nbytes)

    def _detach(self, descriptor):
        address, nbytes = struct.unpack("<QQ", descriptor)
        self.dyn.Detach(MPI.buffer.fromaddress(address, nbytes))

    def put(self, peer, dest, offset, data, notice=None):
        spec = [data, data.nbytes, MPI.BYTE]
        if dest is ADVERTS:
            self.win.Put(spec, peer, [self._adverts_at + offset, data.nbytes, MPI.BYTE])
        elif dest is INBOX:
            self.win.Put(spec, peer, [self._inbox_at + offset, data.nbytes, MPI.BYTE])
        else:
            address, nbytes = struct.unpack("<QQ", dest)
            if offset + data.nbytes > nbytes:
                raise ValueError(f"put of {data.nbytes} bytes at {offset} overruns rank {peer}'s "
                                 f"exposed buffer of {nbytes} bytes")
            self.dyn.Put(spec, peer, [address + offset, data.nbytes, MPI.BYTE])
            if notice is not None:
                self.dyn.Flush(peer)
        if notice is not None:
            kind, epoch = notice
            self.win.Flush(peer)                  # the data is at the target before its notice
            self._notice[0] = epoch
            self.win.Put([self._notice, 1, MPI.INT64_T], peer,
                         [(kind * self.size + self.rank) * 8, 1, MPI.INT64_T])
            self.win.Flush_local(peer)            # _notice is reused by the next put

    def notices(self, kind):
        self.comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG)
        self.win.Sync()
        self.dyn.Sync()
        return self.board[kind]

    def complete(self):
        self.win.Flush_local_all()
        self.dyn.Flush_local_all()

    def close(self):
        if not self._open:
            return
        self._open = False
        self.win.Unlock_all()
        self.dyn.Unlock_all()
        self.cache.clear()
        self.board = self.mem = None
        self.dyn.Free()
        self.win.Free()
