"""A Communicator's call objects: the plans its calls left, several shapes per call site.

A call site is a kind of call (``"a"``: Alltoall, ``"v"``: Alltoallv, ``"w"``: Alltoallw)
with the ``algorithm=`` value as given (None and ``"auto"`` included). After the full path
has checked a call, chosen its algorithm and run it, that algorithm may leave a Plan
(native/plan.py) bound to the call's shape: buffer lengths and formats, counts,
displacements, the datatype objects named, IN_PLACE. The plan records the algorithm the
policy resolved (the policy's answer for a shape is fixed while a Communicator lives: it
reads the size, the topology and the settings agreed at set-up). Whether a call matches a
plan is decided in one place, the plan's own check in C (native/papcoll_call.c,
papcoll_callv.c); a call tries its site's plans in one entry into C (the Context's Entry,
native/papcoll_entry.c, which also takes the Communicator's lock and counts the call) and
takes the full path only when none has its shape. A request finds its plan the same way
(:meth:`CallCache.find`, by the plan's own check) and starts by it (requests.py).

Real programs alternate shapes: an FFT's forward and backward transposes, two per direction
in a pencil decomposition, a multigrid's levels, a sort's counts then its data. So a site keeps
every shape it has seen, up to CAPACITY plans per Communicator in all, and evicts the least
recently used one beyond that (disarmed: the C state it points into stays with the
algorithm); a plan a request holds is pinned, never evicted meanwhile nor counted. 16 holds
a pencil FFT's four transposes per sub-communicator with room for a multigrid's levels, while
a miss still tries few plans (each decline is a few comparisons) and the plans' spare copies
(in-place engine calls) stay bounded.
"""
from collections import OrderedDict

from . import datatypes

CAPACITY = 16


class CallCache:
    """The plans of a Context's call sites, published in its Entry (``entry.sites``: site ->
    (plan addresses, Plans, the names their calls are said to be served by, each plan's last
    use by the Entry's clock)), which serves calls by them (native/papcoll_entry.c)."""

    def __init__(self, entry):
        self.entry = entry
        self.count = 0            # plans published, pinned ones included
        self.layouts = Layouts(2 * CAPACITY)
        self._freed = False       # a datatype was freed: plans may name its object
        datatypes.watch(self)

    @property
    def hits(self):
        return self.entry.hits

    @property
    def misses(self):
        return self.entry.misses

    def ready(self, ctx):
        """A call of ``ctx`` takes Python's path (its lock held, no request in its way):
        plans that may name a freed datatype go, and the Entry serves calls again unless
        ``ctx``'s state says otherwise. ``stale`` is cleared before the checks, so that a
        change after them (a finalizer, another thread) sets it again."""
        self.entry.stale = False
        if self._freed:
            self._freed = False
            self.drop()
        if ctx.active is not None or ctx.dropped or ctx.closed or ctx.broken is not None:
            self.entry.stale = True

    def keep(self, site, plan, chosen=None):
        """``plan``, bound to the shape of a call of ``site`` the full path just checked (a
        request's, pinned first); ``chosen``: the algorithm its calls are said to be served by
        (``Communicator.chosen``), if not the plan's own (a 1-process communicator's calls are
        all MPI's copy, whatever they resolved to: api.py)."""
        plan.chosen = chosen or plan.algorithm.name
        _, plans, _, used = self.entry.sites.get(site, ((), (), (), []))
        self.entry.tick += 1
        self._publish(site, plans + (plan,), used + [self.entry.tick])
        self._bound()

    def find(self, site, sendbuf, recvbuf, serves):
        """A request's plan: the first of ``site``'s, then of its requests' own site
        (:func:`requests_site`), that takes this call and whose calls are said to be served
        by an algorithm ``name`` that ``serves(name)`` (serves requests of this kind), its use
        counted as a hit; or None, a miss. A blocking call's plan serves a request only where
        both resolve to the same algorithm: one that serves both (policy.resolve)."""
        for key in (site, requests_site(site)):
            _, plans, chosen, used = self.entry.sites.get(key, ((), (), (), ()))
            for i, plan in enumerate(plans):
                if serves(chosen[i]) and plan.probe(sendbuf, recvbuf):
                    self.entry.tick += 1
                    used[i] = self.entry.tick
                    self.entry.hits += 1
                    return plan
        self.entry.misses += 1
        return None

    def pin(self, plan):
        """A request holds ``plan`` (while it is active, or for a persistent one until it is
        freed): never evicted meanwhile, nor counted against CAPACITY."""
        plan.pins += 1

    def unpin(self, plan):
        plan.pins -= 1
        self._bound()

    def _bound(self):
        """Evict the least recently used unpinned plans beyond CAPACITY (at once where all
        the plans fit: a request's unpin is on its every completion)."""
        while self.count > CAPACITY:
            free = [last for _, plans, _, used in self.entry.sites.values()
                    for plan, last in zip(plans, used) if not plan.pins]
            if len(free) <= CAPACITY:
                return
            oldest = min(free)
            self._remove(lambda plan, last: last == oldest)

    def datatype_freed(self):
        """A datatype was freed (datatypes.py; any thread, inside MPI_Type_free): the plans go
        at the next call, which takes Python's path, under the Communicator's lock."""
        self._freed = self.entry.stale = True

    def drop(self, algorithm=None):
        """Disarm and forget the plans ``algorithm`` (an Algorithm object; None: every one)
        left: its state is going, or changed under them."""
        self._remove(lambda plan, last: algorithm is None or plan.algorithm is algorithm)

    def _remove(self, which):
        for site, (_, plans, _, used) in list(self.entry.sites.items()):
            kept = []
            for plan, last in zip(plans, used):
                if which(plan, last):
                    plan.disarm()
                else:
                    kept.append((plan, last))
            if len(kept) < len(plans):
                self._publish(site, tuple(plan for plan, _ in kept), [last for _, last in kept])

    def _publish(self, site, plans, used):
        self.count += len(plans) - len(self.entry.sites.get(site, ((), ()))[1])
        if plans:
            self.entry.sites[site] = (tuple(plan.s for plan in plans), plans,
                                      tuple(plan.chosen for plan in plans), used)
        else:
            self.entry.sites.pop(site, None)

    def plans(self, site):
        """The plans of ``site``, oldest first."""
        return list(self.entry.sites.get(site, ((), ()))[1])

    def __len__(self):
        return self.count


def requests_site(site):
    """Where a request's plan goes when blocking calls of its shape resolve to another
    algorithm (the policy's choice serves no requests): out of the Entry's sight."""
    return ("i" + site[0], site[1])


class Layouts:
    """What the full path's checks found for Alltoallv/w sides (vbuffers.py), by what decides
    it, least recently used evicted beyond ``capacity``: two sides a call, and calls a plan
    does not take (staged sides, Alltoallw across nodes) keep theirs too."""

    def __init__(self, capacity):
        self.capacity, self._verdicts = capacity, OrderedDict()

    def get(self, key):
        verdict = self._verdicts.get(key)
        if verdict is not None:
            self._verdicts.move_to_end(key)
        return verdict

    def put(self, key, verdict):
        self._verdicts[key] = verdict
        if len(self._verdicts) > self.capacity:
            self._verdicts.popitem(last=False)
