"""Optional per-call trace of the order in which a process served its peers.

Enabled by ``Communicator(comm, trace=True)`` or ``PAPCOLL_TRACE=1``. Times are
``time.monotonic()`` seconds, comparable between processes of one machine.
"""
import time
from collections import deque


class Trace:
    def __init__(self, maxlen=1000):
        self.calls = deque(maxlen=maxlen)
        self.current = None

    def begin(self, algorithm, call):
        self.current = {"algorithm": algorithm, "call": call, "enter": time.monotonic(),
                        "events": []}
        self.calls.append(self.current)

    def event(self, what, peer):
        """``what``: "seen" (peer's arrival observed), "sent" (my block written to peer),
        "received" (peer's block landed here)."""
        self.current["events"].append((what, peer, time.monotonic()))

    def end(self):
        self.current["exit"] = time.monotonic()


class NoTrace:
    """Stands in for Trace when tracing is off, so algorithms need no ``if``."""

    def begin(self, algorithm, call):
        pass

    def event(self, what, peer):
        pass

    def end(self):
        pass
