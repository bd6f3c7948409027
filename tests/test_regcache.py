"""The registration cache stays correct when buffers die and addresses are reused."""
import gc
import sys
import weakref

import numpy as np

from papcoll.transport.regcache import RegistrationCache, owner


class Recorder:
    def __init__(self):
        self.live, self.made = set(), 0

    def register(self, array):
        self.made += 1
        key = (array.ctypes.data, array.nbytes, self.made)
        self.live.add(key)
        return key

    def deregister(self, key):
        self.live.remove(key)


def make():
    rec = Recorder()
    return rec, RegistrationCache(rec.register, rec.deregister, capacity=4)


def test_hit_for_the_same_live_buffer():
    rec, cache = make()
    a = np.zeros(100, np.uint8)
    assert cache.get(a) == cache.get(a) and rec.made == 1
    assert cache.get(np.frombuffer(memoryview(a), np.uint8)) == cache.get(a)   # same owner


def test_freed_buffer_is_deregistered_and_never_reused():
    rec, cache = make()
    a = np.zeros(1 << 16, np.uint8)
    first = cache.get(a)
    del a
    gc.collect()
    assert first not in rec.live and len(cache) == 0
    b = np.zeros(1 << 16, np.uint8)          # may well reuse the address
    assert cache.get(b) != first


def test_same_address_other_owner_registers_anew():
    rec, cache = make()
    raw = bytearray(64)                       # not weak-referenceable: held strongly
    first = cache.get(np.frombuffer(raw, np.uint8))
    other = np.frombuffer(memoryview(raw), np.uint8)
    assert owner(other) is raw and cache.get(other) == first
    fake = np.zeros(64, np.uint8)
    assert cache.get(fake) != first


def test_overlapping_registration_replaces_the_old_one_and_capacity_bounds():
    rec, cache = make()
    a = np.zeros(1000, np.uint8)
    whole = cache.get(a)
    part = cache.get(a[100:200])
    assert whole not in rec.live and part in rec.live
    keep = [np.zeros(10, np.uint8) for _ in range(6)]
    for k in keep:
        cache.get(k)
    assert len(cache) == 4 and len(rec.live) == 4
    cache.clear()
    assert not rec.live


def test_a_cached_registration_never_keeps_its_buffer_alive():
    rec, cache = make()
    a = np.zeros(1 << 20, np.uint8)
    ref = weakref.ref(a)
    cache.get(a[10:20])                      # a view: the owner is what is watched, weakly
    del a
    gc.collect()
    assert ref() is None and not rec.live and len(cache) == 0


def test_owners_without_weak_references_are_held_for_the_call_only():
    rec, cache = make()
    raw = bytearray(64)
    ref_count = sys.getrefcount(raw)
    first = cache.get(np.frombuffer(raw, np.uint8))
    assert cache.get(np.frombuffer(raw, np.uint8)) == first       # the same call: reused
    cache.end_call()
    assert not rec.live and len(cache) == 0 and sys.getrefcount(raw) == ref_count
    kept = np.zeros(8, np.uint8)
    cache.get(kept)
    cache.end_call()                         # weakly watched entries stay cached
    assert len(cache) == 1
