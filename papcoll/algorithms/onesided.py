"""PAP Direct as a component (:class:`Exchange`), and what the algorithms written on the
one-sided transport share.

An Exchange runs among the processes of one transport: the whole communicator for ``direct``
and ``pap_direct``, the nodes' masters for the hierarchical algorithms (shm_direct.py). Its
ranks map to the user's for errors and traces, and each call says, per peer, what to write
where and how many bytes to expect -- the masters' aggregates differ in size when nodes do.

Every Exchange counts its own calls (``epoch``, from 1: the sequence number of its DATA
notices, one per call and peer) and its own zero-copy calls (``adverts``: the sequence of its
ADVERT notices), and owns its transport, so notices of different algorithms never mix. Every
call is a full exchange, so no process is ever more than one call ahead of a peer: two banks of
notice words and of inbox slots, and one advert record per peer, suffice (transport/base.py).

Agreement: a notice is current when its sequence number is the one expected; it must then
equal, word for word, the notice this process's own call expects (same signature code, the
length agreed for that peer). An advert record carries the advertiser's whole signature, and a
sender writes into an advertised buffer only when that signature is its own: a peer whose call
differs gets a MismatchError here and there, and no byte lands outside the buffer it was meant
for.
"""
import ctypes

import numpy as np

from .. import rendezvous, signature
from ..buffers import Message
from ..errors import MismatchError, PapcollTimeoutError
from ..native import EPROTO, ETIMEDOUT, xport
from ..native.lib import address
from ..progress import CHECK_EVERY, Deadline, serve_as_ready
from ..transport import open_transport
from ..transport.base import (ADVERT, ADVERT_BYTES, ADVERT_RECORD, ADVERTS, DATA, DESCRIPTOR,
                              SEQ_MASK, code_of, length_of, notice_word, seq_of)
from .registry import Algorithm, describe


def successors(rank, size):
    """Peers in the order rank serves them: (rank + i) mod size for i = 1 .. size-1."""
    return [(rank + i) % size for i in range(1, size)]


ZERO_COPY = (xport.ZCOPY, xport.STEP)


