"""The model's engine: one alltoall call, event by event.

Each process is a generator (its algorithm's protocol, protocols.py and mpi_algorithms.py)
that yields what it does next, and gets back what it learned:

* ``Cpu(seconds)``: busy on its core. Where more processes than cores share a node, every
  process's CPU time stretches by ``machine.share(ppn)``: they all poll while they wait, so a
  core is never idle and the scheduler shares it evenly.
* ``Put(dst, nbytes, key, link, count=1)``: a write (or MPI message) to ``dst``, posted with
  ``link.o`` of my CPU; ``count`` > 1: it stands for that many alike (aggregate.py), which
  take ``count`` times the CPU and the NICs' time, and it lands with the last of them. Through
  a NIC (LogGP, nic.py): my node's NIC sends it in ``g`` (or its bytes, ``n G``, if longer), its
  bytes come into the destination node's NIC ``L`` after they left, taking ``n G`` there, and
  each NIC's direction shares its time evenly among the messages it has at once, so incast
  queues; it lands when both have taken it, its last byte ``L`` after it left. A ``shared``
  link (MPI inside a node) is a copy by my CPU (``o + n G``), seen ``L`` later. It lands in
  ``dst``'s mailbox under ``key``. One longer than its link's ``copied`` (papcoll's, over
  verbs: the NIC reads its source after the post) completes at its poster ``ack`` after it
  lands. One whose link is ``answered`` lands only once the target's own progress has taken
  it, and its notice goes once the poster has seen the target's answer: where the two are
  bound to different CPUs (the machine's ``placement``), each of them that shares its CPU
  adds ``wake``, waiting for its turn on it. Bound to one CPU, the poster's wait hands that
  CPU to the target.
* ``Complete()``: until my writes that complete have completed (papcoll's call ends so: the
  caller's buffers, and the hierarchical master's outbox, are free again); none: at once.
* ``Signal(dsts, key)``: a store to a flag other processes of my node poll; seen ``flag``
  later.
* ``Wait(keys, any=False)``: until every key (or one: then it is sent back) is in my mailbox;
  noticing costs a poll, and where processes outnumber cores a wait that had to wait adds
  ``wake``: the waiter is often off its core when what it waits for comes.
* ``Poll(keys)``: the keys already in my mailbox (a list), for one poll's CPU.
* ``Sleep(seconds)``: time that passes without CPU (a wait the model does not play out).

A process's time in the call runs from its arrival to its generator's end. Nothing is
random here: arrivals are the caller's.
"""
import heapq
from collections import Counter
from dataclasses import dataclass
from operator import itemgetter

from .nic import Direction
from .params import Link


@dataclass(frozen=True)
class Cpu:
    seconds: float


@dataclass(frozen=True)
class Put:
    dst: int
    nbytes: int
    key: tuple
    link: Link
    count: float = 1.0       # messages it stands for (aggregate.py); it lands with the last


@dataclass(frozen=True)
class Sleep:
    seconds: float           # waiting on something outside the model's events: no CPU


@dataclass(frozen=True)
class Signal:
    dsts: tuple
    key: tuple


@dataclass(frozen=True)
class Wait:
    keys: tuple
    any: bool = False


@dataclass(frozen=True)
class Poll:
    keys: tuple


@dataclass(frozen=True)
class Complete:
    pass


_TIME = itemgetter(0)                       # of a mailbox entry: (time landed, count)


class Deadlock(RuntimeError):
    pass


class Flight:
    """A message between two NICs (Sim._send): it lands ``L`` after the later of its sending
    NIC's last byte (``idle`` before that NIC is done with it) and its receiving NIC's."""

    __slots__ = ("sim", "put", "L", "idle", "left", "at", "acked")

    def __init__(self, sim, put, L, idle, acked):
        self.sim, self.put, self.L, self.idle, self.left, self.at = sim, put, L, idle, 2, 0.0
        self.acked = acked             # (poster, key) where it completes there, else None

    def sent(self, now):
        self._done(now - self.idle)

    def taken(self, now):
        self._done(now)

    def _done(self, at):
        self.at, self.left = max(self.at, at + self.L), self.left - 1
        if not self.left:
            sim, put = self.sim, self.put
            if self.at > sim.now:
                sim._at(self.at, sim._land, put.dst, put.key, put.count)
            else:
                sim._land(put.dst, put.key, put.count)
            if self.acked:
                sim._at(self.at + put.link.ack, sim._land, *self.acked)


