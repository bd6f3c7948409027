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
takes the full path only when none has its shape.

Real programs alternate shapes: an FFT's forward and backward transposes, two per direction
in a pencil decomposition, a multigrid's levels, a sort's counts then its data. So a site keeps
every shape it has seen, up to CAPACITY plans per Communicator in all, and evicts the least
recently used one beyond that (disarmed: the C state it points into stays with the
algorithm). 16 holds a pencil FFT's four transposes per sub-communicator with room for a
multigrid's levels, while a miss still tries few plans (each decline is a few comparisons)
and the plans' spare copies (in-place engine calls) stay bounded.
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
        """``plan``, bound to the shape of a call of ``site`` the full path just checked;
        ``chosen``: the algorithm its calls are said to be served by (``Communicator.chosen``),
        if not the plan's own (a 1-process communicator's calls are all MPI's copy, whatever
        they resolved to: api.py)."""
        plan.chosen = chosen or plan.algorithm.name
        _, plans, _, used = self.entry.sites.get(site, ((), (), (), []))
        self.entry.tick += 1
        self._publish(site, plans + (plan,), used + [self.entry.tick])
        if len(self) > CAPACITY:
            oldest = min(min(used) for _, _, _, used in self.entry.sites.values())
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
            self._publish(site, tuple(plan for plan, _ in kept), [last for _, last in kept])

    def _publish(self, site, plans, used):
        if plans:
            self.entry.sites[site] = (tuple(plan.address for plan in plans), plans,
                                      tuple(plan.chosen for plan in plans), used)
        else:
            self.entry.sites.pop(site, None)

    def plans(self, site):
        """The plans of ``site``, oldest first."""
        return list(self.entry.sites.get(site, ((), ()))[1])

    def __len__(self):
        return sum(len(plans) for _, plans, _, _ in self.entry.sites.values())


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
