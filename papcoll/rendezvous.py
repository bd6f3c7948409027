"""Bounded collectives for set-up and close: every collective papcoll makes ends within
PAPCOLL_TIMEOUT, or raises an error that names the ranks.

MPI's collectives wait forever for a rank that never comes, and creating a communicator or a
window has no nonblocking form. So papcoll first meets the processes concerned point to point
on its private communicator: :func:`exchange` sends each of them this rank's value, tagged with
the name of the step, and receives theirs, polling under the one deadline. A process that has
not arrived by the deadline is named in a :class:`PapcollTimeoutError`; one that arrived at
another step (another algorithm's set-up, say) is named, with both steps, in a
:class:`MismatchError`. Only once everyone is known to be there does papcoll call a blocking MPI
constructor or destructor (``Split``, ``Win_allocate``, ``Win_free``): the one interval nothing
can bound is a process dying between the meeting and that call (README: "What cannot be
bounded").

Messages between a pair arrive in the order they were sent (MPI's non-overtaking rule), so
consecutive meetings, of all ranks or of a node's, never take each other's messages.

A process whose Communicator broke (an error left a call unfinished) says so to every other
one with :func:`give_up`, a message of its own tag sent without waiting. Meetings and timeout
errors then know it: a meeting that tolerates it ("close") goes on without that process, any
other ends at once, and a timeout names it as having given up rather than as missing.
"""
import time

from .errors import MismatchError, PapcollTimeoutError
from .progress import Backoff, Deadline

TAG = 0x5A9C        # on papcoll's private communicator only: never matches the user's messages
GAVE_UP = TAG + 1   # "my Communicator broke": see give_up
_abandoned = []     # sends still in flight when a meeting failed: their buffers must stay alive
_gave_up = {}       # communicator handle -> {rank: (why, ranks it missed)}, as messages came
_untold = {}        # communicator handle -> (why, ranks): a give-up not yet sent to those ranks


def exchange(comm, what, value, deadline, members=None, ranks=None, without_gave_up=False):
    """Collective over ``members`` (ranks of ``comm``, all of it by default; they must all make
    the same call): ``{member: its value}`` for every member, this rank's ``value`` included.

    ``what`` names the step; a member at another step raises MismatchError here and there.
    ``ranks`` maps ranks of ``comm`` to the user's ranks, for the errors (default: the same).
    A member that gave up (:func:`give_up`) ends the meeting with PapcollTimeoutError naming
    it -- or, ``without_gave_up``, is left out of the result.
    """
    me = comm.Get_rank()
    others = [q for q in (range(comm.Get_size()) if members is None else members) if q != me]
    user = (lambda q: q) if ranks is None else ranks.__getitem__
    sends = {q: comm.isend((what, value), dest=q, tag=TAG) for q in others}
    unprobed, receiving, got = list(others), {}, {me: value}
    backoff = Backoff()
    try:
        while unprobed or receiving or sends:
            progressed = False
            for q in list(unprobed):
                if gave_up(comm, [q]):            # before its messages: they may be stale
                    if not without_gave_up:
                        raise not_coming(comm, what, [q], unprobed + list(receiving), user)
                else:
                    message = comm.improbe(source=q, tag=TAG)
                    if message is None:
                        continue
                    receiving[q] = message.irecv()
                unprobed.remove(q)
                progressed = True
            for q, request in list(receiving.items()):
                done, payload = request.test()
                if done:
                    del receiving[q]
                    their_what, got[q] = payload
                    if their_what != what:
                        raise MismatchError(
                            f"rank {user(q)} is at {their_what!r} while rank {user(me)} is at "
                            f"{what!r}: every rank must make the same papcoll calls in the same "
                            f"order", [user(q)])
                    progressed = True
            for q, request in list(sends.items()):
                done = request.Test()
                if done or (without_gave_up and gave_up(comm, [q])):
                    if not done:                  # never to be received: keep its buffer
                        _abandoned.append(request)
                    del sends[q]
                    progressed = True
            if progressed:
                backoff.reset()
            elif deadline.expired():
                late = sorted(set(unprobed) | set(receiving)) or sorted(sends)
                raise PapcollTimeoutError(what, [user(q) for q in late], deadline.timeout,
                                          [user(q) for q in gave_up(comm, late)])
            else:
                backoff.pause()
    except BaseException:
        _abandoned.extend(sends.values())
        raise
    return got


def give_up(comm, error, far=()):
    """Tell every other process of ``comm`` that this one gave up on it because of ``error``
    (its type and text, and the ranks it found missing, if any), without waiting for anyone.
    Missing ranks among ``far`` (those on other machines) hear of it only at close
    (:func:`tell_missing`): they may be dead, and a message to a dead process on another host
    can crash the MPI library (MPICH does) before this process has reported its error."""
    me = comm.Get_rank()
    missing = list(getattr(error, "missing", None) or ())
    why = (f"{type(error).__name__}: {error}", missing)
    later = [q for q in missing if q in far]
    _abandoned.extend(comm.isend(why, dest=q, tag=GAVE_UP)
                      for q in range(comm.Get_size()) if q != me and q not in later)
    if later:
        _untold[comm.handle] = (why, later)


