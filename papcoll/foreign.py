"""Buffers mpi4py takes without Python's buffer protocol: DLPack tensors and objects with the
CUDA array interface. papcoll moves bytes with the CPU, so it takes them where the host can
reach their memory -- a DLPack tensor on the CPU, an interface whose memory the host can read
(mpi4py's own tests fake GPU arrays that way) -- and refuses device memory with a clear error.
Their bytes come through mpi4py's own reading of them (``MPI.buffer``); their element type as
mpi4py names it, from the DLPack header (declared once, in native/papcoll_dlpack.h, read by
``_native.dlpack_dtype``) or the interface's typestr."""
import os

import numpy as np
from mpi4py import MPI

from .errors import BufferSpecError
from . import _native

CPU = _native.kDLCPU                         # DLPack's codes, from native/papcoll_dlpack.h
INT, UINT, FLOAT, COMPLEX, BOOL = (_native.kDLInt, _native.kDLUInt, _native.kDLFloat,
                                   _native.kDLComplex, _native.kDLBool)


def view(obj, name):
    """The bytes of ``obj`` as a memoryview, or a BufferSpecError."""
    device = getattr(obj, "__dlpack_device__", None)
    interface = getattr(obj, "__cuda_array_interface__", None)
    if device is not None and interface is None:
        if device()[0] != CPU:
            raise BufferSpecError(f"{name}: a DLPack tensor in device memory "
                                  f"({type(obj).__name__}); papcoll moves host memory only")
    elif interface is not None:
        address, nbytes = _extent(interface)
        if nbytes and not (_readable(address) and _readable(address + nbytes - 1)):
            raise BufferSpecError(f"{name}: {type(obj).__name__} is device memory (its "
                                  f"CUDA array interface); papcoll moves host memory only")
    else:
        raise BufferSpecError(f"{name}: expected a buffer (numpy array, bytearray, "
                              f"memoryview, host DLPack array...), got {type(obj).__name__}")
    return memoryview(MPI.buffer(obj))


def typecode(obj):
    """mpi4py's typecode of ``obj``'s elements (a view() object)."""
    interface = getattr(obj, "__cuda_array_interface__", None)
    if interface is not None:
        return np.dtype(interface["typestr"]).char
    _, code, bits, lanes = _native.dlpack_dtype(obj.__dlpack__())   # read, not consumed
    if lanes == 2 and code == FLOAT:
        code, bits = COMPLEX, 2 * bits
    names = {INT: "bhilq", UINT: "BHILQ", FLOAT: "efdg", COMPLEX: "FDG", BOOL: "?"}
    for char in names.get(code, "") if lanes <= 2 else "":
        if np.dtype(char).itemsize * 8 == bits:
            return char
    return "B"


def _extent(interface):
    shape, strides = interface["shape"], interface.get("strides")
    itemsize = np.dtype(interface["typestr"]).itemsize
    nbytes = int(np.prod(shape)) * itemsize
    if strides is not None and nbytes:
        nbytes = sum((n - 1) * s for n, s in zip(shape, strides)) + itemsize
    return interface["data"][0], nbytes


def _readable(address):
    """Whether this process can read the byte at ``address`` (a read of ourselves by
    process_vm_readv fails cleanly where a load would fault)."""
    return _native.cma_copy(os.getpid(), bytearray(1), address, False) == 1
