"""Optional per-call trace of the order in which a process served its peers, and of the
phases of a call.

Enabled by ``Communicator(comm, trace=True)`` or ``PAPCOLL_TRACE=1``; ``trace="phases"``
records the phases alone (cheaper: no event per peer). Times are ``time.monotonic()`` seconds,
comparable between processes of one machine.
"""
import time
from collections import deque


class Trace:
    def __init__(self, maxlen=1000, events=True):
        self.calls = deque(maxlen=maxlen)
        self.current = None
        self.events = events            # algorithms serve one peer at a time to record them
        if not events:
            self.event = _nothing

    def begin(self, algorithm, call):
        self.current = {"algorithm": algorithm, "call": call, "enter": time.monotonic(),
                        "events": [], "phases": []}
        self.calls.append(self.current)

    def event(self, what, peer, when=None):
        """``what``: "seen" (peer's arrival observed), "sent" (my block written to peer),
        "received" (peer's block landed here); ``when``: its time, if not now."""
        self.current["events"].append((what, peer, time.monotonic() if when is None else when))

    def phase(self, name, when=None):
        """A phase of the call begins (it lasts until the next one, or the call's end);
        ``when``: its time, if not now."""
        self.current["phases"].append((name, time.monotonic() if when is None else when))

    def end(self):
        self.current["exit"] = time.monotonic()


def _nothing(*args):
    pass


def phase_times(call):
    """{phase: seconds} of a recorded call (a phase entered more than once -- one per piece --
    adds up)."""
    marks = call["phases"] + [(None, call["exit"])]
    times = {}
    for (name, start), (_, stop) in zip(marks, marks[1:]):
        times[name] = times.get(name, 0.0) + stop - start
    return times


class NoTrace:
    """Stands in for Trace when tracing is off, so algorithms need no ``if``."""
    events = False

    def begin(self, algorithm, call):
        pass

    def event(self, what, peer, when=None):
        pass

    def phase(self, name, when=None):
        pass

    def end(self):
        pass
