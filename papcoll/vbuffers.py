"""Buffer specs of Alltoallv and Alltoallw, as mpi4py accepts them, checked in full before any
byte moves (buffers.py decodes the buffers and datatypes themselves).

Alltoallv: a buffer, ``[buf, counts]``, ``[buf, (counts, displs)]``, ``[buf, counts,
datatype]``, ``[buf, (counts, displs), datatype]`` or ``[buf, counts, displs, datatype]``:
``counts`` and ``displs`` in elements of the one datatype, one per peer (``counts`` an int:
that many for every peer; None: the buffer split evenly; ``displs`` None: packed in rank
order). Alltoallw: ``[buf, (counts, displs), datatypes]`` or ``[buf, counts, displs,
datatypes]``, ``displs`` in bytes, a datatype per peer. ``MPI.IN_PLACE`` as sendbuf.

A side becomes a :class:`Blocks`: peer q's block is ``length[q]`` bytes at ``offset[q]`` of
``data``, a contiguous byte array. Where every block is contiguous bytes that array is the
user's buffer itself; otherwise it is a staging array in packed order, filled (send) or
emptied (receive) by MPI_Pack / MPI_Unpack with the user's own datatype, block by block: the
bytes a block moves are exactly MPI's typemap of it. Checks: lengths of the lists, counts not
negative, every byte a block's typemap touches inside the buffer, receive blocks that do not
overlap (contiguous ones by their ranges, a transpose's subarrays by their boxes, others byte
by byte), and my block to myself as long as the one I expect from myself.
"""

import numpy as np
from mpi4py import MPI

from . import datatypes
from .buffers import _bytes_of, _implied, _index
from .errors import BufferSpecError
from . import _native


class Blocks:
    """One side of an Alltoallv/w: peer q's block is ``length[q]`` bytes at ``offset[q]`` of
    ``data`` (uint8, contiguous); ``moves`` is None when ``data`` is the user's buffer, else
    one (datatype, address, count) per peer to pack from or unpack into, and ``data`` a
    staging array made at its first use (MPI's own algorithm never uses it). ``shape``: an
    Alltoallv side's (counts, displs, datatype, MPI datatype) as the spec gave them, for a
    plan (native/plan.py)."""
    __slots__ = ("_data", "offset", "length", "moves", "shape")   # shape: also Alltoallw's,
                                                                  # its datatypes per peer

    def __init__(self, data, offset, length, moves, shape=None):
        self._data, self.offset, self.length, self.moves, self.shape = (data, offset, length,
                                                                        moves, shape)

    @property
    def data(self):
        if self._data is None:
            self._data = np.empty(int(self.length.sum()), np.uint8)
        return self._data

    def block_of(self, peer):
        return self.data[int(self.offset[peer]):int(self.offset[peer] + self.length[peer])]

    def pack(self):
        """Fill the staging array, if any, from the user's buffer (a send side): once per
        call, by whichever algorithm moves the staged bytes (MPI's own takes the specs)."""
        if self.moves is not None:
            for q in range(len(self.offset)):
                self.pack_one(q)

    def pack_one(self, q, unpack=False):
        datatype, where, count = self.moves[q]
        if count:
            at = int(self.offset[q])
            rc = _native.mpi_pack(where or None, count, datatype,
                                  self.data[at:at + int(self.length[q])], unpack)
            if rc:
                raise MPI.Exception(rc)

    def unpack_one(self, q):
        """Peer q's block, landed in the staging array, into the user's buffer."""
        self.pack_one(q, unpack=True)

    def unpack(self):
        for q in range(len(self.offset)):
            self.unpack_one(q)


def copy_own(send, recv, rank):
    """My block to myself (``send`` packed), into its place (unpacked where the receive side is
    staged)."""
    recv.block_of(rank)[:] = send.block_of(rank)
    if recv.moves is not None:
        recv.unpack_one(rank)


def parse_alltoallv(sendbuf, recvbuf, nprocs, rank, w, layouts):
    """(send, recv): Blocks of an Alltoallv (``w``: Alltoallw) on ``nprocs`` processes by
    ``rank``; for MPI.IN_PLACE send is a private copy of the receive blocks. A staged send
    side is filled by its ``pack()``. ``layouts``: the Communicator's verdicts of sides
    already checked (callcache.Layouts)."""
    what = "Alltoallw" if w else "Alltoallv"
    recv = _side(recvbuf, nprocs, "recvbuf", True, w, what, layouts)
    if sendbuf is MPI.IN_PLACE:
        return _staged(recv), recv
    send = _side(sendbuf, nprocs, "sendbuf", False, w, what, layouts)
    if send.length[rank] != recv.length[rank]:
        raise BufferSpecError(f"{what}: sendbuf sends {send.length[rank]} bytes to rank {rank} "
                              f"itself, but recvbuf expects {recv.length[rank]} from it")
    if send.moves is None and recv.moves is None and send.data.size and recv.data.size \
            and np.may_share_memory(send.data, recv.data):
        raise BufferSpecError(f"{what}: sendbuf and recvbuf overlap; use MPI.IN_PLACE")
    return send, recv