class Exchange:
    """PAP Direct among the processes of ``transport`` (ranks ``ranks[i]`` in the user's
    communicator), for ``algo`` (its signatures, its errors, its Communicator's trace)."""

    def __init__(self, algo, transport, ranks):
        self.algo, self.transport, self.ranks = algo, transport, list(ranks)
        self.rank, self.size = transport.rank, transport.size
        self.peers = successors(self.rank, self.size)
        self.trace = algo.ctx.trace
        self.counter = ctypes.c_uint64(0)       # epoch, shared with the fast lane (C)
        self.adverts = 0
        self.calls = {}

    @property
    def epoch(self):
        return self.counter.value

    @epoch.setter
    def epoch(self, value):
        self.counter.value = value

    def begin(self, sig, lengths):
        """A call begins: its deadline, sequence number and signature ``sig``; ``lengths``: the
        bytes each peer's DATA notice carries (one number for all, or a list by peer), or None
        when they may differ (the data says whose call it is: the caller checks it)."""
        self.epoch += 1
        self.deadline = Deadline(self.algo.ctx.timeout)
        self.sig = sig
        self.data = self.transport.board(DATA, self.epoch % 2)   # live: polls update it
        code = signature.code_of(sig)
        self.expected = (notice_word(self.epoch, code, lengths) if isinstance(lengths, int)
                         else None if lengths is None
                         else [notice_word(self.epoch, code, n) for n in lengths])

    def end(self):
        self.transport.complete()

    def notice(self):
        return DATA, self.epoch, signature.code_of(self.sig)

    def put(self, peer, dest, offset, data):
        """Write ``data`` at ``offset`` of ``dest`` at ``peer``, with this call's DATA notice."""
        self.transport.put(peer, dest, offset, data, notice=self.notice())
        self.trace.event("sent", self.ranks[peer])

    # ---- notices -----------------------------------------------------------------------------

    def landed(self, peer):
        """Whether ``peer``'s data of this call has landed (a notice of another call shape
        raises MismatchError)."""
        word = int(self.data[peer])
        if seq_of(word) != self.epoch & SEQ_MASK:
            return False
        expected = self.expected if isinstance(self.expected, int) or self.expected is None \
            else self.expected[peer]
        if word != expected and (expected is not None or
                                 code_of(word) != signature.code_of(self.sig)):
            raise self.mismatch(peer, signature.make(code_of(word), length_of(word)))
        return True

    def mismatch(self, peer, theirs):
        return self.algo.mismatch(self.ranks[peer], theirs, self.sig)

    def advertise(self, array):
        """Expose ``array`` (my receive buffer) and tell every peer where it is, for which call
        and signature: my arrival signal."""
        self.adverts += 1
        self.advert_board = self.transport.board(ADVERT, self.adverts % 2)
        record = ADVERT_RECORD.pack(*DESCRIPTOR.unpack(self.transport.expose(array)),
                                    self.epoch, self.sig)
        source = np.frombuffer(record, np.uint8)
        notice = (ADVERT, self.adverts, signature.code_of(self.sig))
        self.transport.put_all(self.peers, ADVERTS, self.rank * ADVERT_BYTES, source, notice)

    def has_advertised(self, peer):
        """Whether ``peer`` advertised for this call; its record must be for my call shape."""
        if seq_of(int(self.advert_board[peer])) != self.adverts & SEQ_MASK:
            return False
        self.descriptor(peer)      # checks it
        return True

    def descriptor(self, peer):
        """The descriptor ``peer`` advertised for this call, after checking its signature."""
        *where, epoch, sig = ADVERT_RECORD.unpack(self.transport.advert(peer))
        if sig != self.sig or epoch != self.epoch:
            raise self.mismatch(peer, sig)
        return DESCRIPTOR.pack(*where)

    def advertised_ahead(self, peer):
        """Whether ``peer`` advertised for a zero-copy call while this call advertises nothing
        and its data of this call has not landed: its call differs (MismatchError). A peer
        whose data landed has finished this call and may advertise for its next already; its
        data notice was visible here before that advert was sent (``complete()`` ends each
        call), so reading the advert first and the data second cannot take a finished peer
        for one in another call."""
        ahead = self.adverts + 1
        if seq_of(int(self.transport.board(ADVERT, ahead % 2)[peer])) != ahead & SEQ_MASK:
            return False
        if self.landed(peer):
            return False
        raise self.mismatch(peer, ADVERT_RECORD.unpack(self.transport.advert(peer))[-1])

    # ---- the native engine -------------------------------------------------------------------

    def run(self, scheme, block, send, recv, slot=0):
        """One call of Direct among these processes, run by the native engine
        (native/papcoll_exchange.c, where the protocol is): ``scheme`` COPY (copy-based PAP
        Direct through slots of ``slot`` bytes of the inbox, bank = the call's parity), ZCOPY
        (zero-copy, PAP-aware) or STEP (zero-copy in step order: ``direct``). Blocks of
        ``block`` bytes; ``send`` (a Message, never None here) to ``recv``."""
        c = self.prepare(scheme, block, slot)
        s = c.s
        s.epoch, s.adverts, s.sig, s.code = self.epoch, self.adverts, self.sig, \
            signature.code_of(self.sig)
        c.expected[:] = notice_word(self.epoch, s.code, block)
        s.src = address(send.data)
        s.out = address(recv.data) if scheme == xport.COPY else None
        c.unsent[:] = c.waiting[:] = 1
        c.unsent[self.rank] = c.waiting[self.rank] = 0
        s.next, s.advertised, s.nevents, s.failed_in = 1, 0, 0, 0
        if scheme != xport.COPY:
            self.adverts += 1
            s.adverts = self.adverts
            record = ADVERT_RECORD.pack(*DESCRIPTOR.unpack(self.transport.expose(recv.data)),
                                        self.epoch, self.sig)
            c.record[:] = np.frombuffer(record, np.uint8)
        self.drive(c, "waiting for data" if scheme == xport.COPY else "waiting for peers")
        self.transport.complete()

    def prepare(self, scheme, block, slot, bank=None):
        """The engine's call struct for calls of this shape in ``bank`` (default: this
        call's), kept: calls repeat."""
        key = (scheme, block, slot, self.epoch % 2 if bank is None else bank)
        c = self.calls.get(key)
        if c is None:
            if len(self.calls) >= 16:
                self.calls.clear()
            c = self.calls[key] = _Call(self, scheme, block, slot, key[3])
        return c

    def lane(self, block, slot, sig, shape):
        """A fast lane for copy-based calls of ``block`` bytes per peer (xport.XLane), armed
        for buffers of ``shape`` (buffers.lane_shape), or None."""
        calls = [self.prepare(xport.COPY, block, slot, bank) for bank in (0, 1)]
        for call in calls:
            call.s.sig, call.s.code = sig, signature.code_of(sig)
        lane = xport.XLane(calls, self.counter)
        ok = lane.arm(self.size, block * self.size, sig, self.algo.ctx.timeout, CHECK_EVERY,
                      **shape)
        return lane if ok else None

    def resume(self, lane, rc):
        """Finish the call a fast lane left (rc: its engine's), or raise its error."""
        c = lane.calls[self.epoch % 2]
        self.sig, self.deadline = lane.s.lane.sig, Deadline(self.algo.ctx.timeout)
        if rc == ETIMEDOUT:
            self.drive(c, "waiting for data")
        elif rc == EPROTO:
            raise self.disagreement(c.s)
        else:
            self.transport.failed(rc, "waiting for data")

    def drive(self, c, what):
        """Run the engine in slices under the call's deadline, checking between slices that
        the awaited peers are still coming; map its failures to papcoll's errors."""
        comm, ranks = self.algo.ctx.comm, self.ranks
        doing = f"{describe(self.sig)} ({what})"
        tracing = self.trace.events
        while True:
            rc = xport.run(c.s, int(min(self.deadline.left(), CHECK_EVERY) * 1e9))
            if tracing:
                self.replay(c)
            if rc == 1:
                return
            still = self.awaited(c)
            if rc == ETIMEDOUT:
                if self.deadline.expired():
                    rendezvous.last_look(comm, [ranks[q] for q in still], self.deadline.timeout)
                    missing, gave = rendezvous.blame(comm, [ranks[q] for q in still])
                    raise PapcollTimeoutError(f"{self.algo.name} {what}", missing,
                                              self.deadline.timeout, gave)
                rendezvous.elsewhere(comm, [ranks[q] for q in still], int, doing,
                                     lambda rank: self.arrived(ranks.index(rank),
                                                               c.s.scheme in ZERO_COPY))
                continue
            if rc == EPROTO:
                raise self.disagreement(c.s)
            self.transport.failed(rc, what)

    def arrived(self, peer, zero_copy):
        """Whether ``peer``'s arrival signal for this call is here (its data, or in a
        ``zero_copy`` call its advertisement), as of a poll now: what a wait's check reads once
        a message from peer is there, which peer sent after that signal was visible."""
        self.transport.poll()
        board = self.transport.board
        return (seq_of(int(board(DATA, self.epoch % 2)[peer])) == self.epoch & SEQ_MASK
                or zero_copy and seq_of(int(board(ADVERT, self.adverts % 2)[peer]))
                == self.adverts & SEQ_MASK)

    def awaited(self, c):
        """The peers the engine's call ``c`` waits for: in the zero-copy schemes, those whose
        advertisement it lacks (in step order, the one of this step), once it has all, or
        copy-based, those whose data has not landed."""
        if c.s.scheme == xport.STEP and c.unsent.any():
            return [(self.rank + c.s.next) % self.size]
        if c.s.scheme == xport.ZCOPY and c.unsent.any():
            return np.flatnonzero(c.unsent).tolist()
        return np.flatnonzero(c.waiting).tolist()

    def disagreement(self, s):
        peer, word = s.failed_peer, s.failed_word
        if s.failed_in == xport.IN_NOTICE:
            return self.mismatch(peer, signature.make(code_of(word), length_of(word)))
        return self.mismatch(peer, word)

    def replay(self, c):
        """The engine's events of this slice, into the Communicator's trace."""
        names = ("seen", "sent", "received")
        for i in range(c.s.nevents):
            what, when = int(c.events[2 * i]), int(c.events[2 * i + 1])
            self.trace.event(names[what >> 56], self.ranks[what & 0xFFFFFFFF], when * 1e-9)
        c.s.nevents = 0

    # ---- the schemes -------------------------------------------------------------------------

    def copy_based(self, send_to, serve, what, gather=None):
        """The copy-based PAP Direct: ``send_to(q)`` writes my data for q (with ``put``: it
        never waits), ``serve(q)`` takes q's data once it has landed. Data found from q means
        q has arrived, so q is served first, and sent to first; idle time goes to writing to
        peers not seen yet. ``gather`` (optional: the hierarchical masters' local phase) is
        polled while it returns False -- my data is not complete yet, so nothing is sent, but
        peers' data is served as it lands; ``gather(seconds)`` waits at most that long and says
        whether my data is complete. A rank that finds a disagreement still writes to every
        peer before it raises (once its data is complete), so that they see it too."""
        unsent, waiting = dict.fromkeys(self.peers), dict.fromkeys(self.peers)
        complete = [gather is None]

        def send(peer):
            del unsent[peer]
            send_to(peer)

        def arrived(peer):
            self.trace.event("seen", self.ranks[peer])
            if peer in unsent and complete[0]:
                send(peer)
            serve(peer)
            del waiting[peer]
            self.trace.event("received", self.ranks[peer])

        def idle():
            self.transport.poll()
            if not complete[0]:
                complete[0] = gather(0)
                return complete[0]
            if unsent:
                send(next(iter(unsent)))
                return True
            for peer in waiting:                       # or is it in another call?
                self.advertised_ahead(peer)
            return False

        try:
            self.wait(self.peers, self.landed, arrived, what, idle)
            while not complete[0]:                     # everyone's data came before mine was
                complete[0] = gather(self.deadline.slice())      # complete: finish, send it
            for peer in list(unsent):
                send(peer)
        except MismatchError:
            if complete[0]:
                for peer in list(unsent):
                    send(peer)
            raise

    def in_order(self, send_to, serve, what):
        """Direct with writes that never wait: write to rank + i at step i, then take each
        peer's data as it lands."""
        for peer in self.peers:
            send_to(peer)
        self.wait_data(self.peers, serve, what)

    def wait_data(self, pending, serve=None, what="waiting for data"):
        """Wait until the data of ``pending`` peers has landed, handling each as it does."""
        def landed(peer):
            if serve is not None:
                serve(peer)
            self.trace.event("received", self.ranks[peer])

        self.wait(pending, self.landed, landed, what)

    def wait(self, pending, ready, serve, what, idle=None):
        """serve_as_ready over the transport, naming the user's ranks: those that gave up
        themselves are not blamed, and a peer known not to come ends the wait early."""
        if idle is None:
            def idle():
                self.transport.poll()      # drives progress of writes into my memory
                return False
        comm, doing = self.algo.ctx.comm, f"{describe(self.sig)} ({what})"
        ranks = self.ranks
        try:
            serve_as_ready(pending, ready, serve, self.deadline, f"{self.algo.name} {what}",
                           ranks=lambda peers: [ranks[q] for q in peers], idle=idle,
                           check=lambda still: rendezvous.elsewhere(
                               comm, [ranks[q] for q in still], int, doing,
                               lambda rank: self.transport.poll() or ready(ranks.index(rank))))
        except PapcollTimeoutError as err:              # peers are on other nodes here
            if err.timeout is None:                      # ended early: blamed already
                raise
            rendezvous.last_look(comm, err.missing, err.timeout)
            missing, gave = rendezvous.blame(comm, err.missing)
            raise PapcollTimeoutError(f"{self.algo.name} {what}", missing, err.timeout,
                                      gave) from None


