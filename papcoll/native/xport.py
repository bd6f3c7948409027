"""Bindings of the native one-sided transports and engine (native/papcoll_xport.h): the structs
Python fills at set-up, and the calls. The transports (transport/) fill a :class:`XPort` with
their MPI handles or verbs objects; the algorithms (algorithms/onesided.py) run a call as an
:class:`XCall`. What the fields mean is said once, in the header."""
import ctypes as c
import functools
import os

import numpy as np

from .lib import address, lib
from .loops import _Lane, arm
from .. import _native

PC_VERBS, PC_MPI = 1, 2
ADVERT, DATA = 0, 1
TO_ADVERTS, TO_INBOX, TO_EXPOSED = 0, 1, 2
COPY, ZCOPY, STEP, ORDER = 1, 2, 3, 4
SEEN, SENT, RECEIVED, GATHERED = 0, 1, 2, 3
IN_NOTICE, IN_ADVERT, IN_HEADER, IN_GATE = 1, 2, 3, 4

_p, _u64, _u32, _size, _int, _iptr = (c.c_void_p, c.c_uint64, c.c_uint32, c.c_size_t, c.c_int,
                                      c.c_ssize_t)


class VPeer(c.Structure):
    _fields_ = [("qp", _p), ("adverts_addr", _u64), ("inbox_addr", _u64),
                ("adverts_rkey", _u32), ("inbox_rkey", _u32), ("qp_num", _u32),
                ("posted", _u32), ("unsignaled", _u32)]


MPI_FUNCTIONS = ("rput", "test", "flush", "flush_local_all", "sync", "iprobe")
MPI_REQS = 8                          # PC_MPI_REQS


class Mpi(c.Structure):
    _fields_ = ([(name, _p) for name in MPI_FUNCTIONS]
                + [(name, _iptr) for name in ("win", "inbox_win", "dyn", "comm", "byte",
                                               "uint64")]
                + [("any_source", _int), ("any_tag", _int), ("adverts_at", _size),
                   ("inbox_at", _size), ("req_size", _size), ("reqs", _p), ("active", _p),
                   ("dirty", _p), ("queued", _p), ("notices", _p), ("notice_at", _p),
                   ("in_flight", _size), ("status", c.c_ubyte * 64)])


class XPortStruct(c.Structure):
    _fields_ = [("kind", _int), ("n", _size), ("me", _size), ("boards", _p), ("peers", _p),
                ("send_cq", _p), ("recv_cq", _p), ("scratch", _u64), ("scratch_lkey", _u32),
                ("depth", _u32), ("qp_order", _p), ("mpi", Mpi), ("inbox_bytes", _p),
                ("deadline", c.c_int64), ("failed_peer", _size),
                ("failed_status", _int), ("failed_vendor", _int)]


class Gate(c.Structure):
    _fields_ = [("flags", _p), ("flag_stride", _size), ("pending", _p), ("n", _size),
                ("target", _u64), ("sig", _u64), ("start", _size), ("first", _p),
                ("dst_off", _p), ("src_off", _p), ("dst", _p), ("src", _p), ("len", _size),
                ("served", _p), ("failed", _size), ("open", _int)]


class XCallStruct(c.Structure):
    _fields_ = [("x", c.POINTER(XPortStruct)), ("scheme", _int), ("epoch", _u64),
                ("adverts", _u64), ("sig", _u64), ("code", _u32), ("expected", _p),
                ("src", _p), ("src_off", _p), ("len", _p), ("dst_off", _p), ("lkey", _u32),
                ("inbox", _p), ("out", _p), ("in_off", _p), ("out_off", _p), ("out_len", _p),
                ("record", _p), ("record_lkey", _u32), ("advert_area", _p), ("flags", _p),
                ("flag_stride", _size), ("first", _p), ("hand_dst_off", _p), ("hand_src", _p),
                ("hand_dst", _p), ("hand_len", _size), ("gate", c.POINTER(Gate)),
                ("unsent", _p), ("waiting", _p), ("next", _size), ("advertised", _int),
                ("events", _p), ("nevents", _size), ("max_events", _size), ("failed_in", _int),
                ("failed_peer", _size), ("failed_sig", _u64), ("failed_code", _u32),
                ("failed_len", _u32)]


