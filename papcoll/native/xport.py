"""Bindings of the native one-sided transports and engine (native/papcoll_xport.h). A
transport's native half is a module object, :class:`XPort` (papcoll._native.XPort, which owns
its resources: native/papcoll_pyxport.c); the engine's call is still a struct Python fills at
set-up (:class:`XCallStruct`, bound with ctypes until the calls move into the module too). The
algorithms (algorithms/onesided.py) run a call as an XCall. What the fields mean is said once,
in the header."""
import ctypes as c

import numpy as np

from .. import _native
from .lib import lib

XPort = _native.XPort

PC_VERBS, PC_MPI, PC_LOOP = 1, 2, 3
ADVERT, DATA = 0, 1
TO_ADVERTS, TO_INBOX, TO_EXPOSED = 0, 1, 2
COPY, ZCOPY, STEP, ORDER, VAR = 1, 2, 3, 4, 5
SEEN, SENT, RECEIVED = 0, 1, 2
IN_NOTICE, IN_ADVERT, IN_HEADER = 1, 2, 3

_p, _u64, _u32, _size, _int = c.c_void_p, c.c_uint64, c.c_uint32, c.c_size_t, c.c_int


class XCallStruct(c.Structure):
    _fields_ = [("x", _p), ("scheme", _int), ("epoch", _u64),
                ("adverts", _u64), ("sig", _u64), ("code", _u32), ("expected", _p),
                ("src", _p), ("src_off", _p), ("len", _p), ("dst_off", _p), ("lkey", _u32),
                ("inbox", _p), ("out", _p), ("in_off", _p), ("out_off", _p), ("out_len", _p),
                ("record", _p), ("record_lkey", _u32), ("advert_area", _p), ("landed", _p),
                ("landed_arg", _p), ("gate", _p), ("unsent", _p), ("waiting", _p), ("next", _size), ("advertised", _int),
                ("events", _p), ("nevents", _size), ("max_events", _size), ("failed_in", _int),
                ("failed_peer", _size), ("failed_sig", _u64), ("failed_code", _u32),
                ("failed_len", _u32), ("via_inbox", _p), ("advertise", _p), ("expect_len", _p),
                ("record_epoch", _u64), ("notice_only", _int)]


class Advert(c.Structure):
    """The advert record (struct pc_advert): C writes it (pc_xcall_advert) and reads it; Python
    reads one only to test a transport by itself."""
    _fields_ = [("addr", _u64), ("bytes", _u64), ("rkey", _u32), ("pad", _u32), ("epoch", _u64),
                ("sig", _u64)]


ADVERT_BYTES = c.sizeof(Advert)
_XC = c.POINTER(XCallStruct)
for _name, _args in [("pc_xcall_run", [_XC, c.c_int64]), ("pc_xcall_arrived", [_XC, _size])]:
    getattr(lib, _name).restype, getattr(lib, _name).argtypes = _int, _args
lib.pc_xcall_start.restype, lib.pc_xcall_start.argtypes = None, [_XC, _u64, _u64, _u64, _u32,
                                                                 c.c_int64]
lib.pc_xcall_advert.restype, lib.pc_xcall_advert.argtypes = None, [_XC, _size, _u64, _u64,
                                                                    _u32]


def run(call, timeout_ns):
    return lib.pc_xcall_run(c.byref(call), timeout_ns)


def start(call, epoch, adverts, sig, code, block=-1):
    """pc_xcall_start: ``call`` (an XCallStruct) is call ``epoch`` of signature ``sig``; every
    peer awaited; ``block`` >= 0: each peer's DATA notice is expected with that many bytes."""
    lib.pc_xcall_start(c.byref(call), epoch, adverts, sig, code, block)


def advert(call, address, nbytes, rkey, record=0):
    """pc_xcall_advert: the call's advert record (the ``record``-th: VAR's are per peer), for
    my receive buffer (an exposed one) or the region of it a peer's block goes to."""
    lib.pc_xcall_advert(c.byref(call), record, address, nbytes, rkey)


def arrived(call, peer):
    """pc_xcall_arrived: 1 if ``peer``'s arrival signal for ``call`` is here, after a poll;
    0 if not; a poll's -errno."""
    return lib.pc_xcall_arrived(c.byref(call), peer)


def inbox_slot(bank, n, q, slot):
    """Where in an inbox of ``n`` slots of ``slot`` bytes per bank the block from process ``q``
    lands in ``bank`` (native pc_inbox_slot, the inbox's one layout); ``q`` an int or an
    array of them."""
    if np.ndim(q):
        return np.array([_native.inbox_slot(bank, n, int(p), slot) for p in q], np.uint64)
    return _native.inbox_slot(bank, n, q, slot)
