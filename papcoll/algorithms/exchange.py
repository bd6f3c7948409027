"""PAP Direct as a component (:class:`Exchange`): the Python half of the engine's call.

An Exchange runs among the processes of one transport: the whole communicator for ``direct``
and ``pap_direct``, the nodes' masters for the hierarchical algorithms (shm_direct.py). Its
ranks map to the user's for errors and traces, and each call says, per peer, what to write
where and how many bytes to expect -- the masters' aggregates differ in size when nodes do.

The protocol itself -- which notice signals what, who is served first, when a peer's call
differs -- is written once, in C: the engine (native/papcoll_exchange.c, ``pc_xcall_run``),
which runs a whole call over the transport's native half (native/papcoll_xport.c) without
returning to Python unless a slice of ``CHECK_EVERY`` passes. This module prepares the
engine's call structs (once per call shape: calls repeat), runs them under the deadline,
checks between slices that the peers awaited are still coming (rendezvous.py), and turns the
engine's failures into papcoll's errors; plans.py makes the plans it leaves. Its schemes:

* ``COPY``, copy-based PAP Direct: a sender writes into its slot of the receiver's inbox (bank
  = the call's parity), which needs no advertisement; data found from q means q has arrived,
  so q is served first (sent to, its block copied out); idle time goes to writing to peers
  not seen yet, since those writes cannot block.
* ``ZCOPY``, zero-copy PAP Direct: each process exposes its receive buffer and advertises it
  (the arrival signal); a sender writes into every peer that has advertised, never waiting for
  one while another is ready. ``STEP``: the same in step order (``direct``).
* ``ORDER``, the masters of ``shm_direct``: copy-based writes in step order, all at once.
* ``VAR``, Alltoallv/w: a length per pair; a block that fits the slot goes copy-based, a
  larger one zero-copy into the region the receiver advertised for it (its record is per
  peer: that region, exactly the block's length). Both ends know the length, so they pick
  alike; a receiver whose expected length differs sees a DATA notice of another length, a
  sender writing zero-copy an advertised region of another length: a MismatchError naming
  both. (A block that fits on one side only leaves both waiting: the deadline names them.)

A call is a Flight (calls.py): ``launch`` starts it, a nonblocking call's Test moves it on
without waiting, Wait (or a blocking call) drives it to its end under its deadline. A
persistent zero-copy request writes its advert records once: they carry the epoch of its first
start instead of each call's, and later starts send their ADVERT notices alone (no record)
while nothing else of mine has written records since (``records``: the first epoch of the
request whose records my peers hold, 0 for none) and its buffer is registered as it was;
otherwise it writes them again. A sender reads a record only after the notice it expects, so
it reads either this start's record or the request's unchanged one. A peer's data of this call
stands for its ADVERT notice (every process advertises before it writes), so a start of
notices alone leaves out the notice to a peer already advertised: its data follows in the same
pass. The rule is one C
function, ``pc_xcall_advertise`` (native/papcoll_exchange.c), over ``records``, one cell that
every call of the Exchange points to: the per-call path (``advertise``) and, over a transport
that registers memory for its callers (verbs), the request's own plan, which owns
registrations of its buffers and starts it in one entry into C (plans.py;
native/papcoll_call.c), both apply it.

Every Exchange counts its own calls (``epoch``, from 1: the sequence number of its DATA
notices, one per call and peer) and its own zero-copy calls (``adverts``: the sequence of its
ADVERT notices), and owns its transport, so notices of different algorithms never mix. Every
call is a full exchange, so no process is ever more than one call ahead of a peer: two banks of
notice words and of inbox slots, and one advert record per peer, suffice (transport/base.py).

Agreement: a notice is current when its sequence number is the one expected; it must then
equal, word for word, the notice this process's own call expects (same signature code, the
length agreed for that peer), or, where lengths differ by peer, carry my code and data that
starts with my signature. An advert record carries the advertiser's whole signature, and a
sender writes into an advertised buffer only when that signature is its own and the write
fits: a peer whose call differs gets a MismatchError here and there, and no byte lands outside
the buffer it was meant for. A copy-based process that finds a disagreement still writes to
every peer it has not written to (its block fits its slot at every peer) before it reports,
so that they see it too.
"""
from collections import OrderedDict

import numpy as np

from .. import progress, rendezvous, signature
from ..callcache import CAPACITY
from ..errors import MismatchError
from ..native import EMSGSIZE, EPROTO, ETIMEDOUT, xport
from ..native.lib import counted, counter
from ..progress import CHECK_EVERY, Deadline
from .calls import DONE, Call, Flight
from .registry import describe

