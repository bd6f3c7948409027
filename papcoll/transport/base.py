"""The one-sided transport interface every point-to-point algorithm is written against.

Set-up is collective and bounded (rendezvous.py) and gives every process memory that all
peers can write into:

* **notice boards**: for each kind of notice (``ADVERT``: my receive buffer is exposed and my
  advert record at you describes it; ``DATA``: my block for you has landed), two banks of one
  64-bit word per peer, written only by that peer. A notice is a **notice word**: the notice's
  sequence number (the k-th notice of its kind from that peer, its low bits), the signature
  code of the sender's call, and the length of the data written with it, in the bank
  ``seq % 2``. Sequence numbers of a kind grow by one per call that sends one, and no process
  is more than one call ahead of another, so two banks keep the word of call k readable while
  call k + 1's lands, and the sequence number tells a current word from a stale one.
* **ADVERTS**: one record of ``ADVERT_BYTES`` per peer, written only by that peer: where its
  exposed receive buffer is (a :data:`Descriptor`), which call it is for, and that call's full
  signature.
* **INBOX**: memory peers write into at offsets the caller's algorithm lays out (pap_direct: 2
  banks x ``size`` slots, the bank being the call's parity). The transport allocates it, or
  exposes memory the caller supplies -- the hierarchical algorithms' node segment, which
  remote masters write into directly.

A put with a notice makes the notice visible only after the data: a reader that finds the
sequence number it expects in a notice word may read the data, and checks the code and length
against its own call before it does. No other ordering is promised.

Puts, polls and completions run in C only (native/papcoll_xport.c), for the engine that runs
whole calls (native/papcoll_exchange.c); the notice word and the advert record are encoded
there and nowhere else (papcoll_xport.h, "the wire formats"). Python sets a transport up and
hands the engine ``native`` (its struct pc_xport, papcoll.native.xport.XPort), ``inbox``,
``advert_area`` (where its ADVERTS records are: an array, or (array, offset)), ``inline`` (the largest source that
needs no registration), ``source_key(data)``, and turns the engine's failures into errors
with ``failed(rc, what)``.
"""
import collections

from .. import _native, rendezvous

KINDS = 2                         # of notices: ADVERT and DATA (xport)
Descriptor = collections.namedtuple("Descriptor", "address nbytes rkey")   # an exposed buffer


def keep(memory):
    """Hold ``memory`` (an object owning memory peers may write into) until the process ends:
    after a broken call a late peer can still write, and nothing bounds when -- MPI_Finalize,
    which runs after the interpreter has dropped its modules, may still deliver such a put.
    So the reference is one that no shutdown drops (a list would be emptied with its module)."""
    _native.keep(memory)


class Transport:
    """Base class: subclasses implement the methods below; close() must be safe twice."""
    name = "?"
    copy_threshold = 0   # largest block the PAP copy-based scheme beats zero-copy at (measured)

    @classmethod
    def availability(cls):
        """A one-line description of whether this transport can be used here, and on what."""
        raise NotImplementedError

    def __init__(self, comm, inbox, deadline, names=None, owner=""):
        """Collective over ``comm``, bounded by ``deadline``. ``inbox``: how many bytes of inbox
        to allocate, or a writable C-contiguous uint8 array the caller owns (and keeps alive
        while the transport lives) to expose as the inbox. ``names``: the user's rank of each
        rank of ``comm`` (errors name those; default: comm's own ranks). ``owner`` names the
        algorithm in the set-up steps, so ranks setting up different ones meet in a
        MismatchError rather than in each other's windows."""
        self.comm = comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.names = list(range(self.size)) if names is None else list(names)
        self.owner = f"{owner}: " if owner else ""

    def meet(self, what, value, deadline):
        """The set-up meeting ``what`` of this transport (rendezvous.exchange): every rank's
        ``value``, ranks named as the user's."""
        return rendezvous.exchange(self.comm, self.owner + what, value, deadline,
                                   ranks=self.names)

    @property
    def boards(self):
        """My notice boards: (KINDS, 2, n) uint64 notice words, read-only to callers (the
        engine updates them; the model's calibration reads them)."""
        return self._boards

    @property
    def inbox(self):
        """My inbox (a uint8 array): where peers' INBOX puts land."""
        raise NotImplementedError

    def expose(self, array):
        """Make ``array`` (uint8, my receive buffer) writable by peers; return its
        :data:`Descriptor`. Registrations never keep the array alive (regcache.py). An empty
        array registers nothing (verbs cannot register 0 bytes): its descriptor takes only
        empty puts, which still carry their notice."""
        raise NotImplementedError

    def pin(self, array):
        """A call broke with ``array`` (my receive buffer) exposed: peers that read my
        advertisement may still write into it, so it must stay where they write. verbs needs
        nothing (a deregistered MR turns a late write into the writer's error)."""

    def register(self, array, remote=False):
        """A registration of ``array`` that the caller owns and closes (``remote``: peers may
        write into it): ``address``, ``nbytes``, ``rkey``, ``lkey``; None (the default) where
        the transport registers nothing for its callers."""
        return None

    def end_call(self):
        """A call whose puts are complete (the engine completed them) ends: drop the
        registrations made for it only."""
        raise NotImplementedError

    def close(self, collective=True):
        """Free everything; ``collective``: every rank is closing (collective frees may run)."""
        raise NotImplementedError
