"""Cached plans (struct pc_plan, native/papcoll_plan.h): how the next calls of one shape run
in C, entered once per call (``papcoll._native.alltoall``, native/papcoll_call.c).

An algorithm that has fully checked a call may leave a :class:`Plan` for calls of its shape,
which serves that shape's blocking calls and requests; the Communicator's CallCache keeps
several per call site (callcache.py). What a plan's kinds run, and the shape rules, are said
once, in C."""
import ctypes as c
import functools
import os

import numpy as np
from mpi4py import MPI

from .. import _native
from .lib import address, lib, timeout_ns
from .loops import Copies, Sources, _Exchange
from .xport import XCallStruct

SEGMENT, ENGINE, MPI_ALLTOALL, HIER, MPIV, VAR, MPIW = 1, 2, 3, 4, 5, 6, 7     # PC_PLAN_*
MPI_STARTS = 2          # PC_MPI_STARTS: an MPI plan's start, which the algorithm makes
POSTED = (1 << 56) - 1             # PC_POSTED: a task's post, in a schedule's log
_p, _size, _u64 = c.c_void_p, c.c_size_t, c.c_uint64


class Step(c.Structure):              # struct pc_step
    _fields_ = [("sources", Sources), ("list", Copies)]


class Task(c.Structure):              # struct pc_task
    _fields_ = [("kind", _p), ("sched", _p), ("arg", _p), ("deps", c.c_uint32),
                ("subscribes", c.c_int)]


class Sched(c.Structure):             # struct pc_sched
    _fields_ = [("task", Task * 8), ("n", c.c_int), ("posted", c.c_uint32),
                ("done", c.c_uint32), ("failed", c.c_int), ("deadline", c.c_int64),
                ("events", _p), ("nevents", _size), ("max_events", _size)]


class HierStruct(c.Structure):        # struct pc_hier
    _fields_ = [("npost", _size), ("post_dst", _p), ("post_src", _p), ("own", _size),
                ("post", _p), ("local", c.POINTER(Step)), ("remote", c.POINTER(Step)),
                ("all_local", _p), ("all_remote", _p), ("reads", c.POINTER(Sources)),
                ("releases", c.POINTER(Sources)), ("pids", _p), ("acks", _p),
                ("ack_stride", _size), ("others", _p), ("masters", c.POINTER(XCallStruct)),
                ("done", _p), ("flags", _p), ("flag_stride", _size), ("start", _size),
                ("scatter_start", _size), ("node_at", _size), ("sig", _u64), ("send", _p),
                ("recv", _p), ("len", _size), ("block", _size), ("offset", _size),
                ("round", _u64), ("epoch", _u64), ("xepoch", _u64), ("adverts", _u64),
                ("address", _u64), ("sched", Sched), ("gathered", c.c_int)]


for _name, _args in [("pc_hier_start", [c.POINTER(HierStruct), _p, _p] + [_size] * 3
                      + [_u64] * 5),
                     ("pc_sched_run", [c.POINTER(Sched), c.c_int64]),
                     ("pc_sched_task", [c.POINTER(Sched), c.c_int, c.c_char_p, _p, c.c_uint32,
                                        c.c_int])]:
    getattr(lib, _name).restype, getattr(lib, _name).argtypes = c.c_int, _args


def schedule(h, tasks):
    """The tasks of the round ``h`` (a HierStruct), each (kind, the kinds it waits for, the
    kind whose per-source events it takes, or None), in order of dependence."""
    names = [kind for kind, _, _ in tasks]
    for i, (kind, after, takes) in enumerate(tasks):
        deps = sum(1 << names.index(d) for d in after)
        rc = lib.pc_sched_task(c.byref(h.sched), i, kind.encode(), c.addressof(h), deps,
                               -1 if takes is None else names.index(takes))
        if rc < 0:
            raise ValueError(f"schedule: task {i} ({kind}): {os.strerror(-rc)}")


def hier_start(h, *round):
    """pc_hier_start: begin a round of ``h`` (a HierStruct): send, recv, block, offset, len,
    round, epoch, address, xepoch, adverts. 0 or -errno."""
    return lib.pc_hier_start(c.byref(h), *round)


def hier_run(h, seconds):
    """pc_sched_run on ``h``'s schedule, for at most ``seconds``: 1 done, else < 0."""
    return lib.pc_sched_run(c.byref(h.sched), timeout_ns(seconds))


class VShape(c.Structure):           # struct pc_vshape
    _fields_ = [("nbytes", c.c_int64), ("itemsize", c.c_int64), ("format", c.c_char * 16),
                ("datatype", c.c_void_p), ("displs_given", c.c_int), ("counts", c.c_void_p),
                ("displs", c.c_void_p), ("icounts", c.c_void_p), ("idispls", c.c_void_p),
                ("mpi_type", c.c_ssize_t), ("datatypes", c.c_void_p), ("mpi_types", c.c_void_p),
                ("staging", c.c_void_p), ("bound", c.c_ssize_t), ("move_at", c.c_void_p),
                ("move_off", c.c_void_p), ("move_len", c.c_void_p), ("move_count", c.c_void_p),
                ("move_type", c.c_void_p)]


