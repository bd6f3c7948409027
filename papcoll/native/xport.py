"""Bindings of the native one-sided transports and engine (native/papcoll_xport.h): the structs
Python fills at set-up, and the calls. The transports (transport/) fill a :class:`XPort` with
their MPI handles or verbs objects; the algorithms (algorithms/onesided.py) run a call as an
:class:`XCall`. What the fields mean is said once, in the header."""
import ctypes as c
import os
import weakref

import numpy as np

from .. import _native
from .lib import address, lib, timeout_ns

PC_VERBS, PC_MPI, PC_LOOP = 1, 2, 3
ADVERT, DATA = 0, 1
TO_ADVERTS, TO_INBOX, TO_EXPOSED = 0, 1, 2
COPY, ZCOPY, STEP, ORDER, VAR = 1, 2, 3, 4, 5
SEEN, SENT, RECEIVED, GATHERED = 0, 1, 2, 3
IN_NOTICE, IN_ADVERT, IN_HEADER, IN_GATE = 1, 2, 3, 4

_p, _u64, _u32, _size, _int, _iptr = (c.c_void_p, c.c_uint64, c.c_uint32, c.c_size_t, c.c_int,
                                      c.c_ssize_t)


class VPeer(c.Structure):
    _fields_ = [("qp", _p), ("boards", _p), ("adverts_addr", _u64), ("inbox_addr", _u64),
                ("adverts_rkey", _u32), ("inbox_rkey", _u32), ("qp_num", _u32),
                ("posted", _u32), ("unsignaled", _u32)]


class XPortStruct(c.Structure):
    _fields_ = [("kind", _int), ("n", _size), ("me", _size), ("boards", _p), ("peers", _p),
                ("send_cq", _p), ("recv_cq", _p), ("scratch", _u64), ("scratch_lkey", _u32),
                ("depth", _u32), ("qp_order", _p), ("mpi", _p), ("inbox_bytes", _p),
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
                ("failed_len", _u32), ("via_inbox", _p), ("advertise", _p), ("expect_len", _p),
                ("record_epoch", _u64), ("notice_only", _int)]


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
lib.pc_xcall_advert.restype, lib.pc_xcall_advert.argtypes = None, [_XC, _size, _u64, _u64,
                                                                    _u32]
lib.pc_mpi_open.restype, lib.pc_mpi_open.argtypes = _int, [_X, *[_iptr] * 4, _size, _size]
lib.pc_xport_close.restype, lib.pc_xport_close.argtypes = _int, [_X, c.c_int64]
lib.pc_mpi_forget.restype, lib.pc_mpi_forget.argtypes = None, [_X]


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

    def open_mpi(self, comm, win, inbox_win, dyn, adverts_at, inbox_at):
        """pc_mpi_open over these mpi4py objects (their handles), freed with this XPort."""
        if lib.pc_mpi_open(self.ptr, comm.handle, win.handle, inbox_win.handle, dyn.handle,
                           adverts_at, inbox_at):
            raise MemoryError("mpi-rma: no memory for the transport's requests")
        # No MPI call; and not at exit, where papcoll's own close (api.py) still completes the
        # calls in flight through this struct, after weakref's exit hook has run.
        self._forget = weakref.finalize(self, lib.pc_mpi_forget, self.ptr)
        self._forget.atexit = False

    def close(self, wait=0.0):
        """pc_xport_close, before the transport frees what the struct points to: every later
        call through it, or through a call or plan over it, returns -EBADF. MPI's requests
        still in flight are tested for ``wait`` seconds, then left to MPI (their memory
        kept): whether all completed."""
        rc = lib.pc_xport_close(self.ptr, timeout_ns(wait))
        if hasattr(self, "_forget"):
            self._forget.detach()
        self.keep = []
        return rc == 0

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


def advert(call, address, nbytes, rkey, record=0):
    """pc_xcall_advert: the call's advert record (the ``record``-th: VAR's are per peer), for
    my receive buffer (an exposed one) or the region of it a peer's block goes to."""
    lib.pc_xcall_advert(c.byref(call), record, address, nbytes, rkey)


def arrived(call, peer):
    """pc_xcall_arrived: 1 if ``peer``'s arrival signal for ``call`` is here, after a poll;
    0 if not; a poll's -errno."""
    return lib.pc_xcall_arrived(c.byref(call), peer)




class IbvQpHead(c.Structure):
    """struct pc_ibv_qp: the head of libibverbs' struct ibv_qp, in this machine's byte order."""
    _fields_ = [("context", _p), ("qp_context", _p), ("pd", _p), ("send_cq", _p),
                ("recv_cq", _p), ("srq", _p), ("handle", _u32), ("qp_num", _u32),
                ("state", _u32), ("qp_type", _u32)]


IBV_QPT_RC = 2


def ibv_qp(qp, qp_num, words=48):
    """The struct ibv_qp * of a pyverbs QP, as (qp, send_cq, recv_cq) addresses: its ``qp``
    accessor where pyverbs has one (rdma-core 61 added it), else a scan of the object's first
    ``words`` words (Debian's pyverbs 44 keeps the pointer private). Either way the answer must
    be an ibv_qp of this ``qp_num``, of type RC, with both CQs; candidates are read with
    process_vm_readv on this very process, so a word that is no pointer cannot crash it."""
    accessor = getattr(qp, "qp", None)
    if isinstance(accessor, int):
        candidates = [accessor]
    else:
        candidates = np.zeros(words, np.uintp)
        if _native.cma_copy(os.getpid(), candidates, id(qp), False) != candidates.nbytes:
            raise OSError("cannot read the pyverbs QP object")
        candidates = candidates.tolist()
    head, size = IbvQpHead(), c.sizeof(IbvQpHead)
    for word in candidates:
        if word < 4096 or word % c.alignment(IbvQpHead):
            continue
        if _native.cma_copy(os.getpid(), head, word, False) != size:
            continue
        if (head.qp_num == qp_num and head.qp_type == IBV_QPT_RC and head.context
                and head.send_cq and head.recv_cq):
            return word, head.send_cq, head.recv_cq
    raise OSError(f"no struct ibv_qp of QP number {qp_num} found in the pyverbs QP object")


def inbox_slot(bank, n, q, slot):
    """Where in an inbox of ``n`` slots of ``slot`` bytes per bank the block from process ``q``
    lands in ``bank`` (native pc_inbox_slot, the inbox's one layout); ``q`` an int or an
    array of them."""
    if np.ndim(q):
        return np.array([_native.inbox_slot(bank, n, int(p), slot) for p in q], np.uint64)
    return _native.inbox_slot(bank, n, q, slot)
