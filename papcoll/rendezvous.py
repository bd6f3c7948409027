"""Bounded collectives for set-up and close, and who is to blame when a wait ends: every
collective papcoll makes ends within PAPCOLL_TIMEOUT, or raises an error that names the ranks.

**Meetings.** MPI's collectives wait forever for a rank that never comes, and creating a
communicator or a window has no nonblocking form. So papcoll first meets the processes
concerned point to point on its private communicator (:func:`exchange`), polling under the one
deadline, in two rounds: each sends every other its value, tagged with the name of the step;
once it has all of theirs, each confirms to every other, and the meeting ends when all have
confirmed. A process that has not come by the deadline is named in a
:class:`PapcollTimeoutError`; one that came to another step (another algorithm's set-up, say)
is named, with both steps, in a :class:`MismatchError`. The second round is what lets a
process that comes after the others gave up stay out of the MPI call that follows: their
values are still in its queue, but no confirmation will come. Only once everyone has confirmed
does papcoll call a blocking MPI constructor or destructor (``Split``, ``Win_allocate``,
``Win_free``): a process confirms only with every value in hand, so once one has every
confirmation, the others' are on their way to everyone. What is left unbounded is a process
dying between its confirmation and the end of that MPI call (docs/failures.md); one stopped
there holds the others inside it until it goes on (:func:`held`).

Messages between a pair on one tag arrive in the order they were sent (MPI's non-overtaking
rule), so consecutive meetings, of all ranks or of a node's, never take each other's messages.

**Giving up.** A process whose call cannot finish (a deadline, a disagreement, Ctrl-C) gives
up on the Communicator for good (:func:`give_up`): one message to every other process, and a
flag on the node board for those of its node (registered with :func:`watch`: visible at once,
whether or not the sender still drives MPI). The message says why, and whom it was waiting
for. At a deadline a process gives up *before* it decides whom to blame (:func:`timed_out`),
then looks for a moment at the ranks it awaited: those also waiting for somebody give up at
their own deadline, about the same time, and are then excused and their own waits followed,
rank to rank, until the ranks that gave no sign are found -- the dead, the stopped, the late.
"""
from contextlib import contextmanager

from .errors import MismatchError, PapcollTimeoutError
from .progress import DONE, IDLE, MORE, Deadline, polled, wait

TAG = 0x5A9C          # on papcoll's private communicator only: never matches the user's messages
GAVE_UP = TAG + 1     # "my Communicator broke": see give_up
CONFIRM = TAG + 2     # a meeting's second round
_abandoned = []       # sends not complete yet: their buffers must stay alive
_peers = {}           # communicator handle -> _Peers


class _Peers:
    """What this process knows of the others on one communicator: whether it is a Context's
    (``watched``: give-ups travel on it), how many calls it has begun on it (``calls``: every
    rank counts the same), who gave up (``gave``: rank -> (why, whom it awaited, in which
    call)), whether it gave up itself (``told``) and what it kept for close (``untold``), the
    ranks on other machines (``far``; None: not known yet), and the node board whose flags
    carry give-ups inside a node (``board``)."""

    def __init__(self, watched=False, counter=None):
        self.watched, self.counter, self.gave, self.told = watched, counter, {}, False
        self.untold, self.far, self.board = None, None, None

    @property
    def calls(self):
        return 0 if self.counter is None else self.counter.calls


def _of(comm):
    return _peers.setdefault(comm.handle, _Peers())


def watch(comm, counter):
    """``comm`` is a new Context's: give-ups travel on it (whatever a freed communicator that
    had the same handle left is forgotten); ``counter.calls`` counts the Context's calls.
    Returns its record."""
    peers = _peers[comm.handle] = _Peers(watched=True, counter=counter)
    return peers