EVENTS = ("seen", "sent", "received")     # the engine's, by kind (PC_SEEN...)
CALLS = 4 * CAPACITY


class Exchange:
    """PAP Direct among the processes of ``transport`` (ranks ``ranks[i]`` in the user's
    communicator), for ``algo`` (its signatures, its errors, its Communicator's trace).
    ``traced[i]``: the user ranks whose blocks process i's data brings (default: its own)."""

    def __init__(self, algo, transport, ranks, traced=None):
        self.algo, self.transport, self.ranks = algo, transport, list(ranks)
        self.traced = [[r] for r in self.ranks] if traced is None else traced
        self.rank, self.size = transport.rank, transport.size
        self.trace = algo.ctx.trace
        self.counter = counter()        # epoch and adverts: the plans (C) read
        self.advert_counter = counter()   # them too
        self.calls = OrderedDict()   # prepared calls by shape and bank: see prepared()
        self.records_counter = counter()    # whose advert records my peers hold: its calls

    epoch = counted("counter")
    adverts = counted("advert_counter")
    records = counted("records_counter")   # read it too

    def begin(self, sig):
        """A call of signature ``sig`` begins: its deadline and sequence number."""
        self.epoch += 1
        self.deadline = Deadline(self.algo.ctx.timeout)
        self.sig = sig

    def mismatch(self, peer, theirs):
        return self.algo.mismatch(self.ranks[peer], theirs, self.sig)

    def start(self, c, block=-1):
        """Make ``c`` (a prepared call) this call (its start: sequence numbers, signature,
        every peer to be sent to and heard from, and with ``block`` >= 0 the notice expected
        from each)."""
        c.s.start(self.epoch, self.adverts, self.sig, signature.code_of(self.sig), block)

    def launch(self, scheme, block, send, recv, slot=0, persistent=None):
        """Start one call of Direct among these processes, of ``block`` bytes per peer, from
        ``send`` (a Message, never None here) to ``recv``: ``scheme`` COPY through slots of
        ``slot`` bytes of the inbox, ZCOPY or STEP; a start of the ``persistent`` request
        (:class:`Persistent`) if given. Returns its :class:`Flight`."""
        c = self.prepare(scheme, block, slot)
        if scheme != xport.COPY:
            self.adverts += 1
        self.start(c, block)
        if scheme != xport.COPY:
            self.advertise(c, self.transport.expose(recv.data), persistent)
        c.s.src, c.s.lkey = send.data, self.transport.source_key(send.data)
        c.s.out = recv.data if scheme == xport.COPY else None
        return Flight(self, c, "waiting for data" if scheme == xport.COPY else "waiting for peers",
                      (send.data, recv.data), exposed=None if scheme == xport.COPY else recv.data)

    def advertise(self, c, where, persistent):
        """A zero-copy call's advertisement of my receive buffer (``where``: its
        Descriptor), by the rule of the module's docstring: a persistent request's records
        carry its first epoch and are written once, while my peers still hold them for the
        same registration."""
        first = 0 if persistent is None else persistent.first(self.epoch)
        c.s.advertise_recv(first, persistent is not None and persistent.where == where, *where)
        if persistent is not None:
            persistent.where = where

    def launch_var(self, send, recv, slot):
        """Start one call of blocks of a length per peer (Alltoallv/w: vbuffers.Blocks
        ``send`` and ``recv``, my own block already copied); its Flight. A block of at most
        ``slot`` bytes goes into the receiver's inbox as in the copy-based scheme, a larger one
        into the region of the receive buffer the receiver advertised for it, as in the
        zero-copy scheme. Both ends of a pair know the block's length, so they choose alike,
        and every call counts as one of ``adverts`` on every rank, whether it advertises to
        anyone or not."""
        c = self.prepare_var(send, recv, slot)
        self.adverts += 1
        self.records = 0
        self.start(c)
        exposed = c.advertise.any()
        if exposed:
            where = self.transport.expose(recv.data)
            for peer in np.flatnonzero(c.advertise).tolist():
                c.s.advert(peer, where.address + int(recv.offset[peer]),
                           int(recv.length[peer]), where.rkey)
        c.s.src, c.s.lkey = send.data, self.transport.source_key(send.data)
        c.s.out = recv.data
        return Flight(self, c, "waiting for data", (send.data, recv.data),
                      exposed=recv.data if exposed else None,
                      landed=None if recv.moves is None else recv.unpack_one)

    def prepare_var(self, send, recv, slot, bank=None):
        """The engine's PC_VAR call for calls of these lengths and offsets in ``bank``."""
        bank = self.epoch % 2 if bank is None else bank
        key = (bank, slot, send.offset.tobytes(), send.length.tobytes(),
               recv.offset.tobytes(), recv.length.tobytes())
        c = self.prepared(key)
        if c is None:
            n, me = self.size, self.rank
            q = np.arange(n, dtype=np.uint64)
            inbox, expose = send.length <= slot, (recv.length > slot) & (q != me)
            c = self.calls[key] = Call(
                self, xport.VAR, 4 * n, records=n, src_off=send.offset, len=send.length,
                dst_off=np.where(inbox, xport.inbox_slot(bank, n, me, slot), 0),
                in_off=xport.inbox_slot(bank, n, q, slot),
                out_off=recv.offset, out_len=np.where(expose, 0, recv.length),
                expected=np.zeros(n), expect_len=recv.length,
                via_inbox=inbox.astype(np.uint8), advertise=expose.astype(np.uint8))
        return c

    def prepared(self, key):
        """The call prepared for ``key``, if kept: the CALLS most recently used are (both
        banks of every shape a full CallCache holds, twice over; a plan keeps its own)."""
        c = self.calls.get(key)
        if c is not None:
            self.calls.move_to_end(key)
        elif len(self.calls) >= CALLS:
            self.calls.popitem(last=False)
        return c

    def prepare(self, scheme, block, slot, bank=None):
        """The engine's call for calls of this shape in ``bank`` (default: this call's)."""
        key = (scheme, block, slot, self.epoch % 2 if bank is None else bank)
        c = self.prepared(key)
        if c is None:
            c = self.calls[key] = self.call(scheme, block, slot, key[3])
        return c

    def call(self, scheme, block, slot, bank):
        """A new engine's call for calls of this shape in ``bank``."""
        n, me = self.size, self.rank
        q = np.arange(n, dtype=np.uint64)
        copy = scheme == xport.COPY
        return Call(
            self, scheme, 4 * n, src_off=q * block, len=np.full(n, block),
            dst_off=np.full(n, xport.inbox_slot(bank, n, me, slot) if copy else me * block),
            in_off=xport.inbox_slot(bank, n, q, slot) if copy else q, out_off=q * block,
            out_len=np.full(n, block), expected=np.zeros(n))

    def resume(self, plan, rc):
        """Finish the call a plan left (rc: its engine's), or raise its error."""
        self.flight_of(plan, rc).wait()

    def flight_of(self, plan, rc):
        """The Flight of the call a plan ran (rc: its engine's: done, or left to finish), or
        its error."""
        if rc == 1:
            return DONE
        c = plan.parts[self.epoch % 2]
        self.sig, self.deadline = plan.s.sig, Deadline(self.algo.ctx.timeout)
        what = "waiting for data" if c.s.scheme == xport.COPY else "waiting for peers"
        if rc != ETIMEDOUT:
            self.failure(c, rc, what)
        return Flight(self, c, what, plan=plan)   # its plan holds what it sends from

    def drive(self, c, what, landed=None):
        """Run the engine in slices under the call's deadline (progress.wait), checking between
        slices that the awaited peers are still coming; map its failures to papcoll's errors.
        ``landed(q)``: called between slices for each peer q whose block landed (short slices
        then, so that a block is taken as it lands)."""
        progress.wait(self.stepper(c, what, landed), self.deadline,
                      lambda: self.error(c, what), lambda: self.check(c, what))

    def stepper(self, c, what, landed=None, plan=None):
        """The step of :meth:`drive`: run the engine for at most a slice (by ``plan``'s entry
        when a plan started the call); whether done."""
        tracing = self.trace.events
        todo = set(np.flatnonzero(c.waiting).tolist()) if landed else ()
        limit = CHECK_EVERY if landed is None else 1e-4
        run = plan.resume if plan is not None else \
            c.s.run

        def step(seconds):
            rc = run(min(seconds, limit))
            if tracing:
                self.replay(c)
            for q in [q for q in todo if not c.waiting[q]]:
                todo.discard(q)
                landed(q)
            if rc not in (1, ETIMEDOUT):
                self.failure(c, rc, what)
            return rc == 1
        return step

    def check(self, c, what):
        """Raise if a peer the call ``c`` (left by a slice in vain) awaits is known not to
        come."""
        comm, ranks = self.algo.ctx.comm, self.ranks
        rendezvous.elsewhere(comm, self.still(c), int, f"{describe(self.sig)} ({what})",
                             lambda rank: self.arrived(c, ranks.index(rank)))

    def error(self, c, what):
        """The error of the call ``c`` at its deadline."""
        return rendezvous.timed_out(self.algo.ctx.comm, f"{self.algo.name} {what}",
                                    self.still(c), self.deadline.timeout)

    def still(self, c):
        """The user's ranks the engine's call ``c`` still awaits."""
        return [self.ranks[q] for q in self.awaited(c)]

    def failure(self, c, rc, what):
        """Raise the error of the engine's call ``c`` that ended with ``rc``."""
        if rc == EPROTO:
            raise self.disagreement(c)
        if rc == EMSGSIZE:
            raise self.too_small(self.transport.native.failed_peer)
        peer = self.transport.native.failed_peer
        if rc != ETIMEDOUT and peer < self.size:   # a peer refused my write: it may have
            rank = self.ranks[peer]                 # left the call and released its memory
            doing = f"{describe(self.sig)} ({what})"
            gave = rendezvous.left(self.algo.ctx.comm, rank)
            # unless its own transport failed with me: then my write's failure is the cause
            # (both ends of a queue pair fail together), and its status says the most
            me = self.ranks[self.rank]
            if gave and not (gave[0].startswith("TransportError") and me in gave[1]):
                raise rendezvous.not_coming(self.algo.ctx.comm, doing, [rank], [rank], int)
        self.transport.failed(rc, what)

    def arrived(self, c, peer):
        """Whether ``peer``'s arrival signal for the call ``c`` is here (its data, or in a
        zero-copy call its advertisement), as of a poll now: what a wait's check reads once a
        message from peer is there, which peer sent after that signal was visible."""
        rc = c.s.arrived(peer)
        if rc < 0:
            self.transport.failed(rc, "polling")
        return rc == 1

    def awaited(self, c):
        """The peers the engine's call ``c`` waits for: in the zero-copy schemes, those whose
        advertisement it lacks (in step order, the one of this step), once it has all, or
        copy-based, those whose data has not landed."""
        if c.s.scheme == xport.STEP and c.unsent.any():
            return [(self.rank + c.s.next) % self.size]
        if c.s.scheme == xport.ZCOPY and c.unsent.any():
            return np.flatnonzero(c.unsent).tolist()
        if c.waiting.any():
            return np.flatnonzero(c.waiting).tolist()
        return [self.transport.native.failed_peer]   # my writes to it are not complete

    def too_small(self, peer):
        """A write that would not fit the inbox ``peer`` exposed: its set-up was for calls
        that differ from mine (the engine refused to write)."""
        rank = self.ranks[peer]
        return MismatchError(f"calls disagree: rank {rank}'s inbox is too small for "
                             f"{describe(self.sig)}, called by rank {self.ranks[self.rank]}; "
                             f"every rank must choose the same algorithm", [rank])

    def disagreement(self, c):
        s = c.s
        if s.scheme == xport.VAR and s.failed_in in (xport.IN_NOTICE, xport.IN_ADVERT):
            peer, theirs = s.failed_peer, s.failed_sig
            if s.failed_in == xport.IN_NOTICE:
                theirs = signature.make(s.failed_code, 0)
            if signature.code_of(theirs) == s.code:    # the same call: the lengths differ
                sender, receiver, sent, expected = (
                    (peer, self.rank, s.failed_len, c.expect_len[peer])
                    if s.failed_in == xport.IN_NOTICE
                    else (self.rank, peer, c.len[peer], s.failed_len))
                ranks = self.ranks
                return MismatchError(
                    f"calls disagree: rank {ranks[sender]} sends {sent} bytes to rank "
                    f"{ranks[receiver]}, which expects {expected} from it", [ranks[peer]])
        if s.failed_in == xport.IN_NOTICE:    # a notice carries a code and a length
            return self.mismatch(s.failed_peer, signature.make(s.failed_code, s.failed_len))
        return self.mismatch(s.failed_peer, s.failed_sig)

    def replay(self, c):
        """The engine's events of this slice, into the Communicator's trace."""
        for i in range(c.s.nevents):
            what, when = int(c.events[2 * i]), int(c.events[2 * i + 1]) * 1e-9
            kind, q = what >> 56, what & 0xFFFFFFFF
            for rank in self.traced[q]:
                self.trace.event(EVENTS[kind], rank, when)
        c.s.nevents = 0