class PlanStruct(c.Structure):        # struct pc_plan
    _fields_ = [("kind", c.c_int), ("armed", c.c_int), ("nbytes", c.c_int64),
                ("itemsize", c.c_int64), ("format", c.c_char * 16), ("datatype", c.c_void_p),
                ("n", c.c_int64), ("timeout_ns", c.c_int64), ("slice_ns", c.c_int64),
                ("sig", c.c_uint64), ("epoch", c.c_void_p), ("x", c.POINTER(_Exchange)),
                ("start", c.c_size_t), ("calls", c.POINTER(XCallStruct) * 2),
                ("adverts", c.c_void_p), ("spare", c.c_void_p), ("comm", c.c_ssize_t),
                ("round", c.c_void_p), ("xepoch", c.c_void_p),
                ("rounds", c.POINTER(HierStruct) * 4), ("current", c.POINTER(HierStruct)),
                ("vshape", VShape * 2),
                ("unpack_to", c.c_void_p)]


class Plan:
    """A plan of ``kind`` for ``algorithm`` (whose ``plan_failed(plan, rc)`` finishes a call
    the plan returned rc < 0 for, or raises its error) among ``n`` processes. ``run(sendbuf,
    recvbuf)`` is a blocking call's entry: 1 done, 0 declined (nothing touched), < 0 left to the
    algorithm; ``start(sendbuf, recvbuf)`` a request's (:meth:`started`); ``probe(sendbuf,
    recvbuf)``: whether the plan takes the call, nothing run. ``parts``: what the struct points
    into (the loops; the engine's calls), kept alive here. ``pins``: the requests holding it
    (callcache.py)."""

    def __init__(self, algorithm, kind, n, parts=(), **fields):
        self.algorithm, self.parts = algorithm, parts
        self.s = PlanStruct(kind=kind, n=n, **fields)
        self.address = c.addressof(self.s)
        self.run = functools.partial(_native.alltoall, self.address)
        self.probe = functools.partial(_native.probe, self.address)
        self.pins = 0

    def start(self, sendbuf, recvbuf, kept=None):
        """A request's start of a call of this plan's shape (``kept``: a persistent
        request's :class:`~papcoll.algorithms.calls.Persistent`): what its algorithm's
        ``started`` makes of it (the op that Test and Wait move on), or None where the plan
        declines (disarmed since)."""
        rc = _native.start(self.address, sendbuf, recvbuf)
        return self.algorithm.started(self, rc, sendbuf, recvbuf, kept) if rc else None

    @classmethod
    def segment(cls, algorithm, loops, start, timeout, slice):
        """shm_pap's calls over the exchange of ``loops`` (a SegmentLoops serving every
        arrived peer per call), from ``start``, each at most ``timeout`` seconds."""
        if loops.batch != loops.n:
            raise ValueError("a plan needs loops that serve every arrived peer per call")
        return cls(algorithm, SEGMENT, loops.n, parts=loops, x=c.pointer(loops._plan),
                   epoch=c.addressof(loops.epoch), start=start,
                   timeout_ns=timeout_ns(timeout), slice_ns=timeout_ns(slice))

    @classmethod
    def engine(cls, algorithm, calls, counter, adverts, slice):
        """Copy-based PAP Direct over ``calls`` (the prepared XCall of each bank), counting
        calls in ``counter`` (a c_uint64: the Exchange's epoch; ``adverts``, its count of
        zero-copy calls); the engine runs ``slice`` seconds before the algorithm takes over."""
        plan = cls(algorithm, ENGINE, calls[0].xport.n, parts=calls,
                   epoch=c.addressof(counter), adverts=c.addressof(adverts),
                   slice_ns=timeout_ns(slice))
        for bank, call in enumerate(calls):
            plan.s.calls[bank] = c.pointer(call.s)
        return plan

    @classmethod
    def hier(cls, algorithm, rounds, n, counters, slice):
        """A hierarchical call's rounds (``rounds[epoch % 2 * 2 + round % 2]``: an object
        whose ``s`` is its HierStruct) among ``n`` processes, counted in ``counters`` (the
        board's epoch, the algorithm's round, its masters' calls and adverts: c_uint64s; the
        last two are read by a master's rounds only); a call runs ``slice`` seconds before the
        algorithm takes over (:meth:`resume`)."""
        epoch, round, xepoch, adverts = (c.addressof(counter) for counter in counters)
        plan = cls(algorithm, HIER, n, parts=(rounds, counters), epoch=epoch, round=round,
                   xepoch=xepoch, adverts=adverts, slice_ns=timeout_ns(slice))
        plan.rounds = rounds
        for i, r in enumerate(rounds):
            plan.s.rounds[i] = c.pointer(r.s)
        return plan

    @classmethod
    def alltoallv(cls, algorithm, sides, comm=None, calls=None, counter=None, adverts=None,
                  slice=0.0):
        """An Alltoallv plan: MPI_Alltoallv on ``comm``, or (``calls``: the prepared PC_VAR
        call of each bank, counting in ``counter`` and ``adverts`` as :meth:`engine`'s) the
        engine's, over the staging of a side that has one. ``sides``: the send and receive
        vbuffers.Blocks of the full path's check; their ``shape`` is (counts, displs as the
        spec gave them or None, datatype object named or None, MPI datatype) -- or, an
        Alltoallw's, lists of the datatype objects named and of the MPI datatypes, one per
        process."""
        shapes = [side.shape for side in sides]     # send's None: in place (MPI's only)
        w = isinstance(shapes[1][3], list)
        if calls is None:
            plan = cls(algorithm, MPIW if w else MPIV, comm.Get_size(), comm=comm.handle)
        else:
            plan = cls(algorithm, VAR, calls[0].xport.n, parts=calls,
                       epoch=c.addressof(counter), adverts=c.addressof(adverts),
                       slice_ns=timeout_ns(slice))
            for bank, call in enumerate(calls):
                plan.s.calls[bank] = c.pointer(call.s)
        plan.kept = []
        for side, shape in zip(plan.s.vshape, shapes):
            if shape is None:
                continue
            counts, displs, datatype, mpi_type = shape
            given = displs is not None
            displs = displs if given else np.concatenate(([0], np.cumsum(counts)[:-1]))
            arrays = [np.array(counts, np.int64), np.array(displs, np.int64),
                      np.array(counts, np.intc), np.array(displs, np.intc)]
            plan.kept += [*arrays, datatype]
            side.counts, side.displs, side.icounts, side.idispls = map(address, arrays)
            side.displs_given = given
            if w:
                objects = np.array([id(d) for d in datatype], np.uintp)
                handles = np.array([t.handle for t in mpi_type], np.uint64).view(np.intp)
                plan.kept += [objects, handles]
                side.datatypes, side.mpi_types = address(objects), address(handles)
            else:
                side.mpi_type = mpi_type.handle
                side.datatype = None if datatype is None else id(datatype)
        if calls is not None:
            for side, blocks in zip(plan.s.vshape, sides):
                plan.stage(side, blocks)
        return plan

    def stage(self, side, blocks):
        """The moves of a staged side (``blocks.moves``: its datatype, address in the
        buffer of the call being bound and count, per process) and the staging the engine
        moves instead, the plan's own."""
        if blocks.moves is None:
            return
        types, where, counts = zip(*blocks.moves)
        arrays = [np.array(where, np.int64), np.array(blocks.offset, np.int64),
                  np.array(blocks.length, np.int64), np.array(counts, np.intc),
                  np.array([t.handle for t in types], np.uint64).view(np.intp),
                  np.empty(int(blocks.length.sum()), np.uint8)]
        self.kept += [*arrays, types]
        (side.move_at, side.move_off, side.move_len, side.move_count, side.move_type,
         side.staging) = map(address, arrays)

    def bindv(self, sendbuf, recvbuf, sig=0):
        """Arm an Alltoallv plan for calls of the shape of this fully checked one."""
        return _native.bindv(self.address, sendbuf, recvbuf, sig)

    def resume(self, seconds):
        """Run on, for at most ``seconds``, the call this plan left: 1 done, else < 0 (a
        hierarchical plan's round, ``s.current``, says where it is)."""
        return _native.resume(self.address, timeout_ns(seconds))

    @classmethod
    def mpi(cls, algorithm, comm):
        """MPI_Alltoall on ``comm`` (counts are ints: blocks below 2 GiB)."""
        return cls(algorithm, MPI_ALLTOALL, comm.Get_size(), comm=comm.handle)

    def bind(self, sendbuf, recvbuf, recv, sig=0):
        """Arm for calls of the shape of this fully checked one (``recv``: its parsed receive
        side), of signature ``sig``: whether it took. A call of a form no plan takes leaves
        the plan as it was."""
        if not _native.bind(self.address, sendbuf, recvbuf, recv.datatype, sig):
            return False
        self.datatype = recv.datatype       # compared by identity: its id stays its own
        if self.s.kind == ENGINE:
            self.spare = np.empty(self.s.nbytes, np.uint8)
            self.s.spare = address(self.spare)
        return True

    def disarm(self):
        self.s.armed = 0


_native.set_in_place(MPI.IN_PLACE)
