"""``mpi-rma``: the one-sided interface on MPI-3 RMA, available wherever MPI is.

Boards, adverts and an allocated inbox live in one window from ``MPI.Win.Allocate`` (shared
memory within a node for most MPIs), an inbox the caller supplies in a window created over it;
exposed receive buffers are attached to a dynamic window by address (so
MPI holds no reference to them), their descriptor being that address. Both windows stay in a
passive-target epoch (``Lock_all``) for the transport's life; ``Flush`` completes a put at its
target, which orders data before notices. A target that only polls its own memory must still
drive MPI progress (puts to dynamic windows are completed by the target's progress engine), so
``poll`` calls ``Iprobe``, a local flush (MPICH serves RMA active messages only in RMA
synchronisation calls) and ``Win_sync``.

Creating and freeing windows are blocking collectives: set-up meets every rank first, and a
close that is not collective (a broken Communicator) detaches the user's buffers -- a late
peer's put can no longer land in them -- and leaves the windows to MPI until MPI_Finalize.
"""
import numpy as np
from mpi4py import MPI

from .. import rendezvous
from ..errors import TransportError
from .base import ADVERT_BYTES, ADVERTS, DESCRIPTOR, INBOX, KINDS, Transport, notice_word
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

    def __init__(self, comm, inbox, deadline, names=None):
        super().__init__(comm, inbox, deadline, names)
        n = self.size
        self._board_bytes = KINDS * 2 * n * 8
        self._adverts_at = self._board_bytes
        given = not isinstance(inbox, int)
        self._inbox_at = 0 if given else self._adverts_at + n * ADVERT_BYTES
        self._open = False
        rendezvous.agree(comm, "mpi-rma windows", deadline)
        self.win = MPI.Win.Allocate(self._adverts_at + n * ADVERT_BYTES + (0 if given else inbox),
                                    1, comm=comm)
        self.inbox_win = MPI.Win.Create(inbox, 1, comm=comm) if given else self.win
        self.dyn = MPI.Win.Create_dynamic(comm=comm)
        self.mem = np.frombuffer(self.win.tomemory(), np.uint8)
        self.mem[:] = 0
        self._inbox = inbox if given else self.mem[self._inbox_at:]
        self._boards = self.mem[:self._board_bytes].view(np.uint64).reshape(KINDS, 2, n)
        self.cache = RegistrationCache(self._attach, self._detach)
        self._notices = np.zeros(n, np.uint64)    # per peer: the source of my last notice put
        self._windows = [self.win, self.dyn] + ([self.inbox_win] if given else [])
        for win in self._windows:
            win.Lock_all(MPI.MODE_NOCHECK)
        self._open = True
        rendezvous.agree(comm, "mpi-rma boards zeroed", deadline)   # before anyone puts

    def board(self, kind, bank):
        return self._boards[kind, bank]

    @property
    def inbox(self):
        return self._inbox

    def advert(self, peer):
        at = self._adverts_at + peer * ADVERT_BYTES
        return self.mem[at:at + ADVERT_BYTES].tobytes()

    def expose(self, array):
        if not array.nbytes:       # nothing to attach: an empty put touches no memory
            return DESCRIPTOR.pack(0, 0, 0)
        return self.cache.get(array)

    def _attach(self, array):
        address = MPI.Get_address(array)
        self.dyn.Attach(MPI.buffer.fromaddress(address, array.nbytes))   # no reference kept
        return DESCRIPTOR.pack(address, array.nbytes, 0)

    def _detach(self, descriptor):
        address, nbytes, _ = DESCRIPTOR.unpack(descriptor)
        self.dyn.Detach(MPI.buffer.fromaddress(address, nbytes))

    def put(self, peer, dest, offset, data, notice=None):
        spec = [data, data.nbytes, MPI.BYTE]
        if dest is ADVERTS:
            self.win.Put(spec, peer, [self._adverts_at + offset, data.nbytes, MPI.BYTE])
        elif dest is INBOX:
            self.inbox_win.Put(spec, peer, [self._inbox_at + offset, data.nbytes, MPI.BYTE])
            if notice is not None and self.inbox_win is not self.win:
                self.inbox_win.Flush(peer)
        else:
            address, nbytes, _ = DESCRIPTOR.unpack(dest)
            if offset + data.nbytes > nbytes:
                raise TransportError(f"put of {data.nbytes} bytes at {offset} overruns rank "
                                     f"{self.names[peer]}'s exposed buffer of {nbytes} bytes")
            self.dyn.Put(spec, peer, [address + offset, data.nbytes, MPI.BYTE])
            if notice is not None:
                self.dyn.Flush(peer)
        if notice is not None:
            # The flush puts the data at the target before its notice, and completes my last
            # notice put to that peer too: its source word may be rewritten.
            self.win.Flush(peer)
            self._put_notice(peer, notice, data.nbytes)

    def put_all(self, peers, dest, offset, data, notice):
        if dest is not ADVERTS:
            return super().put_all(peers, dest, offset, data, notice)
        spec = [data, data.nbytes, MPI.BYTE]
        for peer in peers:
            self.win.Put(spec, peer, [self._adverts_at + offset, data.nbytes, MPI.BYTE])
        self.win.Flush_all()                      # one flush orders every record before
        for peer in peers:                        # every notice
            self._put_notice(peer, notice, data.nbytes)

    def _put_notice(self, peer, notice, nbytes):
        kind, seq, code = notice
        self._notices[peer] = notice_word(seq, code, nbytes)
        word = ((kind * 2 + seq % 2) * self.size + self.rank) * 8
        self.win.Put([self._notices[peer:peer + 1], 1, MPI.UINT64_T], peer,
                     [word, 1, MPI.UINT64_T])

    def poll(self):
        self.comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG)
        # MPICH serves incoming RMA active messages (puts into a dynamic window) during the
        # target's own RMA synchronisation calls, not during Iprobe: without a flush here a
        # target that only waits starves the writer in its Win_flush, forever. (Skipping it
        # while nothing is attached made copy-based calls 2x slower at N=4: it drives more.)
        self.dyn.Flush_local_all()
        self.win.Sync()
        self.dyn.Sync()

    def complete(self):
        self.win.Flush_all()          # my notices are at their targets before any later message
        for win in self._windows[1:]:
            win.Flush_local_all()
        self.cache.end_call()

    def close(self, collective=True):
        if not self._open:
            return
        self._open = False
        self.cache.clear()                        # local: no late put lands in a user buffer
        self._boards = self.mem = self._inbox = None
        if collective:
            for win in self._windows:
                win.Unlock_all()
            for win in reversed(self._windows):
                win.Free()
