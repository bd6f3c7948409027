"""Exceptions raised by papcoll. Every message names the value that is wrong."""


class PapcollError(Exception):
    """Base class of every papcoll error."""


class BufferSpecError(PapcollError, ValueError):
    """A send or receive buffer spec that papcoll cannot use as given."""


class AlgorithmError(PapcollError, ValueError):
    """An unknown algorithm name, or one that cannot run on this communicator."""


class TransportError(PapcollError, OSError):
    """A transport (verbs, MPI RMA, shared memory, CMA) failed or is unavailable."""


class CommunicatorStateError(PapcollError, RuntimeError):
    """The Communicator is closed, or broken by an earlier timeout."""


class PapcollTimeoutError(PapcollError, TimeoutError):
    """Peers did not arrive (or their data did not land) before the deadline.

    ``missing`` holds the ranks (in the user's communicator) that were waited for.
    """

    def __init__(self, what, missing, timeout):
        self.missing = sorted(missing)
        self.timeout = timeout
        super().__init__(
            f"{what}: no sign of rank(s) {self.missing} after {timeout:g} s "
            f"(PAPCOLL_TIMEOUT); did they call Alltoall on this communicator?")
