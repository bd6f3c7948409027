"""A Communicator's call objects: the plans its calls left, several shapes per call site.

A call site is a kind of call (``"a"``: Alltoall, ``"v"``: Alltoallv, ``"w"``: Alltoallw)
with the ``algorithm=`` value as given (None and ``"auto"`` included). After the full path
has checked a call, chosen its algorithm and run it, that algorithm may leave a Plan
(native/plan.py) bound to the call's shape: buffer lengths and formats, counts,
displacements, the datatype objects named, IN_PLACE. The plan records the algorithm the
policy resolved (the policy's answer for a shape is fixed while a Communicator lives: it
reads the size, the topology and the settings agreed at set-up). Whether a call matches a
plan is decided in one place, the plan's own check in C (native/papcoll_call.c,
papcoll_callv.c); a call tries its site's plans in one entry into C (``_native.first``) and
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

from . import _native, datatypes

CAPACITY = 16


class CallCache:
    def __init__(self):
        self._sites = {}          # site -> its plans, in the order they were made
        self._tries = {}          # site -> their addresses: _native.first's argument
        self._tick = 0
        self.hits = self.misses = 0
        self.layouts = Layouts(2 * CAPACITY)
        self._freed = False       # a datatype was freed: plans may name its object
        datatypes.watch(self)

    def serve(self, ctx, site, sendbuf, recvbuf):
        """Whether a plan of ``site`` ran this call of ``ctx`` (the Context, its lock held):
        the one entry into C, which declines, untouched, a call of a shape no plan of the
        site has; a call a plan left (rc < 0) is finished by its algorithm's ``plan_failed``.
        An error breaks ``ctx`` (e.g. Ctrl-C between two waits: peers mid-call). A hit is
        the path of every repeated call, so it is one function."""
        if self._freed:
            self._freed = False
            self.drop()
        tries = self._tries.get(site)
        if tries is None:
            self.misses += 1
            return False
        try:
            i, rc = _native.first(tries, sendbuf, recvbuf)
            if i < 0:
                self.misses += 1
                return False
            plan = self._sites[site][i]
            self._tick += 1
            plan.used = self._tick
            self.hits += 1
            ctx.chosen = plan.chosen
            if rc < 0:
                plan.algorithm.plan_failed(plan, rc)   # finishes the call, or raises
        except BaseException as err:
            ctx.fail(err)
            raise
        return True

    def keep(self, site, plan, chosen=None):
        """``plan``, bound to the shape of a call of ``site`` the full path just checked;
        ``chosen``: the algorithm its calls are said to be served by (``Communicator.chosen``),
        if not the plan's own (a 1-process communicator's calls are all MPI's copy, whatever
        they resolved to: api.py)."""
        plan.chosen = chosen or plan.algorithm.name
        self._tick += 1
        plan.used = self._tick
        self._sites.setdefault(site, []).append(plan)
        self._tries[site] = tuple(p.address for p in self._sites[site])
        if sum(map(len, self._sites.values())) > CAPACITY:
            oldest = min((p.used, key) for key, plans in self._sites.items() for p in plans)
            self._remove(lambda p: p.used == oldest[0])

    def datatype_freed(self):
        """A datatype was freed (datatypes.py; any thread, inside MPI_Type_free): the plans go
        at the next call, under the Communicator's lock."""
        self._freed = True

    def drop(self, algorithm=None):
        """Disarm and forget the plans ``algorithm`` (an Algorithm object; None: every one)
        left: its state is going, or changed under them."""
        self._remove(lambda p: algorithm is None or p.algorithm is algorithm)

    def _remove(self, which):
        for site, plans in list(self._sites.items()):
            kept = []
            for plan in plans:
                if which(plan):
                    plan.disarm()
                else:
                    kept.append(plan)
            if kept:
                self._sites[site] = kept
                self._tries[site] = tuple(p.address for p in kept)
            else:
                del self._sites[site], self._tries[site]

    def plans(self, site):
        """The plans of ``site``, oldest first."""
        return list(self._sites.get(site, ()))

    def __len__(self):
        return sum(map(len, self._sites.values()))


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