def tell_missing(comm):
    """Send the give-up that :func:`give_up` kept from the ranks it found missing."""
    why, ranks = _untold.pop(comm.handle, (None, ()))
    _abandoned.extend(comm.isend(why, dest=q, tag=GAVE_UP) for q in ranks)


def elsewhere(comm, ranks, user, doing, arrived):
    """Raise if one of ``ranks`` (of ``comm``), awaited by this rank while ``doing`` a call,
    is not in that call: it gave up on the Communicator (see :func:`not_coming`), or it sent a
    meeting message although ``arrived(rank)`` is still false -- it is at a set-up step
    instead (MismatchError naming the step). A process's arrival signal is visible before any
    message it sends later, so a message from a peer that has arrived belongs to its next step
    and is left alone. ``user`` maps ranks to the user's. Meant for the idle moments of a wait:
    it receives what it finds, since it raises then."""
    gave = gave_up(comm, ranks)
    if gave:
        raise not_coming(comm, doing, gave, ranks, user)
    for q in ranks:
        if comm.iprobe(source=q, tag=TAG) and not arrived(q):
            their_what, _ = comm.recv(source=q, tag=TAG)
            raise MismatchError(f"calls disagree: rank {user(q)} is at {their_what!r} while rank "
                                f"{user(comm.Get_rank())} is in {doing}; every rank must make "
                                f"the same papcoll calls in the same order", [user(q)])


def not_coming(comm, doing, gave, awaited, user):
    """The error for a wait on ``awaited`` ranks of which ``gave`` gave up: MismatchError if a
    disagreement made one of them give up (it names both calls), else PapcollTimeoutError
    naming those that gave up and those still missing. ``gave`` may come from a node's shared
    flags, raised after the give-up message was sent but visible before it arrives: the
    message is waited for a moment (at most a second), for its reason."""
    end = time.monotonic() + 1.0
    while len(gave_up(comm, gave)) < len(gave) and time.monotonic() < end:
        time.sleep(1e-3)
    whys = _gave_up[comm.handle]
    for q in gave:
        why = whys.get(q, ("",))[0]
        if why.startswith("MismatchError"):
            return MismatchError(f"rank {user(q)} gave up on {doing}: {why}", [user(q)])
    missing, gave = blame(comm, [user(q) for q in awaited])
    return PapcollTimeoutError(doing, missing, None, gave)


def last_look(comm, ranks, timeout):
    """At the deadline of a wait on processes of other nodes: give those of ``ranks`` that are
    themselves waiting, for a process of their own node that is really missing, a moment to
    say so (they reach their deadline at about the same time). Returns as soon as all have
    given up, or after a tenth of ``timeout`` (at most a second)."""
    end = time.monotonic() + min(1.0, timeout / 10)
    while len(gave_up(comm, ranks)) < len(ranks) and time.monotonic() < end:
        time.sleep(1e-3)


def blame(comm, ranks):
    """(missing, gave up) among the awaited ``ranks`` (of ``comm``; the user's): those that
    gave up are not to blame, but whom they found missing is -- a master that gave up for want
    of one of its node's processes points at that process."""
    gave = set(gave_up(comm, ranks))
    missing = [q for q in ranks if q not in gave]
    for q in sorted(gave):
        missing += [r for r in _gave_up[comm.handle][q][1]
                    if r not in missing and r not in gave and r != comm.Get_rank()]
    return sorted(missing), sorted(gave)


def forget(comm):
    """``comm`` is about to be freed: drop what was learnt of it."""
    _gave_up.pop(comm.handle, None)
    _untold.pop(comm.handle, None)


def gave_up(comm, ranks):
    """Those of ``ranks`` (of ``comm``) that said they gave up on it (checks for their
    messages without waiting)."""
    seen = _gave_up.setdefault(comm.handle, {})
    for q in ranks:
        if q not in seen and comm.iprobe(source=q, tag=GAVE_UP):
            seen[q] = comm.recv(source=q, tag=GAVE_UP)
    return [q for q in ranks if q in seen]


def agree(comm, what, deadline, members=None, ranks=None, without_gave_up=False):
    """Return once every member has reached step ``what`` -- or, ``without_gave_up``, given
    up --: the members that reached it (see :func:`exchange`)."""
    return list(exchange(comm, what, None, deadline, members, ranks, without_gave_up))


def dup(comm, timeout):
    """``comm.Dup()``, bounded: MPI_Comm_idup under the deadline. A rank missing from it cannot
    be named (MPI does not say), so the error says so."""
    new, request = comm.Idup()
    deadline, backoff = Deadline(timeout), Backoff()
    while not request.Test():
        if deadline.expired():
            _abandoned.append(request)
            raise PapcollTimeoutError("papcoll.Communicator: duplicating the communicator "
                                      "(MPI_Comm_idup)", None, timeout)
        backoff.pause()
    return new
