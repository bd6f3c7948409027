"""Buffer-spec parsing for Alltoall, in one place, as mpi4py accepts it.

A spec is a buffer, ``[buf, datatype]``, ``[buf, count]``, ``[buf, count, datatype]``,
``[buf, (count, displ), datatype]`` or ``[buf, count, displ, datatype]``, with ``count``
elements per peer and ``displ`` an offset in elements; or ``MPI.IN_PLACE`` as sendbuf.
Only datatypes whose data is contiguous bytes (no gaps, lower bound 0) are accepted:
papcoll moves bytes, so it must know exactly which bytes a block is.

Once a call has been checked here, the algorithm may leave a plan for calls of its shape,
which then skip this module (native/papcoll_call.c recognises them, and declines anything
else back to it).
"""
from typing import NamedTuple

import numpy as np
from mpi4py import MPI
from mpi4py.util.dtlib import to_numpy_dtype

from . import datatypes, foreign
from .errors import BufferSpecError


class Message(NamedTuple):
    """One side of an Alltoall: ``data`` holds ``nblocks`` blocks of ``block`` bytes."""
    data: np.ndarray          # uint8, C-contiguous, the exact region of the call
    block: int                # bytes per peer
    count: int                # elements per peer
    datatype: MPI.Datatype

    def block_of(self, peer):
        return self.data[peer * self.block:(peer + 1) * self.block]


def parse_alltoall(sendbuf, recvbuf, nprocs):
    """Return (send, recv): Messages for a call on ``nprocs`` processes; send is None for IN_PLACE."""
    recv, recv_sig = _parse(recvbuf, nprocs, "recvbuf", writable=True)
    if sendbuf is MPI.IN_PLACE:
        return None, recv
    send, send_sig = _parse(sendbuf, nprocs, "sendbuf", writable=False)
    if send.block != recv.block:
        raise BufferSpecError(
            f"sendbuf sends {send.count} x {datatypes.name(send.datatype)} = {send.block} bytes per peer "
            f"but recvbuf expects {recv.count} x {datatypes.name(recv.datatype)} = {recv.block} bytes")
    if send_sig != recv_sig:
        raise BufferSpecError(
            f"sendbuf datatype {datatypes.name(send.datatype)} does not match "
            f"recvbuf datatype {datatypes.name(recv.datatype)}")
    if recv.block and _overlap(send.data, recv.data):
        raise BufferSpecError("sendbuf and recvbuf overlap; use MPI.IN_PLACE as sendbuf instead")
    return send, recv


def _overlap(a, b):
    """Whether two contiguous byte arrays share memory: exactly when their ranges meet, which
    is all np.may_share_memory checks."""
    return np.may_share_memory(a, b)


def _parse(spec, nprocs, name, writable):
    """(Message, type signature) of one side."""
    if spec is MPI.IN_PLACE:
        raise BufferSpecError(f"MPI.IN_PLACE is only valid as sendbuf, not as {name}")
    buf, count, displ, datatype = _unpack(spec, name)
    view = _bytes_of(buf, name, writable)
    if datatype is None:
        datatype, extent, sig = _implied(buf, name)
    else:
        if isinstance(datatype, str):
            datatype = datatypes.from_code(datatype, name)
        elif not isinstance(datatype, MPI.Datatype):
            raise BufferSpecError(f"{name}: expected an MPI.Datatype or typecode string, "
                                  f"got {datatype!r}")
        extent, sig = _check_datatype(datatype, name), _signature(datatype)
    if count is None:
        if extent == 0 or nprocs == 0 or view.nbytes % (extent * nprocs):
            raise BufferSpecError(
                f"{name} holds {view.nbytes} bytes, which is not a whole number of "
                f"{datatypes.name(datatype)} ({extent} bytes) for each of {nprocs} processes")
        count = view.nbytes // (extent * nprocs)
    else:
        count = _index(count, f"{name} count")
    displ = _index(displ, f"{name} displacement") if displ else 0
    start, size = displ * extent, count * extent * nprocs
    if start + size > view.nbytes:
        raise BufferSpecError(
            f"{name} needs {count} x {datatypes.name(datatype)} for each of {nprocs} processes "
            f"(+ displacement {displ}) = {start + size} bytes, but the buffer holds {view.nbytes}")
    if start or size != view.nbytes:
        view = view[start:start + size]
    return Message(view, count * extent, count, datatype), sig


