"""What papcoll knows of an MPI datatype, decided once per datatype and kept on the datatype.

papcoll moves bytes. Where ``count`` x a datatype is exactly ``count * size`` bytes taken in
order from its address, it copies them raw; any other datatype goes through MPI_Pack and
MPI_Unpack (Alltoallv/w) or is refused (Alltoall). "In order" is what extents cannot show: an
indexed type of two ints swapped has lb 0 and size = extent = true extent, yet MPI packs its
bytes permuted. So a derived datatype whose extents look contiguous is packed by MPI itself
from a pattern that names every byte's position (one pass per base-256 digit of the
position): it is contiguous exactly when every byte comes back where it was. Two constructions
say so by definition and skip the passes: a contiguous run of a predefined type, and a
subarray that is its whole array. The same pack, with no data, is MPI's own check that the
datatype is committed, made before a byte moves.

The verdict is an attribute of the datatype (MPI_Type_set_attr): it lives exactly as long as
the datatype, so a datatype freed and another made under its handle has none, and is judged
anew. Its ``serial``, unique to one datatype's life, is what caches of checked shapes key on,
never the handle. Predefined datatypes are never freed and their typemaps are in order: their
extents decide, and their handle serves as serial.

Plans (callcache.py) match a call's datatype objects by identity and keep the handles they
had; mpi4py's ``Free`` turns the object itself into DATATYPE_NULL. So the freeing of a judged
datatype (its attribute's delete callback, inside MPI_Type_free: no MPI call there, only a
flag) makes every watching cache drop its plans before its next call, which then takes the
full path and refuses the freed object.
"""
import itertools
import weakref
from typing import NamedTuple

import numpy as np
from mpi4py import MPI

from .errors import BufferSpecError
from . import _native


class Verdict(NamedTuple):
    serial: tuple         # ("predefined", handle) or ("derived", n): unique while it lives
    contiguous: bool      # count x it is count * size bytes, in order, from its address


_keyval = None            # papcoll's attribute key; lives with the process, as MPI's own do
_serials = itertools.count(1)
_watchers = weakref.WeakSet()   # CallCaches: told when a judged datatype is freed


def watch(cache):
    """Call ``cache.datatype_freed()`` whenever a datatype judged here is freed."""
    _watchers.add(cache)


def _freed(datatype, keyval, verdict):
    for cache in list(_watchers):
        cache.datatype_freed()


def verdict(datatype, what):
    """The Verdict of ``datatype`` (an MPI.Datatype); a BufferSpecError naming ``what`` for
    DATATYPE_NULL or a datatype not committed."""
    global _keyval
    if datatype == MPI.DATATYPE_NULL:
        raise BufferSpecError(f"{what}: MPI.DATATYPE_NULL is not a datatype for data (a "
                              f"datatype object is DATATYPE_NULL once freed)")
    if datatype.is_predefined:
        return Verdict(("predefined", datatype.handle), _extents_contiguous(datatype))
    if _keyval is None:
        _keyval = MPI.Datatype.Create_keyval(delete_fn=_freed)
    known = datatype.Get_attr(_keyval)
    if known is None:
        _committed(datatype, what)
        known = Verdict(("derived", next(_serials)),
                        _extents_contiguous(datatype) and _packs_in_order(datatype))
        datatype.Set_attr(_keyval, known)
    return known


def _extents_contiguous(datatype):
    lb, extent = datatype.Get_extent()
    true_lb, true_extent = datatype.Get_true_extent()
    return (lb, true_lb) == (0, 0) and datatype.Get_size() == extent == true_extent


def _committed(datatype, what):
    if _pack(None, 0, datatype, np.empty(1, np.uint8)):
        raise BufferSpecError(f"{what}: datatype {name(datatype)} is not committed; call its "
                              f"Commit() before using it") from None


def _packs_in_order(datatype):
    """Whether MPI packs one ``datatype`` (size = extent bytes) in the order of its bytes:
    digit k of every byte's position, packed, must come back at that position -- unless its
    construction says so (:func:`_in_order_by_construction`)."""
    if _in_order_by_construction(datatype):
        return True
    size = datatype.Get_size()
    packed = np.empty(size, np.uint8)
    for shift in range(0, max(8, int(size - 1).bit_length()), 8):
        pattern = _digits(size, shift)
        if _pack(pattern.ctypes.data, 1, datatype, packed) or \
                not np.array_equal(packed, pattern):
            return False
    return True


def _in_order_by_construction(datatype):
    """A contiguous run of a predefined type, or a subarray that is its whole array (an FFT's
    whole-array transposes), with size = extent: MPI's typemap of it is its elements in
    memory order, by the constructor's definition; no byte need be packed."""
    combiner = datatype.combiner
    if combiner not in (MPI.COMBINER_CONTIGUOUS, MPI.COMBINER_SUBARRAY):
        return False
    element, _, params = datatype.decode()
    if not element.is_predefined:
        element.Free()                  # Get_contents' copy of a derived type: ours to free
        return False
    return combiner == MPI.COMBINER_CONTIGUOUS or params["subsizes"] == params["sizes"]


def _digits(size, shift):
    """Bits shift.. shift + 7 of every position below ``size``, one byte each: runs of 1 <<
    shift equal bytes counting 0-255, built from runs (a 2-D FFT's whole-array types are
    megabytes, judged on their first call)."""
    run = 1 << shift
    values = np.arange(256, dtype=np.uint8)
    if 256 * run >= size:
        return np.repeat(values[:-(-size // run)], run)[:size]
    return np.tile(np.repeat(values, run), -(-size // (256 * run)))[:size]


def _pack(source, count, datatype, packed):
    """MPI_Pack's error code for ``count`` x ``datatype`` from address ``source`` into
    ``packed`` (by count, not by a buffer's length: a datatype's extent may be 0)."""
    return _native.mpi_pack(source, count, datatype, packed, False)


def from_code(code, what):
    try:
        return MPI.Datatype.fromcode(code)
    except (KeyError, ValueError):
        raise BufferSpecError(f"{what}: unknown MPI typecode {code!r}") from None


def name(datatype):
    try:
        return datatype.Get_name() or f"(unnamed, {datatype.Get_size()} bytes)"
    except MPI.Exception:
        return "datatype"
