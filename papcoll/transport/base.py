"""The one-sided transport interface every point-to-point algorithm is written against.

Set-up is collective and gives every process memory that all peers can write into:

* **notice boards**: one 64-bit word per (kind, peer), written only by that peer; a peer raises
  it to the epoch of the call it is in. Kinds: ``ADVERT`` (my receive buffer is exposed; its
  descriptor is in my ADVERTS record at you), ``DATA`` (my block for you has landed).
* **ADVERTS**: one record of ``DESCRIPTOR_BYTES`` per peer, written only by that peer.
* **INBOX**: 2 banks x ``size`` slots of ``slot`` bytes; slot [bank][q] written only by peer q
  (copy-based scheme: the bank is the epoch's parity, see algorithms/pap_direct.py).

``put(..., notice=(kind, epoch))`` makes the notice visible only after the data: a reader that
sees the epoch on the board may read the data. No other ordering is promised.
"""
ADVERT, DATA = 0, 1
KINDS = 2
ADVERTS, INBOX = "adverts", "inbox"
DESCRIPTOR_BYTES = 16


class Transport:
    """Base class: subclasses implement the methods below; close() must be safe twice."""
    name = "?"
    copy_threshold = 0   # largest block the PAP copy-based scheme beats zero-copy at (measured)

    @classmethod
    def availability(cls):
        """A one-line description of whether this transport can be used here, and on what."""
        raise NotImplementedError

    def __init__(self, comm, slot):
        self.comm = comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.slot = slot

    def inbox_slot(self, bank, peer):
        """My inbox slot written by ``peer`` in ``bank`` (a uint8 array)."""
        raise NotImplementedError

    def advert(self, peer):
        """The descriptor bytes ``peer`` last wrote into my ADVERTS record."""
        raise NotImplementedError

    def expose(self, array):
        """Make ``array`` (uint8, my receive buffer) writable by peers; return its descriptor
        (``DESCRIPTOR_BYTES`` bytes). Registrations are cached; see regcache.py."""
        raise NotImplementedError

    def put(self, peer, dest, offset, data, notice=None):
        """Write ``data`` at ``offset`` of ``dest`` at ``peer``: ``ADVERTS``, ``INBOX`` or a
        descriptor ``peer`` exposed. Then, if given, raise my ``notice=(kind, epoch)`` word there."""
        raise NotImplementedError

    def notices(self, kind):
        """My board for ``kind``: an int64 array, entry q = the last epoch peer q signalled.
        Also drives whatever progress remote writes into my memory need. The array is live:
        later calls (of any kind) update it in place, so callers poll it without asking again."""
        raise NotImplementedError

    def complete(self):
        """Wait until my puts are done with their source buffers (they may be reused)."""
        raise NotImplementedError

    def close(self):
        raise NotImplementedError