class OneSidedAlgorithm(Algorithm):
    """An algorithm that is one Exchange over the whole communicator."""

    def __init__(self, ctx):
        super().__init__(ctx)
        transport = open_transport(ctx.comm, self.inbox_bytes(ctx.size),
                                   Deadline(ctx.timeout))
        self.exchange = Exchange(self, transport, range(ctx.size))

    def inbox_bytes(self, size):
        """Inbox bytes this algorithm needs (those that copy through it say how many)."""
        return 0

    def close(self, collective=True):
        self.exchange.transport.close(collective)

    def zero_copy(self, send, recv, scheme=""):
        """Direct's zero-copy scheme, PAP-aware or in step order (``direct``): advertise my
        receive buffer, write into every peer's as soon as it has advertised, wait for the
        data; the blocks that land while peers are missing are noted as they do."""
        x = self.exchange
        x.begin(self.signature(recv.block, scheme), recv.block)
        send = self.private_send(send, recv)
        self.copy_own(send, recv, x.rank)
        x.run(xport.ZCOPY if self.pap else xport.STEP, recv.block, send, recv)

    @staticmethod
    def private_send(send, recv):
        """The send blocks, copied out of ``recv`` for MPI.IN_PLACE when peers write into it."""
        if send is not None:
            return send
        return Message(recv.data.copy(), recv.block, recv.count, recv.datatype)

    @staticmethod
    def copy_own(send, recv, rank):
        if send is not None:
            recv.block_of(rank)[:] = send.block_of(rank)