def locate(comm, far, board=None):
    """Where ``comm``'s processes are: ``far``, the ranks on other machines (until this is
    called, every awaited rank counts as far); ``board``, my node's board, with
    ``give_up(call)`` and ``gave_up_in(ranks)``."""
    peers = _of(comm)
    peers.far, peers.board = frozenset(far), board


def forget(comm):
    """``comm`` is about to be freed: drop what was learnt of it."""
    _peers.pop(comm.handle, None)


def exchange(comm, what, value, deadline, members=None, ranks=None, without_gave_up=False):
    """Collective over ``members`` (ranks of ``comm``, all of it by default; they must all make
    the same call): ``{member: its value}`` for every member, this rank's ``value`` included.

    ``what`` names the step; a member at another step raises MismatchError here and there.
    ``ranks`` maps ranks of ``comm`` to the user's ranks, for the errors (default: the same).
    A member that gave up (:func:`give_up`) in this call or before ends the meeting with
    PapcollTimeoutError naming it (one that gave up in a later call had left this meeting
    first) -- or, ``without_gave_up`` (the meetings after the calls: close), any member that
    gave up is left out of the result.
    """
    me = comm.Get_rank()
    others = [q for q in (range(comm.Get_size()) if members is None else members) if q != me]
    user = (lambda q: q) if ranks is None else ranks.__getitem__
    sends = [comm.isend((what, value), dest=q, tag=TAG) for q in others]
    stage = dict.fromkeys(others, TAG)      # the message awaited from each: value, confirmation
    receiving, got, confirmed = {}, {me: value}, False

    now = _of(comm).calls

    def poll():
        nonlocal sends, confirmed
        progressed = False
        for q, tag in list(stage.items()):
            if q not in receiving:
                # Before its messages: they may be stale. But a give-up in a later call than
                # this meeting's (a set-up's) came after it, whose messages q sent first.
                gave = _gave_in(comm, [q])
                if q in gave and (without_gave_up or gave[q] <= now):
                    if not without_gave_up:
                        raise not_coming(comm, what, [q], list(stage), user)
                    del stage[q]
                    got.pop(q, None)
                    progressed = True
                    continue
                message = comm.improbe(source=q, tag=tag)
                if message is None:
                    continue
                receiving[q] = message.irecv()
            done, payload = receiving[q].test()
            if not done:
                continue
            del receiving[q]
            their_what, their_value = payload
            if their_what != what:
                raise MismatchError(
                    f"rank {user(q)} is at {their_what!r} while rank {user(me)} is at "
                    f"{what!r}: every rank must make the same papcoll calls in the same "
                    f"order", [user(q)])
            if tag == TAG:
                got[q], stage[q] = their_value, CONFIRM
            else:
                del stage[q]
            progressed = True
        if not confirmed and TAG not in stage.values():     # every value is here
            sends += [comm.isend((what, None), dest=q, tag=CONFIRM) for q in got if q != me]
            confirmed = progressed = True
        return DONE if not stage else MORE if progressed else IDLE

    try:
        wait(polled(poll), deadline,
             lambda: timed_out(comm, what, sorted(stage), deadline.timeout, user))
    finally:              # the sends complete as their receivers take them, or never
        keep(sends)
    return got


def keep(requests):
    """Keep the buffers of ``requests`` (sends) alive until they complete."""
    _abandoned[:] = [r for r in _abandoned if not r.Test()]
    _abandoned.extend(r for r in requests if not r.Test())


def agree(comm, what, deadline, members=None, ranks=None, without_gave_up=False):
    """Return once every member has reached step ``what`` -- or, ``without_gave_up``, given
    up --: the members that reached it (see :func:`exchange`)."""
    return list(exchange(comm, what, None, deadline, members, ranks, without_gave_up))


