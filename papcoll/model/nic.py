"""A NIC's one direction as the model's engine (sim.py) plays it: its bandwidth shared evenly
among the messages it has work on at once (processor sharing), as a NIC shares its time among
the queue pairs it has work on, a packet each in turn.

Not first come, first served: a node's processes post their writes in their protocols' orders,
and under skew a PAP protocol's order is everyone's (the early receivers first). A NIC that took
whole messages in the order posted would hand an early receiver all of its data before a late
one got any, and the mean time in a call would fall towards half the node's time on the wire;
sharing, every receiver's data comes in together, and every receiver waits for the node's
bytes. Where the messages are of one packet, a NIC serves them whole, one at a time; the model
shares them too, which delays none of them past the last, what an alltoall waits for.

Each direction keeps virtual time: the service every message present has had so far, which
grows at 1 / (messages present) per second. A message of ``work`` seconds added at virtual time
``v`` is done when it reaches ``v + work``, so only the next to finish needs an event. An
arrival only puts that off, so an event is added only where the next finish comes sooner than
the one already waiting; one that comes too early finds nothing done and waits again.
"""
import heapq

INF = float("inf")


class Direction:
    """One direction of one node's NIC, on ``sim``'s clock (``sim.now``, ``sim._at``)."""

    __slots__ = ("sim", "v", "t", "jobs", "seq", "pending")

    def __init__(self, sim):
        self.sim, self.v, self.t = sim, 0.0, 0.0
        self.jobs, self.seq = [], 0             # (virtual time it is done, seq, done(now))
        self.pending = INF                      # the earliest event waiting

    def add(self, work, done):
        """A message of ``work`` seconds alone on the NIC; ``done(now)`` once it is through."""
        jobs, now = self.jobs, self.sim.now
        if jobs:
            self.v += (now - self.t) / len(jobs)
        self.t = now
        self.seq += 1
        heapq.heappush(jobs, (self.v + work, self.seq, done))
        self._next()

    def _next(self):
        """The event for the next to finish, unless one as early is waiting."""
        jobs = self.jobs
        if jobs:
            at = self.t + (jobs[0][0] - self.v) * len(jobs)
            if at < self.t:
                at = self.t
            if at < self.pending:
                self.pending = at
                self.sim._at(at, self._due)

    def _due(self):
        jobs, now = self.jobs, self.sim.now
        if now >= self.pending:
            self.pending = INF
        if jobs:
            self.v += (now - self.t) / len(jobs)
        self.t = now
        finished = []
        if jobs and jobs[0][0] <= self.v + 1e-12 * (self.v if self.v > 1.0 else 1.0):
            due = jobs[0][0]
            close = due + 1e-12 * (due if due > 1.0 else 1.0)
            while jobs and jobs[0][0] <= close:
                finished.append(heapq.heappop(jobs)[2])
            if due > self.v:
                self.v = due
        self._next()
        for done in finished:
            done(now)