class Advert(c.Structure):
    """The advert record (struct pc_advert): C writes it (pc_xcall_advert) and reads it; Python
    reads one only to test a transport by itself."""
    _fields_ = [("addr", _u64), ("bytes", _u64), ("rkey", _u32), ("pad", _u32), ("epoch", _u64),
                ("sig", _u64)]


ADVERT_BYTES = c.sizeof(Advert)
_X, _XC = c.POINTER(XPortStruct), c.POINTER(XCallStruct)
for _name, _args in [("pc_xport_put", [_X, _size, _int, _u64, _u32, _p, _size, _u32, _int,
                                       _u64, _u32, _int]),
                     ("pc_xport_flush", [_X]), ("pc_xport_poll", [_X]),
                     ("pc_xport_complete", [_X, c.c_int64]),
                     ("pc_xport_post_receives", [_X, _size, _size]),
                     ("pc_xcall_run", [_XC, c.c_int64]), ("pc_xcall_arrived", [_XC, _size])]:
    getattr(lib, _name).restype, getattr(lib, _name).argtypes = _int, _args
lib.pc_xcall_start.restype, lib.pc_xcall_start.argtypes = None, [_XC, _u64, _u64, _u64, _u32,
                                                                 c.c_int64]
lib.pc_xcall_advert.restype, lib.pc_xcall_advert.argtypes = None, [_XC, _u64, _u64, _u32]


def mpi_library():
    """The MPI library mpi4py loaded, as a ctypes library (the same copy: its handles and
    state are the ones mpi4py's objects refer to)."""
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "/libmpi" in line}
    paths = sorted(p for p in paths if os.path.basename(p).startswith("libmpi.so")) or \
        sorted(paths)
    if not paths:
        raise OSError("the MPI library mpi4py uses is not mapped in this process")
    return c.CDLL(paths[0])


def functions(library, names):
    """The addresses of MPI functions ``names`` in ``library``."""
    return [c.cast(getattr(library, name), c.c_void_p).value for name in names]


class XPort:
    """A struct pc_xport and the arrays it points to (kept alive here)."""

    def __init__(self, kind, n, me, boards, inbox_bytes):
        inbox_bytes = np.ascontiguousarray(inbox_bytes, np.uint64)
        self.s = XPortStruct(kind=kind, n=n, me=me, boards=address(boards),
                             inbox_bytes=address(inbox_bytes))
        self.ptr = c.pointer(self.s)
        self.keep = [boards, inbox_bytes]

    def hold(self, *arrays):
        self.keep.extend(arrays)

    def put(self, peer, dest, offset, rkey, source, nbytes, lkey, notice, signal=1):
        kind, seq, code = notice if notice is not None else (-1, 0, 0)
        return lib.pc_xport_put(self.ptr, peer, dest, offset, rkey, source, nbytes, lkey, kind,
                                seq, code, signal)

    def flush(self):
        return lib.pc_xport_flush(self.ptr)

    def poll(self):
        return lib.pc_xport_poll(self.ptr)

    def complete(self, timeout_ns):
        return lib.pc_xport_complete(self.ptr, timeout_ns)

    def post_receives(self, peer, count):
        return lib.pc_xport_post_receives(self.ptr, peer, count)


def run(call, timeout_ns):
    return lib.pc_xcall_run(c.byref(call), timeout_ns)


def start(call, epoch, adverts, sig, code, block=-1):
    """pc_xcall_start: ``call`` (an XCallStruct) is call ``epoch`` of signature ``sig``; every
    peer awaited; ``block`` >= 0: each peer's DATA notice is expected with that many bytes."""
    lib.pc_xcall_start(c.byref(call), epoch, adverts, sig, code, block)


def advert(call, address, nbytes, rkey):
    """pc_xcall_advert: the call's advert record, for my receive buffer (an exposed one)."""
    lib.pc_xcall_advert(c.byref(call), address, nbytes, rkey)


def arrived(call, peer):
    """pc_xcall_arrived: 1 if ``peer``'s arrival signal for ``call`` is here, after a poll;
    0 if not; a poll's -errno."""
    return lib.pc_xcall_arrived(c.byref(call), peer)