def _staged(side, packed=None):
    """A packed private copy of ``side``'s blocks (IN_PLACE's send side), at offsets
    ``packed`` (default: computed)."""
    length = side.length
    if packed is None:
        packed = np.concatenate(([0], np.cumsum(length)[:-1])).astype(np.uint64)
    moves = side.moves or [(MPI.BYTE, side.data.ctypes.data + int(o), int(n))
                           for o, n in zip(side.offset, length)]
    return Blocks(None, packed, length, moves)


def _side(spec, nprocs, name, receive, w, what, layouts):
    if spec is MPI.IN_PLACE:
        raise BufferSpecError(f"{what}: MPI.IN_PLACE is only valid as sendbuf, not as {name}")
    buf, counts, displs, types = _unpack(spec, name, w, what)
    bottom = buf is MPI.BOTTOM               # absolute addresses, in the datatypes
    view = np.empty(0, np.uint8) if bottom else _bytes_of(buf, name, receive)
    given = types
    if w:
        if isinstance(types, (MPI.Datatype, str)):
            types = [types] * nprocs
        types = _list(types, nprocs, f"{name} datatypes", what)
        labels = [f"{name} datatypes[{q}]" for q in range(nprocs)]
        types = [_datatype(t, label) for t, label in zip(types, labels)]
    else:
        one = _implied(buf, name)[0] if types is None else _datatype(types, f"{name} datatype")
        types, labels = [one] * nprocs, [f"{name} datatype"] * nprocs
    verdicts = [datatypes.verdict(t, label) for t, label in zip(types, labels)]   # committed
    # What a side's checks found is decided by the buffer's length, the counts and
    # displacements as given, and each datatype's serial (datatypes.py: a datatype freed and
    # another made under its handle has another). Calls repeat their specs; the checks
    # (strided receive types are marked byte by byte) cost more than a call.
    key = (view.nbytes, nprocs, w, receive, bottom, _hashable(counts), _hashable(displs),
           tuple(v.serial for v in verdicts))
    layout = layouts.get(key)
    if layout is None:
        layout = _layout(view, nprocs, counts, displs, types, verdicts, name, w, what, receive,
                         bottom)
        layouts.put(key, layout)
    counts_given = counts
    counts, starts, offset, length, contiguous, packed = layout
    shape = None
    if isinstance(counts_given, (list, tuple)) and not bottom:
        shape = ((counts_given, displs, list(given), types) if w else
                 (counts_given, displs, given, types[0]))
    if contiguous:
        return Blocks(view, offset, length, None, shape)
    base = 0 if bottom else view.ctypes.data
    staged = _staged(Blocks(view, None, length,
                            [(t, base + s, c) for c, s, t in zip(counts, starts, types)]),
                     packed)
    staged.shape = shape
    return staged


def _hashable(value):
    if value is None or isinstance(value, (int, np.integer)):
        return value
    try:
        return tuple(value)
    except TypeError:
        return value          # refused by _layout