class Sim:
    """One call among the ranks of ``nodes`` (a list of lists of ranks, 0..N-1)."""

    def __init__(self, machine, nodes):
        self.m = machine
        self.n = sum(map(len, nodes))
        self.node_of = [0] * self.n
        for i, ranks in enumerate(nodes):
            for r in ranks:
                self.node_of[r] = i
        self.share = [machine.share(len(nodes[self.node_of[r]])) for r in range(self.n)]
        placed = machine.placement if len(machine.placement) == self.n else []
        load = Counter(placed)
        self.cpu, self.crowded = placed, [load[c] > 1 for c in placed]
        self.messages = 0

    def run(self, procs, arrivals):
        """Run ``procs`` (one generator per rank) from ``arrivals`` (seconds); the times each
        ends, a list."""
        self.now, self.heap, self.seq = 0.0, [], 0
        self.box = [{} for _ in range(self.n)]      # key -> (time landed, messages it stands for)
        self.waiting = [None] * self.n
        self.unacked = [[] for _ in range(self.n)]     # my writes' completions, by key
        self.nics = [(Direction(self), Direction(self)) for _ in range(max(self.node_of) + 1)]
        self.end = [None] * self.n
        for r, gen in enumerate(procs):
            self._at(arrivals[r], self._step, r, gen, None)
        while self.heap:
            self.now, _, fn, args = heapq.heappop(self.heap)
            fn(*args)
        stuck = [r for r in range(self.n) if self.end[r] is None]
        if stuck:
            raise Deadlock("model: ranks " + ", ".join(
                f"{r} (waiting for {self.waiting[r][0].keys if self.waiting[r] else '?'})"
                for r in stuck[:4]) + " never finish")
        return self.end

    def _at(self, t, fn, *args):
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, fn, args))

    def _step(self, r, gen, value):
        try:
            action = gen.send(value)
        except StopIteration:
            self.end[r] = self.now
            return
        share = self.share[r]
        kind = type(action)
        if kind is Cpu:
            self._at(self.now + action.seconds * share, self._step, r, gen, None)
        elif kind is Put:
            self.messages += 1
            link, n, count = action.link, action.nbytes, action.count
            if link.shared:
                posted = self.now + (link.o + n * link.G) * share * count
                self._at(posted + link.L + self._turns(r, action), self._land, action.dst,
                         action.key, count)
                self._at(posted, self._step, r, gen, None)
            else:
                acked = None
                if n > link.copied:
                    acked = (r, ("acked", self.messages))
                    self.unacked[r].append(acked[1])
                self._at(self.now + link.o * share * count, self._send, action, acked, r, gen)
        elif kind is Sleep:
            self._at(self.now + action.seconds, self._step, r, gen, None)
        elif kind is Signal:
            for d in action.dsts:
                self._at(self.now + self.m.flag, self._land, d, action.key)
            self._at(self.now, self._step, r, gen, None)
        elif kind is Poll:
            landed = list(filter(self.box[r].__contains__, action.keys))
            self._at(self.now + self.m.poll * share, self._step, r, gen, landed)
        elif kind is Wait:
            self._wait(r, action, gen)
        elif kind is Complete:
            keys, self.unacked[r] = tuple(self.unacked[r]), []
            if keys:
                self._wait(r, Wait(keys), gen)
            else:
                self._at(self.now, self._step, r, gen, None)
        else:
            raise TypeError(f"model: rank {r} yielded {action!r}")

    def _send(self, put, acked, r, gen):
        """r's message, posted, through its node's NIC and the destination's: it lands once
        both have taken it, its last byte ``L`` after either. The receiving NIC takes its bytes
        from when they come, ``L`` after they left: every message's ``L`` later, which is
        the same as from when they leave, ``L`` added at the end (one event fewer). Then r's
        next action."""
        link, n, count = put.link, put.nbytes, put.count
        bytes_out = n * link.G
        gap = max(link.g, bytes_out)            # its last byte leaves before its gap is over
        flight = Flight(self, put, link.L + self._turns(r, put), gap - bytes_out, acked)
        self.nics[self.node_of[r]][0].add(gap * count, flight.sent)
        self.nics[self.node_of[put.dst]][1].add(bytes_out * count, flight.taken)
        self._step(r, gen, None)

    def _turns(self, r, put):
        """What r's write ``put`` waits, beyond its link's L, for the turns on their CPUs of
        the processes that must take it: its target, and then r to see the answer."""
        if not put.link.answered or not self.cpu or self.cpu[r] == self.cpu[put.dst]:
            return 0.0
        return self.m.wake * (self.crowded[r] + self.crowded[put.dst])

    def _land(self, r, key, count=1.0):
        self.box[r][key] = (self.now, count)
        waiting = self.waiting[r]
        if waiting and key in waiting[2]:
            wait, gen, missing = waiting
            if wait.any:                      # the first of its keys to land (none had)
                self._resume(r, gen, key, count, woken=True)
            else:
                missing.discard(key)
                if not missing:
                    self._resume(r, gen, None, 1.0, woken=True)

    def _wait(self, r, wait, gen):
        """Resume at once if the wait is met (for ``any``: the first of its keys to land,
        served in arrival order), else keep what it still misses for _land to strike off."""
        box = self.box[r]
        if wait.any:
            landed = box.keys() & wait.keys
            if landed:                        # the earliest; a tie, the least key (each run alike)
                found = min(zip(map(_TIME, map(box.__getitem__, landed)), landed))[1]
                return self._resume(r, gen, found, box[found][1])
            missing = set(wait.keys)
        else:
            missing = {k for k in wait.keys if k not in box}
            if not missing:
                return self._resume(r, gen, None, 1.0)
        self.waiting[r] = (wait, gen, missing)

    def _resume(self, r, gen, found, polls, woken=False):
        """After a met wait: a poll for each message it stands for, and where processes
        outnumber cores, ``wake`` if it had to wait (it was off its core)."""
        self.waiting[r] = None
        share = self.share[r]
        wake = self.m.wake if woken and share > 1 else 0.0
        self._at(self.now + self.m.poll * share * polls + wake, self._step, r, gen, found)