@contextmanager
def held(what, deadline):
    """Around the blocking MPI constructors a meeting lets every rank into (all of them, on
    every rank: none may leave between two, or the others would wait in the next for ever).
    MPI's call cannot be left, so a rank stopped or descheduled between the meeting and the
    end of that call holds every other inside it until it goes on, and MPI does not say which
    rank that was. A rank whose deadline has passed by then raises the error of a wait MPI
    cannot attribute (``missing`` None) and gives up by it, as any failed call does; a rank
    whose deadline has not passed meets that give-up at its next step (docs/failures.md)."""
    yield
    if deadline.expired():
        raise PapcollTimeoutError(f"{what} (inside MPI's blocking call: a rank stopped or "
                                  f"late there holds every other)", None, deadline.timeout)


def give_up(comm, error, awaited=None):
    """Tell every other process of ``comm`` that this one gave up on it because of ``error``
    (its type and text) while waiting for ``awaited`` (default: the ranks the error names),
    without waiting for anyone; only the first give-up on a communicator is sent. Awaited
    ranks on other machines hear of it only at close (:func:`tell_missing`): they may be dead,
    and a message to a dead process on another host can crash the MPI library (MPICH does)
    before this process has reported its error."""
    peers = _of(comm)
    if peers.board is not None:
        peers.board.give_up(peers.calls)
    if peers.told:
        return
    peers.told = True
    if awaited is None:
        awaited = [*(getattr(error, "missing", None) or ()), *getattr(error, "gave_up", ()),
                   *getattr(error, "ranks", ())]
    why = (f"{type(error).__name__}: {error}", sorted(set(awaited)), peers.calls)
    me = comm.Get_rank()
    later = [q for q in awaited if peers.far is None or q in peers.far]
    keep([comm.isend(why, dest=q, tag=GAVE_UP)
           for q in range(comm.Get_size()) if q != me and q not in later])
    if later:
        peers.untold = (why, sorted(set(later) - {me}))


def tell_missing(comm):
    """Send the give-up that :func:`give_up` kept from awaited ranks on other machines."""
    peers = _of(comm)
    why, ranks = peers.untold or (None, ())
    peers.untold = None
    keep([comm.isend(why, dest=q, tag=GAVE_UP) for q in ranks])


def gave_up(comm, ranks):
    """Those of ``ranks`` (of ``comm``) that gave up on it: their message is here, or their
    flag is up on the node board (checks without waiting)."""
    return list(_gave_in(comm, ranks))


def left(comm, rank, seconds=1.0):
    """(why, awaited) of ``rank``'s give-up on ``comm`` in this call or before, its message
    awaited for at most ``seconds``; None if it did not give up: a write it refused (verbs: a
    remote access error, its memory released) is the sign of a peer that left, whose give-up
    says why."""
    peers, now = _of(comm), _of(comm).calls

    def heard():
        call = _gave_in(comm, [rank]).get(rank)
        return DONE if call is not None and call <= now else IDLE
    if not wait(polled(heard), Deadline(seconds), None):
        return None
    return peers.gave.get(rank, ("", [rank]))[:2]     # a node board's flag: no reason yet


def _gave_in(comm, ranks):
    """{rank: the call it gave up in} for those of ``ranks`` that gave up."""
    peers = _of(comm)
    for q in ranks:
        if q not in peers.gave and comm.iprobe(source=q, tag=GAVE_UP):
            peers.gave[q] = comm.recv(source=q, tag=GAVE_UP)
    flagged = {} if peers.board is None else peers.board.gave_up_in(ranks)
    return {q: peers.gave[q][2] if q in peers.gave else flagged[q]
            for q in ranks if q in peers.gave or q in flagged}


def timed_out(comm, what, awaited, timeout, user=lambda q: q):
    """The error of a wait for ``awaited`` (ranks of ``comm``) that reached its deadline:
    first give up (on a Context's communicator), then blame (:func:`settle`); ``user`` maps
    ranks to the user's."""
    _announce(comm, PapcollTimeoutError(what, [user(q) for q in awaited], timeout), awaited)
    missing, gave = settle(comm, awaited, timeout)
    return PapcollTimeoutError(what, [user(q) for q in missing], timeout,
                               [user(q) for q in gave])