def _layout(view, nprocs, counts, displs, types, verdicts, name, w, what, receive, bottom):
    """(counts, byte starts, offsets, lengths, contiguous, offsets packed) of a side, checked
    in full -- as
    mpi4py reads it: Alltoallv's counts None split the buffer (the first ranks one more where
    it does not divide), an int is every peer's count, displs None pack the blocks and an int
    strides them; Alltoallw's counts and displs both None are 1 and 0 for every peer. Blocks
    at MPI.BOTTOM (absolute addresses) have no buffer to check them against: MPI's rule."""
    extent = types[0].Get_extent()[1]
    if w and counts is None and displs is None and not bottom:
        counts, displs = [1] * nprocs, [0] * nprocs
    if counts is None and not w:
        if view.nbytes and (extent <= 0 or view.nbytes % extent):
            raise BufferSpecError(f"{what}: {name} needs counts (it holds {view.nbytes} bytes, "
                                  f"not a whole number of {datatypes.name(types[0])})")
        whole = view.nbytes // extent if view.nbytes else 0
        counts = [whole // nprocs + (q < whole % nprocs) for q in range(nprocs)]
    if isinstance(counts, (int, np.integer)) and not w:
        counts = [counts] * nprocs
    if counts is None or (displs is None and (w or bottom)):
        raise BufferSpecError(f"{what}: {name} needs counts and displacements"
                              + (" (at MPI.BOTTOM)" if bottom else ""))
    counts = [_index(c, f"{what}: {name} counts[{q}]")
              for q, c in enumerate(_list(counts, nprocs, f"{name} counts", what))]
    if displs is None:
        displs = np.concatenate(([0], np.cumsum(counts)[:-1])).tolist()
    elif isinstance(displs, (int, np.integer)) and not w:
        displs = [int(displs) * q for q in range(nprocs)]
    displs = [_integer(d, f"{what}: {name} displs[{q}]")
              for q, d in enumerate(_list(displs, nprocs, f"{name} displs", what))]
    starts = [d if w else d * extent for d in displs]
    sizes = [c * t.Get_size() for c, t in zip(counts, types)]
    # Bounds first, in Python's integers: a count of 2**62 is refused, not overflowed.
    for q, (count, start, datatype) in enumerate(zip(counts, starts, types)):
        low, high = _touched(count, start, datatype)
        if count and (low < 0 or high > (_LIMIT if bottom else view.nbytes)):
            raise BufferSpecError(
                f"{what}: {name}'s block for rank {q} ({count} x {datatypes.name(datatype)} at "
                f"byte {start}) reaches bytes {low} to {high}, outside "
                + ("the address space" if bottom else f"the buffer's {view.nbytes}"))
    if sum(sizes) >= _LIMIT:
        raise BufferSpecError(f"{what}: {name}'s blocks hold {sum(sizes)} bytes in all, "
                              f"more than an address space")
    length = np.array(sizes, np.uint64)
    contiguous = not bottom and all(v.contiguous for c, v in zip(counts, verdicts) if c)
    packed = np.concatenate(([0], np.cumsum(length)[:-1])).astype(np.uint64)
    if receive and not bottom:
        _check_overlap(view, counts, starts, types, contiguous, name, what)
    return counts, starts, np.array(starts, np.uint64), length, contiguous, packed


_LIMIT = 1 << 63          # no block, nor all of a side's, reaches past this byte


def _touched(count, start, datatype):
    """The byte range [low, high) ``count`` x ``datatype`` at ``start`` reaches."""
    _, extent = datatype.Get_extent()
    true_lb, true_extent = datatype.Get_true_extent()
    if not count:
        return start, start
    first, last = start, start + (count - 1) * extent
    return min(first, last) + true_lb, max(first, last) + true_lb + true_extent


def _check_overlap(view, counts, starts, types, contiguous, name, what):
    if contiguous:
        spans = sorted((s, s + c * t.Get_size(), q) for q, (c, s, t)
                       in enumerate(zip(counts, starts, types)) if c and t.Get_size())
        for (s1, e1, q1), (s2, e2, q2) in zip(spans, spans[1:]):
            if s2 < e1:
                raise BufferSpecError(f"{what}: {name}'s blocks from ranks {min(q1, q2)} and "
                                      f"{max(q1, q2)} overlap (bytes {s2} to {min(e1, e2)})")
        return
    covered = _boxes(counts, starts, types)
    if covered is False:
        covered = _coverage(view.nbytes, counts, starts, types)
    if covered is not None:
        raise BufferSpecError(f"{what}: {name}'s blocks from ranks {covered[0]} and "
                              f"{covered[1]} overlap")


def _boxes(counts, starts, types):
    """The first two ranks whose receive blocks share a byte, None, or False where this
    cannot tell. It tells for the blocks of a transpose: one subarray each, of one array
    (sizes, order, a predefined element) at one start. A subarray's elements are distinct
    elements of the array, each its own extent of bytes, so two blocks share a byte exactly
    when their boxes intersect in every dimension; no byte of the buffer need be read."""
    shapes, lows, highs, ranks = set(), [], [], []
    for q, (count, start, datatype) in enumerate(zip(counts, starts, types)):
        if not count or not datatype.Get_size():
            continue
        if count != 1 or datatype.is_predefined or datatype.combiner != MPI.COMBINER_SUBARRAY:
            return False
        element, _, box = datatype.decode()
        if not element.is_predefined:
            element.Free()           # Get_contents' copy of a derived type: ours to free
            return False
        shapes.add((start, tuple(box["sizes"]), box["order"], element.Get_extent()[1]))
        lows.append(box["starts"])
        highs.append([s + n for s, n in zip(box["starts"], box["subsizes"])])
        ranks.append(q)
    if len(shapes) > 1 or len(ranks) > 2048:
        return False
    if len(ranks) < 2:
        return None
    low, high = np.array(lows), np.array(highs)
    meet = np.all((low[:, None] < high[None]) & (low[None] < high[:, None]), axis=2)
    pairs = np.argwhere(np.triu(meet, 1))
    return None if not len(pairs) else (ranks[pairs[0][0]], ranks[pairs[0][1]])


def _coverage(nbytes, counts, starts, types):
    """The first two ranks whose receive blocks share a byte, or None: each block's typemap
    marked by MPI_Unpack into a scratch array over the bytes it spans, and counted; two bytes
    of memory per byte of the buffer, whatever the number of peers."""
    covered, mark = np.zeros(nbytes, np.uint8), np.empty(nbytes, np.uint8)
    for q, (count, start, datatype) in enumerate(zip(counts, starts, types)):
        low, high = _touched(count, start, datatype)
        if not count or low == high:
            continue
        _mark(mark, low, high, count, start, datatype)
        span = covered[low:high]
        span += mark[low:high]
        if (span > 1).any():
            byte = low + int(np.argmax(span > 1))
            return next(p for p in range(q) if _marks(mark, byte, counts[p], starts[p],
                                                      types[p])), q
    return None


def _mark(mark, low, high, count, start, datatype):
    """mark[low:high] (the span of ``count`` x ``datatype`` at ``start``): 1 where its typemap
    writes, else 0."""
    mark[low:high] = 0
    ones = np.ones(count * datatype.Get_size(), np.uint8)
    if _native.mpi_pack(mark.ctypes.data + start, count, datatype, ones, True):
        raise BufferSpecError(f"MPI_Unpack refused {count} x {datatypes.name(datatype)}")


def _marks(mark, byte, count, start, datatype):
    """Whether ``count`` x ``datatype`` at ``start`` writes ``byte`` (the error path only)."""
    low, high = _touched(count, start, datatype)
    if not count or not low <= byte < high:
        return False
    _mark(mark, low, high, count, start, datatype)
    return bool(mark[byte])


def _unpack(spec, name, w, what):
    """(buf, counts, displs, datatype or datatypes) of a spec, as mpi4py reads it: in an
    Alltoallv spec a tuple after the buffer is (counts, displs); an Alltoallw spec is [buf,
    datatypes], [buf, (counts, displs), datatypes] or [buf, counts, displs, datatypes]."""
    if not isinstance(spec, (list, tuple)):
        if w:
            raise BufferSpecError(f"{what}: {name} must be [buf, (counts, displs), datatypes]")
        return spec, None, None, None
    items = list(spec)
    if len(items) == 4:
        return tuple(items)
    if w and len(items) == 2:
        return items[0], None, None, items[1]
    if len(items) in (2, 3):
        buf, layout = items[0], items[1]
        types = items[2] if len(items) == 3 else None
        if len(items) == 2 and isinstance(layout, (MPI.Datatype, str)):
            return buf, None, None, layout
        if isinstance(layout, tuple) or (w and isinstance(layout, list)):
            if len(layout) != 2:
                raise BufferSpecError(f"{what}: {name}: expected (counts, displs), got {layout!r}")
            return buf, layout[0], layout[1], types
        return buf, layout, None, types
    raise BufferSpecError(f"{what}: {name}: a buffer spec has 2 to 4 items, got {len(items)}")


def _list(values, n, what, call):
    try:
        values = list(values)
    except TypeError:
        raise BufferSpecError(f"{call}: {what} must be a sequence, got {values!r}") from None
    if len(values) != n:
        raise BufferSpecError(f"{call}: {what} has {len(values)} entries; one per process "
                              f"({n}) is needed")
    return values


def _integer(value, what):
    try:
        return int(value) if isinstance(value, (int, np.integer)) else value.__index__()
    except (AttributeError, TypeError):
        raise BufferSpecError(f"{what} must be an integer, got {value!r}") from None


def _datatype(value, what):
    if isinstance(value, str):
        return datatypes.from_code(value, what)
    if not isinstance(value, MPI.Datatype):
        raise BufferSpecError(f"{what}: expected an MPI.Datatype or typecode, got {value!r}")
    return value
