"""Exceptions raised by papcoll. Every message names the value that is wrong."""


class PapcollError(Exception):
    """Base class of every papcoll error."""


class ConfigError(PapcollError, ValueError):
    """A PAPCOLL_* setting outside its allowed values; the message names it and its range."""


class BufferSpecError(PapcollError, ValueError):
    """A send or receive buffer spec that papcoll cannot use as given."""


class MismatchError(BufferSpecError):
    """Ranks made calls that disagree (block size, algorithm or scheme; at set-up, the step).

    ``ranks`` holds the user's ranks whose call differs from this rank's. Raised on every rank
    that sees the disagreement, before any byte is read beyond a sender's buffer; the
    Communicator is unusable afterwards.
    """

    def __init__(self, message, ranks):
        self.ranks = sorted(ranks)
        super().__init__(message)


class AlgorithmError(PapcollError, ValueError):
    """An unknown algorithm name, or one that cannot run on this communicator."""


class TransportError(PapcollError, OSError):
    """A transport (verbs, MPI RMA, shared memory, CMA) failed or is unavailable. ``ranks``:
    the user's ranks of the peers a failure concerns, where known (a CMA read of a process
    that died, a write a peer refused)."""

    def __init__(self, *args, ranks=()):
        super().__init__(*args)
        self.ranks = sorted(ranks)


class CommunicatorError(PapcollError, TypeError):
    """A communicator papcoll cannot work on: MPI.COMM_NULL, or not an intracommunicator."""


class CommunicatorStateError(PapcollError, RuntimeError):
    """The Communicator is closed, broken by an earlier error, in use by another thread, or MPI
    is finalized."""


class PapcollTimeoutError(PapcollError, TimeoutError):
    """Peers did not arrive (or their data did not land) before the deadline.

    ``missing`` holds the ranks (in the user's communicator) that were waited for, or None where
    MPI cannot say which (a nonblocking MPI collective that did not complete); ``gave_up`` those
    awaited ranks that had already given up on this call themselves: they raised an error of
    their own, so they are not the cause. ``timeout`` is None when the wait ended before the
    deadline because ranks gave up: the call could not complete any more.
    """

    def __init__(self, what, missing, timeout, gave_up=()):
        self.missing = None if missing is None else sorted(missing)
        self.gave_up = sorted(gave_up)
        self.timeout = timeout
        if self.missing is None:
            text = (f"{what}: not complete after {timeout:g} s (PAPCOLL_TIMEOUT); some rank of the "
                    f"communicator did not join (MPI does not say which)")
        elif timeout is None:
            text = f"{what}: cannot complete"
            if self.missing:
                text += f"; no sign yet of rank(s) {self.missing}"
        elif self.missing:
            text = f"{what}: no sign of rank(s) {self.missing} after {timeout:g} s (PAPCOLL_TIMEOUT)"
        else:     # every rank awaited gave up (below), each at its own deadline
            text = f"{what}: not complete after {timeout:g} s (PAPCOLL_TIMEOUT)"
        if self.gave_up:
            text += f"; rank(s) {self.gave_up} gave up on this call (an error of their own)"
        super().__init__(text + "; did every rank make the same call, with the same algorithm "
                                "and sizes?")