class XLaneStruct(c.Structure):
    _fields_ = [("lane", _Lane), ("calls", c.POINTER(XCallStruct) * 2), ("adverts", _p),
                ("spare", _p)]


class XLane:
    """The fast lane of copy-based PAP Direct: ``run(sendbuf, recvbuf)`` is xlane_alltoall
    over ``calls`` (the prepared XCallStruct of each bank), counting calls in ``counter``
    (a c_uint64: the Exchange's epoch; ``adverts``, its count of zero-copy calls). It returns 1 when the call is done, 0 when it
    declined, or the engine's rc for the call it left in ``calls[epoch % 2]``."""

    def __init__(self, calls, counter, adverts):
        self.calls = calls                  # kept alive with their arrays
        self.s = XLaneStruct(adverts=c.addressof(adverts))
        self.s.lane.epoch = c.addressof(counter)
        for bank, call in enumerate(calls):
            self.s.calls[bank] = c.pointer(call.s)
        self.run = functools.partial(_native.xlane_alltoall, c.addressof(self.s))

    def arm(self, n, nbytes, sig, timeout, slice, buffer_format=None, itemsize=0,
            datatype=None):
        self.spare = np.empty(nbytes, np.uint8)
        self.s.spare = address(self.spare)
        return arm(self, self.s.lane, n, nbytes, sig, timeout, slice, buffer_format, itemsize,
                   datatype)

    def disarm(self):
        self.s.lane.armed = 0


def ibv_qp(qp, qp_num, words=48):
    """The struct ibv_qp * inside a pyverbs QP, which pyverbs does not expose: the word of the
    object's memory that points at an ibv_qp of this ``qp_num``, of type RC, with both CQs
    (its head: context, qp_context, pd, send_cq, recv_cq, srq, handle, qp_num, state,
    qp_type). Candidates are read with process_vm_readv on this very process, so a word that
    is no pointer cannot crash it. Returns (qp, send_cq, recv_cq) addresses."""
    pid, base = os.getpid(), id(qp)
    mine = np.zeros(words, np.uint64)
    if lib.pc_cma_read(pid, address(mine), base, mine.nbytes) != mine.nbytes:
        raise OSError("cannot read the pyverbs QP object")
    head = np.zeros(8, np.uint64)
    for word in mine.tolist():
        if word < 4096 or word % 8:
            continue
        if lib.pc_cma_read(pid, address(head), word, head.nbytes) != head.nbytes:
            continue
        words32 = head.view(np.uint32)    # bytes 48-63: handle, qp_num, state, qp_type (any endianness)
        num, qp_type = int(words32[13]), int(words32[15])
        if num == qp_num and qp_type == 2 and head[0] and head[3] and head[4]:
            return word, int(head[3]), int(head[4])
    raise OSError(f"no struct ibv_qp of QP number {qp_num} found in the pyverbs QP object")


class MLaneStruct(c.Structure):
    _fields_ = [("lane", _Lane), ("alltoall", _p), ("comm", _iptr), ("byte", _iptr),
                ("in_place", _iptr), ("n", c.c_int64)]


class MLane:
    """The ``mpi`` algorithm's fast lane over ``comm``: ``run(sendbuf, recvbuf)`` is
    mlane_alltoall, MPI_Alltoall of the armed shape from C. 1 done, 0 declined, -(MPI error)."""

    def __init__(self, comm):
        from mpi4py import MPI
        (alltoall,) = functions(mpi_library(), ["MPI_Alltoall"])
        self.s = MLaneStruct(alltoall=alltoall, comm=comm.handle, byte=MPI.BYTE.handle,
                             in_place=int(MPI.IN_PLACE), n=comm.Get_size())
        self.run = functools.partial(_native.mlane_alltoall, c.addressof(self.s))

    def arm(self, nbytes, buffer_format=None, itemsize=0, datatype=None):
        if nbytes // max(self.s.n, 1) >= 1 << 31:        # MPI counts are ints
            self.disarm()
            return False
        return arm(self, self.s.lane, self.s.n, nbytes, 0, 0, 0, buffer_format, itemsize,
                   datatype)

    def disarm(self):
        self.s.lane.armed = 0
