"""The algorithm registry: ``{name: class}``, each class carrying a one-line description and the
signature codes of its schemes (signature.py): what its arrival signals say it is, so that a
rank can tell that a peer's call is not its own."""
from .. import signature
from ..errors import AlgorithmError, MismatchError

REGISTRY = {}
AUTO = "auto"      # not an algorithm: the name of the selection policy's choice (policy.py)
_SCHEMES = {0: ("a CMA primitive", "")}     # signature code -> (algorithm, scheme); 0: node/cma.py


class Algorithm:
    """One alltoall algorithm, bound to one Communicator.

    A Communicator builds an algorithm the first time it is chosen, in a call that every rank
    makes (construction may be collective, and is bounded), and closes it with the
    Communicator. ``unsupported(ctx)`` returns why it cannot run there, or None; it is asked
    on every call the policy considers, so it must be cheap and never collective.
    ``schemes`` names the ways one instance may move a call; each gets a signature code.
    """
    name = "?"
    description = "?"
    schemes = ("",)
    codes = {}
    variable = False          # serves Alltoallv and Alltoallw (alltoallv)
    nonblocking = False       # serves calls that run on after they return (start, startv)

    def __init__(self, ctx):
        self.ctx = ctx

    @classmethod
    def unsupported(cls, ctx):
        return None

    def alltoall(self, send, recv):
        """Exchange blocks: ``send`` and ``recv`` are parsed Messages; ``send`` is None for
        IN_PLACE. Blocks may be empty: every rank still takes part (a call of 0 bytes on one
        rank against 16 on another must be seen)."""
        raise NotImplementedError

    def alltoallv(self, send, recv, specs):
        """An Alltoallv or Alltoallw (``variable`` algorithms): ``send`` and ``recv`` are
        vbuffers.Blocks, checked, my own block already in place; ``specs``: (w, sendbuf,
        recvbuf) as the user passed them."""
        raise NotImplementedError

    def start(self, send, recv, persistent=None):
        """``nonblocking`` algorithms: start the call ``alltoall`` would make; return an
        object whose ``test()`` moves it on and says whether it is complete, and whose
        ``wait()`` completes it (both raise its error). ``persistent``: a start of that
        persistent request (calls.Persistent), whose set-up may be kept between starts."""
        raise NotImplementedError

    def startv(self, send, recv, specs, persistent=None):
        """The same for ``alltoallv``."""
        raise NotImplementedError

    def plan(self, sendbuf, recvbuf, recv):
        """After a call with these buffers (as the user passed them; ``recv`` parsed) ran
        here: a new Plan (native/plan.py) bound to its shape, for the next calls of that shape
        -- its run returns 1 when it did one, 0 to decline, rc < 0 when ``plan_failed(plan,
        rc)`` must finish the call or raise its error -- or None (the default: every call
        takes the full path). The Communicator's CallCache keeps it; :meth:`drop_plans`
        disarms it."""

    def planv(self, sendbuf, recvbuf, send, recv):
        """The same for an Alltoallv or Alltoallw (``send``, ``recv``: its vbuffers.Blocks):
        a new bound plan (Plan.alltoallv), or None (the default)."""

    def persistent_plan(self, sendbuf, recvbuf, send, recv, kept):
        """A persistent Alltoall request's own plan for its starts, on these buffers (parsed:
        ``send``, ``recv``; ``kept``: its calls.Persistent, which frees the plan), for shapes
        that leave no plan (:meth:`plan`); or None (the default: the full path)."""

    def plan_failed(self, plan, rc):
        raise NotImplementedError

    def started(self, plan, rc, sendbuf, recvbuf, kept=None):
        """``nonblocking`` algorithms that leave plans: what a request's start by ``plan``
        (``Plan.start``, which returned ``rc``) is, as :meth:`start` returns it; ``kept``, a
        persistent request's Persistent."""
        raise NotImplementedError

    def drop_plans(self):
        """Disarm every plan this algorithm left: their calls take the full path again."""
        self.ctx.cache.drop(self)

    def signature(self, block, scheme=""):
        """The signature of my call with ``block`` bytes per peer."""
        return signature.make(self.codes[scheme], block)

    def mismatch(self, rank, theirs, mine):
        """The MismatchError for user rank ``rank``, whose call's signature ``theirs`` differs
        from ``mine``."""
        me = self.ctx.rank
        return MismatchError(
            f"calls disagree: rank {rank} called {describe(theirs)}, rank {me} called "
            f"{describe(mine)}; every rank must pass the same block size and choose the same "
            f"algorithm", [rank])

    def close(self, collective=True):
        """Free what the algorithm set up, its plans first; safe to call twice. ``collective``:
        every rank is closing too (the Communicator met them first), so collective frees may
        run; otherwise release only what is local."""
        self.drop_plans()


def register(name, description):
    """Class decorator adding an Algorithm to the registry under ``name``."""
    def add(cls):
        if name in REGISTRY:
            raise ValueError(f"algorithm {name!r} is registered twice")
        cls.name, cls.description = name, description
        cls.codes = {}
        for scheme in cls.schemes:
            code = len(_SCHEMES)
            if code > 255:
                raise ValueError(f"no signature code left for algorithm {name!r}")
            cls.codes[scheme] = code
            _SCHEMES[code] = (name, scheme)
        REGISTRY[name] = cls
        return cls
    return add


def lookup(name):
    try:
        return REGISTRY[name]
    except KeyError:
        raise AlgorithmError(f"unknown algorithm {name!r}; registered: "
                             f"{', '.join(sorted(REGISTRY))} (or {AUTO!r}: the policy's choice)"
                             ) from None


def check(name):
    """A name an algorithm may be chosen by: a registered one, or AUTO."""
    if name != AUTO:
        lookup(name)
    return name


def describe(sig):
    """A signature in words: 'shm_pap with 16 bytes per peer'."""
    code = signature.code_of(sig)
    name, scheme = _SCHEMES.get(code, (f"an algorithm of unknown code {code}", ""))
    how = f" ({scheme})" if scheme else ""
    return f"{name}{how} with {signature.block_of(sig)} bytes per peer"
