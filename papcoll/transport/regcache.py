"""Registration cache: registering a buffer is expensive, so keep registrations by address --
without ever keeping the buffer alive.

A registration is only valid while the buffer it was made for is alive: when the user frees a
buffer, a new one may get the same address but other pages. So each entry remembers the
buffer's owning object *weakly* and is dropped (deregistered) the moment that object dies: a
program that allocates a fresh receive buffer every step frees it as usual, and its
registration goes with it. An owner that cannot be weakly referenced (a bytearray, bytes) is
held and registered for the current call only: ``end_call()`` drops those entries, so nothing
holds such a buffer beyond the call either. The transports register nothing that holds a
reference (MPI: attach by address; verbs: an MR by address).
"""
import weakref
from collections import OrderedDict

import numpy as np


def owner(array):
    """The object that owns the memory behind ``array`` (walks numpy bases and memoryviews)."""
    obj = array
    while True:
        nxt = obj.base if isinstance(obj, np.ndarray) else getattr(obj, "obj", None)
        if nxt is None:
            return obj
        obj = nxt


class RegistrationCache:
    def __init__(self, register, deregister, capacity=64):
        self._register, self._deregister = register, deregister
        self.capacity = capacity
        self._entries = OrderedDict()   # (address, nbytes) -> (registration, ref, call only)

    def get(self, array):
        """The registration covering ``array`` (a C-contiguous uint8 array), made if needed."""
        key = (array.ctypes.data, array.nbytes)
        keeper = owner(array)
        entry = self._entries.get(key)
        if entry is not None:
            registration, ref, _ = entry
            if ref() is keeper:
                self._entries.move_to_end(key)
                return registration
            self._drop(key)              # a new buffer at an old address: register it anew
        self._drop_overlaps(*key)
        registration = self._register(array)
        try:
            ref, call_only = weakref.ref(keeper, lambda _, key=key: self._drop(key)), False
        except TypeError:                # not weak-referenceable: held for this call only
            ref, call_only = (lambda: keeper), True
        self._entries[key] = (registration, ref, call_only)
        while len(self._entries) > self.capacity:
            self._drop(next(iter(self._entries)))
        return registration

    def end_call(self):
        """Drop the entries held for this call only (owners without weak references)."""
        for key in [k for k, entry in self._entries.items() if entry[2]]:
            self._drop(key)

    def __len__(self):
        return len(self._entries)

    def clear(self):
        while self._entries:
            self._drop(next(iter(self._entries)))

    def _drop_overlaps(self, address, nbytes):
        # Registrations may not overlap (MPI dynamic windows forbid it): a buffer inside or
        # around an older one replaces it.
        for addr, size in [k for k in self._entries if k[0] < address + nbytes and address < k[0] + k[1]]:
            self._drop((addr, size))

    def _drop(self, key):
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._deregister(entry[0])
