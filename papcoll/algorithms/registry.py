"""The algorithm registry: ``{name: class}``, each class carrying a one-line description."""
from ..errors import AlgorithmError

REGISTRY = {}


class Algorithm:
    """One alltoall algorithm, bound to one Communicator.

    A Communicator builds an algorithm the first time it is chosen, in a call that every rank
    makes (construction may be collective), and closes it with the Communicator.
    ``unsupported(ctx)`` returns why it cannot run there, or None.
    """
    name = "?"
    description = "?"

    def __init__(self, ctx):
        self.ctx = ctx

    @classmethod
    def unsupported(cls, ctx):
        return None

    def alltoall(self, send, recv):
        """Exchange blocks: ``send`` and ``recv`` are parsed Messages; ``send`` is None for IN_PLACE."""
        raise NotImplementedError

    def lane(self, key, sendbuf, recvbuf, recv):
        """After a call with these buffers (as the user passed them; ``recv`` parsed) and
        ``algorithm=key`` ran here: a callable ``fast(sendbuf, recvbuf)`` that may run the
        next such calls of the same shape -- returning 1 when it did, 0 to decline, < 0 when
        ``lane_failed()`` names the error -- or None (the default: every call takes the full
        path)."""

    def close(self):
        """Free what the algorithm set up; collective; safe to call twice."""


def register(name, description):
    """Class decorator adding an Algorithm to the registry under ``name``."""
    def add(cls):
        if name in REGISTRY:
            raise ValueError(f"algorithm {name!r} is registered twice")
        cls.name, cls.description = name, description
        REGISTRY[name] = cls
        return cls
    return add


def lookup(name):
    try:
        return REGISTRY[name]
    except KeyError:
        raise AlgorithmError(
            f"unknown algorithm {name!r}; registered: {', '.join(sorted(REGISTRY))}") from None