# numpy dtype -> (predefined MPI datatype, extent, signature) of the arrays of that dtype: the
# same answers all run long, which cost several microseconds of MPI and mpi4py calls per call.
_by_dtype = {}


def _implied(buf, name):
    """(datatype, extent, signature) a buffer passed without a datatype implies."""
    key = buf.dtype if type(buf) is np.ndarray else None
    known = _by_dtype.get(key)
    if known is None:
        datatype = _datatype_of(buf, name)
        known = (datatype, _check_datatype(datatype, name), _signature(datatype))
        if key is not None:
            _by_dtype[key] = known
    return known


def _unpack(spec, name):
    if not isinstance(spec, (list, tuple)):
        return spec, None, 0, None
    items = list(spec)
    if len(items) == 2:
        buf, second = items
        if isinstance(second, (MPI.Datatype, str)):
            return buf, None, 0, second
        return buf, second, 0, None
    if len(items) == 3:
        buf, count, datatype = items
        if isinstance(count, (list, tuple)):
            if len(count) != 2:
                raise BufferSpecError(f"{name}: expected (count, displ), got {count!r}")
            return buf, count[0], count[1], datatype
        return buf, count, 0, datatype
    if len(items) == 4:
        return tuple(items)
    raise BufferSpecError(f"{name}: a buffer spec has 2 to 4 items, got {len(items)}")


def _bytes_of(buf, name, writable):
    """The bytes of a buffer, as a flat uint8 array over the same memory."""
    if type(buf) is np.ndarray:              # the common case, without a memoryview
        flags = buf.flags
        if flags.c_contiguous and (flags.writeable or not writable):
            flat = buf.reshape(-1)
            return flat if flat.dtype == np.uint8 else flat.view(np.uint8)
    try:
        mv = memoryview(buf)
    except TypeError:
        mv = foreign.view(buf, name)
    if not mv.contiguous:
        raise BufferSpecError(f"{name} is not contiguous (shape {mv.shape}, strides {mv.strides}); "
                              f"pass a contiguous copy, e.g. numpy.ascontiguousarray")
    if writable and mv.readonly:
        raise BufferSpecError(f"{name} is read-only; the receive buffer must be writable")
    if not mv.c_contiguous:  # Fortran order: the transpose is the same memory in C order
        mv = memoryview(np.asarray(buf).T)
    return np.frombuffer(mv.cast("B") if mv.ndim != 1 or mv.format != "B" else mv, dtype=np.uint8)


def _datatype_of(buf, name):
    try:
        code = memoryview(buf).format
    except TypeError:                        # foreign.py's
        code = foreign.typecode(buf)
    if isinstance(buf, np.ndarray):
        code = buf.dtype.char if buf.dtype.isnative else code
    try:
        return MPI.Datatype.fromcode(_numpy_code(code))
    except (KeyError, ValueError, TypeError):
        raise BufferSpecError(
            f"{name}: no MPI datatype for buffer format {code!r}; pass [buf, datatype]") from None


def _numpy_code(code):
    # numpy complex types show up as 'F'/'D'/'G' (dtype.char) but mpi4py names them 'Zf'/'Zd'/'Zg'.
    return {"F": "Zf", "D": "Zd", "G": "Zg"}.get(code, code)


def _check_datatype(datatype, name):
    """The extent of ``datatype``, which must be contiguous bytes in order (datatypes.py)."""
    if not datatypes.verdict(datatype, name).contiguous:
        lb, extent = datatype.Get_extent()
        raise BufferSpecError(
            f"{name}: datatype {datatypes.name(datatype)} is not contiguous bytes in order (lb {lb}, "
            f"extent {extent}, size {datatype.Get_size()}); papcoll's Alltoall accepts such "
            f"datatypes only -- use Alltoallw, pack the data, or send its bytes with MPI.BYTE")
    return datatype.Get_extent()[1]


def _index(value, what):
    try:
        value = int(value) if isinstance(value, (int, np.integer)) else value.__index__()
    except (AttributeError, TypeError):
        raise BufferSpecError(f"{what} must be an integer, got {value!r}") from None
    if value < 0:
        raise BufferSpecError(f"{what} must not be negative, got {value}")
    return value


def _signature(datatype):
    """What must agree between send and receive datatypes (MPI: matching type signatures)."""
    if datatype in (MPI.BYTE, MPI.PACKED):
        return None
    try:
        return to_numpy_dtype(datatype).base   # contiguous(2, INT) matches 2 x INT
    except (KeyError, ValueError, TypeError):
        return datatype.Get_name()