class _Call:
    """The engine's struct pc_xcall for one call shape of an Exchange, and its arrays."""

    def __init__(self, x, scheme, block, slot, bank):
        n, me, t = x.size, x.rank, x.transport
        self.unsent, self.waiting = np.zeros(n, np.uint8), np.zeros(n, np.uint8)
        self.expected = np.zeros(n, np.uint64)
        q = np.arange(n, dtype=np.uint64)
        self.src_off, self.len = q * block, np.full(n, block, np.uint64)
        if scheme == xport.COPY:
            self.dst_off = np.full(n, (bank * n + me) * slot, np.uint64)
            self.in_off = (bank * n + q) * slot
        else:
            self.dst_off, self.in_off = np.full(n, me * block, np.uint64), q
        self.out_off, self.out_len = q * block, self.len
        self.record = np.zeros(ADVERT_BYTES, np.uint8)
        self.events = np.zeros(2 * 4 * n, np.int64)
        a = address
        self.s = xport.XCallStruct(
            x=t.native.ptr, scheme=scheme, expected=a(self.expected), src_off=a(self.src_off),
            len=a(self.len), dst_off=a(self.dst_off), lkey=0, inbox=a(t.inbox) if t.inbox.size
            else None, in_off=a(self.in_off), out_off=a(self.out_off), out_len=a(self.out_len),
            record=a(self.record), record_lkey=t.record_lkey(self.record),
            advert_area=t.advert_area, unsent=a(self.unsent), waiting=a(self.waiting),
            events=a(self.events) if x.trace.events else None, max_events=4 * n)