def _announce(comm, error, awaited):
    """A wait for ``awaited`` ends in ``error``: on a Context's communicator, give up now."""
    if _of(comm).watched:
        give_up(comm, error, awaited)


def settle(comm, awaited, timeout):
    """(missing, gave up) for a wait on ``awaited`` ranks that cannot go on: give those that
    are themselves waiting -- for a process really missing -- a moment to give up too (they
    reach their deadline about when I do): until :func:`blame` finds everyone it follows
    accounted for, or for a tenth of ``timeout`` (at most a second)."""
    found = {}

    def accounted():
        missing, gave = found["missing"], found["gave"] = blame(comm, awaited)
        unheard = [q for q in gave if q not in _of(comm).gave]   # flag up, message not yet
        return IDLE if missing or unheard else DONE
    wait(polled(accounted), Deadline(min(1.0, timeout / 10)), None)
    return found["missing"], found["gave"]


def blame(comm, awaited):
    """(missing, gave up): follow the ``awaited`` ranks that gave up to the ranks *they*
    awaited, and so on; those that gave no sign are missing. A process's own wait is never
    followed back to it."""
    peers, me = _of(comm), comm.Get_rank()
    missing, gave, seen, todo = set(), set(), {me}, list(awaited)
    while todo:
        q = todo.pop()
        if q in seen:
            continue
        seen.add(q)
        if gave_up(comm, [q]):
            gave.add(q)
            todo += peers.gave.get(q, ("", ()))[1]
        else:
            missing.add(q)
    return sorted(missing), sorted(gave)


def elsewhere(comm, ranks, user, doing, arrived):
    """Raise if one of ``ranks`` (of ``comm``), awaited by this rank while ``doing`` a call,
    is not in that call: it gave up on the Communicator in this call or before (see
    :func:`not_coming`; one that gave up in a later call finished this one, and what it sent
    may still be landing), or it sent a meeting message although ``arrived(rank)`` is still
    false -- it is at a set-up step instead (MismatchError naming the step). A process's
    arrival signal is visible before any message it sends later, so a message from a peer
    that has arrived belongs to its next step and is left alone. ``arrived`` must be true for
    a rank whose arrival this one cannot see directly: nothing then orders its messages. ``user`` maps ranks to the
    user's. Meant for the idle moments of a wait: it receives what it finds, since it raises
    then."""
    now = _of(comm).calls
    gave = [q for q, call in _gave_in(comm, ranks).items() if call <= now]
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
    flags, raised before the give-up message arrives: the message is waited for a moment (at
    most a second), for its reason."""
    peers = _of(comm)

    def heard():
        gave_up(comm, gave)                       # receives the messages that came
        return DONE if all(q in peers.gave for q in gave) else IDLE
    wait(polled(heard), Deadline(1.0), None)
    for q in sorted(set(gave) | set(gave_up(comm, awaited))):
        why = peers.gave.get(q, ("",))[0]
        if why.startswith("MismatchError"):
            error = MismatchError(f"rank {user(q)} gave up on {doing}: {why}", [user(q)])
            _announce(comm, error, awaited)
            return error
    _announce(comm, PapcollTimeoutError(doing, [user(q) for q in awaited], None), awaited)
    missing, gave = blame(comm, awaited)
    return PapcollTimeoutError(doing, [user(q) for q in missing], None, [user(q) for q in gave])


def dup(comm, timeout):
    """``comm.Dup()``, bounded: MPI_Comm_idup under the deadline. A rank missing from it cannot
    be named (MPI does not say), so the error says so."""
    new, request = comm.Idup()

    def not_done():
        keep([request])
        return PapcollTimeoutError("papcoll.Communicator: duplicating the communicator "
                                   "(MPI_Comm_idup)", None, timeout)
    wait(polled(lambda: DONE if request.Test() else IDLE), Deadline(timeout), not_done)
    return new
