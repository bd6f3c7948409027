"""The core's structs as module objects (native/papcoll_pystruct.c): a pointer field holds what
it points into, takes only what its declaration names, and nothing a struct points to goes
before the struct does, whatever order Python drops them in."""
import gc
import weakref

import numpy as np
import pytest
from mpi4py import MPI

from papcoll import _native, native
from papcoll.native import xport


class Owned(np.ndarray):
    """An ndarray that a weak reference can follow."""


def owned(n, dtype=np.uint8):
    return np.zeros(n, dtype).view(Owned)


def test_a_pointer_field_holds_its_memory_until_replaced_or_collected():
    s = _native.Sources(n=4)
    pending = owned(4)
    gone = weakref.ref(pending)
    s.pending = pending
    assert s.pending is pending
    del pending
    gc.collect()
    assert gone() is not None                    # the struct holds it
    s.pending = None
    gc.collect()
    assert gone() is None and s.pending is None
    again = owned(4)
    gone = weakref.ref(again)
    s.pending = again
    del again, s
    gc.collect()
    assert gone() is None                        # collected with its struct


def test_fields_take_only_what_their_declaration_names():
    s = _native.Sources()
    with pytest.raises(TypeError, match="pending"):
        s.pending = 12345                        # an address is never taken
    with pytest.raises(ValueError, match="read-only"):
        s.pending = _readonly(4)
    with pytest.raises(IndexError, match="outside"):
        s.pending = (np.zeros(4, np.uint8), 4)
    h = _native.Hier()
    with pytest.raises(TypeError, match="local"):
        h.local = s                              # a Sources is not a Step
    with pytest.raises(AttributeError, match="not set from Python"):
        h.sched.done = 1                         # the schedule's state is C's
    with pytest.raises(TypeError, match="by keyword"):
        _native.Sources(4)
    p = _native.Plan()
    with pytest.raises(TypeError):
        p.comm = MPI.COMM_WORLD.handle           # MPI objects come as mpi4py's
    p.comm = MPI.COMM_WORLD
    with pytest.raises(ValueError, match="finite"):
        p.timeout = float("inf")                 # every wait is bounded
    p.timeout = 1.5
    assert p.timeout == 1.5
    with pytest.raises(OverflowError, match="scheme"):
        _native.XCall(scheme=1 << 40)


def _readonly(n):
    a = np.zeros(n, np.uint8)
    a.flags.writeable = False
    return a


def test_a_view_of_an_embedded_struct_keeps_its_owner():
    step = _native.Step()
    first = owned(4, np.uintp)
    gone = weakref.ref(first)
    step.list.first = first                      # held by the step, through a view
    sources = step.sources
    flags = native.Flags(np.zeros(3, np.uint64))
    sources.flags, sources.n = flags, 3
    del step, first
    gc.collect()
    assert gone() is not None and sources.flags is flags and sources.n == 3
    del sources
    gc.collect()
    assert gone() is None


def test_structs_that_point_at_each_other_are_collected():
    h, c = _native.Hier(), _native.XCall()
    h.masters = c
    events = owned(8, np.int64)
    gone = weakref.ref(events)
    c.events, h.sched.events = events, events
    plan = _native.Plan(rounds=[h, h, None, h])
    assert plan.rounds == (h, h, None, h) and h.masters is c
    del events, h, c, plan
    gc.collect()
    assert gone() is None


def test_plans_are_entered_only_as_plans():
    with pytest.raises(TypeError, match="Plan"):
        _native.alltoall(id(object()), np.zeros(8), np.zeros(8))   # an int is no plan
    assert _native.alltoall(None, np.zeros(8), np.zeros(8)) == 0    # none: declined


def test_an_advert_record_round_trips():
    record = _native.advert_record(0x1000, 64, 7, 3, 0xABC)
    assert len(record) == xport.ADVERT_BYTES
    assert _native.advert_fields(record) == (0x1000, 64, 7, 3, 0xABC)
