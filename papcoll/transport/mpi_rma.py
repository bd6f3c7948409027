"""``mpi-rma``: the one-sided interface on MPI-3 RMA, available wherever MPI is.

Boards, adverts and an allocated inbox live in one window from ``MPI.Win.Allocate`` (shared
memory within a node for most MPIs), an inbox the caller supplies in a window created over it;
exposed receive buffers are attached to a dynamic window by address (so
MPI holds no reference to them), their descriptor being that address. Both windows stay in a
passive-target epoch (``Lock_all``) for the transport's life. A target that only polls its own
memory must still drive MPI progress (puts to dynamic windows are completed by the target's
progress engine), so ``poll`` calls ``Iprobe``, a local flush or the tests of its requests
(MPICH serves RMA active messages only in RMA calls) and ``Win_sync``.

The puts, polls and completions run in C (native/papcoll_mpi_rma.c), which calls MPI through
the mpi.h of the MPI in use, with these windows' handles. **No blocking wait on a peer**: a flush waits for
its target's progress, which a dead, stopped or departed peer never makes, so every put is an
``MPI_Rput`` whose request is tested under the call's deadline; a notice goes out once the
requests of the data before it to that peer have completed and a flush of those windows at
that peer -- with nothing in flight to it, a flush waits for nobody -- has completed the data
there. What is left in flight when a call fails stays with MPI.

Creating and freeing windows are blocking collectives: set-up meets every rank first (its
steps named after the algorithm, so ranks setting up different ones never share windows). A
close that is not collective (a broken Communicator) leaves the windows to MPI until
MPI_Finalize, and the receive buffer of a broken zero-copy call attached and held
(:meth:`pin`): MPI writes into a dynamic window by address, so a late peer's put would land
in whatever the program put there next.
"""
import numpy as np
from mpi4py import MPI

from .. import rendezvous
from ..errors import PapcollTimeoutError, TransportError
from ..native import ETIMEDOUT, xport
from ..native.xport import ADVERT_BYTES
from .base import KINDS, Descriptor, Transport, keep
from .regcache import RegistrationCache, owner

CLOSE_WAIT = 1.0    # seconds a close tests MPI's requests still in flight before leaving them

class MpiRmaTransport(Transport):
    name = "mpi-rma"
    # Writes to exposed user buffers go through a dynamic window, which MPICH serves with active
    # messages (~0.5 GB/s here) while the inbox window is plain shared memory: copying through
    # the inbox won at every block size measured, up to 4 MiB (2.4 x faster at 2 and 4 MiB,
    # docs/tuning.md); pap_direct caps the inbox at INBOX_LIMIT whatever this says.
    copy_threshold = 4 << 20

    @classmethod
    def availability(cls):
        return "available (MPI-3 RMA: shared-memory windows in a node, the MPI's fabric between)"

    def __init__(self, comm, inbox, deadline, names=None, owner=""):
        super().__init__(comm, inbox, deadline, names, owner)
        self.timeout = deadline.timeout
        n = self.size
        self._board_bytes = KINDS * 2 * n * 8
        self._adverts_at = self._board_bytes
        given = not isinstance(inbox, int)
        self._inbox_at = 0 if given else self._adverts_at + n * ADVERT_BYTES
        self._open = self._pinned = False
        step = "mpi-rma windows"
        inboxes = self.meet(step, inbox if isinstance(inbox, int) else inbox.nbytes, deadline)
        self._inbox_bytes = [inboxes[q] for q in range(n)]
        # A multiple of 64 bytes: MPICH lays a node's windows end to end, so an odd size
        # would leave the next rank's boards unaligned, and a notice word torn across lines.
        nbytes = self._adverts_at + n * ADVERT_BYTES + (0 if given else inbox)
        with rendezvous.held(self.owner + step, deadline):   # the meeting's name, as meet
            self.win = MPI.Win.Allocate(-(-nbytes // 64) * 64, 1, comm=comm)
            self.inbox_win = MPI.Win.Create(inbox, 1, comm=comm) if given else self.win
            self.dyn = MPI.Win.Create_dynamic(comm=comm)
        self.mem = np.frombuffer(self.win.tomemory(), np.uint8)
        self.mem[:] = 0
        self._inbox = inbox if given else self.mem[self._inbox_at:nbytes]
        self._boards = self.mem[:self._board_bytes].view(np.uint64).reshape(KINDS, 2, n)
        self.cache = RegistrationCache(self._attach, self._detach)
        self._windows = [self.win, self.dyn] + ([self.inbox_win] if given else [])
        self.native = self._native(comm)
        for win in self._windows:
            win.Lock_all(MPI.MODE_NOCHECK)
        self._open = True
        self.meet("mpi-rma boards zeroed", None, deadline)   # before anyone puts

    @property
    def inbox(self):
        return self._inbox

    def expose(self, array):
        if not array.nbytes:       # nothing to attach: an empty put touches no memory
            return Descriptor(0, 0, 0)
        return self.cache.get(array)

    def _attach(self, array):
        address = MPI.Get_address(array)
        self.dyn.Attach(MPI.buffer.fromaddress(address, array.nbytes))   # no reference kept
        return Descriptor(address, array.nbytes, 0)

    def _detach(self, descriptor):
        address, nbytes, _ = descriptor
        self.dyn.Detach(MPI.buffer.fromaddress(address, nbytes))

    def _native(self, comm):
        """The C half (native/papcoll_mpi_rma.c) calls MPI through its mpi.h with the handles
        of these windows: one C call per put, poll or completion."""
        x = xport.XPort(xport.PC_MPI, self.size, self.rank, self._boards)
        x.set_inbox_bytes(self._inbox_bytes)
        x.open_mpi(comm, self.win, self.inbox_win, self.dyn, self._adverts_at, self._inbox_at)
        return x

    def end_call(self):
        self.cache.end_call()

    def pin(self, array):
        # MPI targets a put at a dynamic window by address, attached or not: the buffer is
        # held (never freed, never detached) until MPI_Finalize.
        if array.nbytes:
            keep(owner(array))
            self._pinned = True

    @property
    def advert_area(self):
        return self.mem, self._adverts_at

    inline = 1 << 62           # any source will do: MPI needs no registration of it

    def source_key(self, data):
        return 0

    def failed(self, rc, what):
        s = self.native
        if rc == ETIMEDOUT:
            raise PapcollTimeoutError(f"mpi-rma: {what}", [self.names[s.failed_peer]],
                                      self.timeout)
        known = s.failed_peer < self.size
        peer = f"rank {self.names[s.failed_peer]}" if known else "MPI"
        raise TransportError(f"mpi-rma: {what} failed ({peer}: MPI error {s.failed_status}, "
                             f"{rc})", ranks=[self.names[s.failed_peer]] if known else ())

    def close(self, collective=True):
        if not self._open:
            return
        self._open = False
        # Before the windows go: MPI's requests in flight hold the notices' memory.
        self.native.close(CLOSE_WAIT)
        if collective or not self._pinned:
            self.cache.clear()                    # a pinned buffer stays attached
        self._boards = self.mem = self._inbox = None
        if collective:
            for win in self._windows:
                win.Unlock_all()
            for win in reversed(self._windows):
                win.Free()
