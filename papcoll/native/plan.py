"""Cached plans (struct pc_plan, native/papcoll_plan.h): how the next calls of one shape run
in C, entered once per call (``papcoll._native.alltoall``, native/papcoll_call.c).

An algorithm that has fully checked a call may leave a :class:`Plan` for calls of its shape,
which serves that shape's blocking calls and requests; the Communicator's CallCache keeps
several per call site (callcache.py). What a plan's kinds run, and the shape rules, are said
once, in C."""
import functools

import numpy as np
from mpi4py import MPI

from .. import _native

SEGMENT, ENGINE, MPI_ALLTOALL, HIER, MPIV, VAR, MPIW = 1, 2, 3, 4, 5, 6, 7     # PC_PLAN_*
MPI_STARTS = 2          # PC_MPI_STARTS: an MPI plan's start, which the algorithm makes
POSTED = (1 << 56) - 1             # PC_POSTED: a task's post, in a schedule's log
Hier, Step = _native.Hier, _native.Step


def schedule(h, tasks):
    """The tasks of the round ``h`` (a Hier), each (kind, the kinds it waits for, the kind
    whose per-source events it takes, or None), in order of dependence."""
    names = [kind for kind, _, _ in tasks]
    for i, (kind, after, takes) in enumerate(tasks):
        h.task(i, kind, sum(1 << names.index(d) for d in after),
               -1 if takes is None else names.index(takes))


class Plan:
    """A plan of ``kind`` for ``algorithm`` (whose ``plan_failed(plan, rc)`` finishes a call
    the plan returned rc < 0 for, or raises its error) among ``n`` processes. ``run(sendbuf,
    recvbuf)`` is a blocking call's entry: 1 done, 0 declined (nothing touched), < 0 left to the
    algorithm; ``start(sendbuf, recvbuf)`` a request's (:meth:`started`); ``probe(sendbuf,
    recvbuf)``: whether the plan takes the call, nothing run. ``s``: its struct (a
    papcoll._native.Plan, which holds what it points into); ``parts``: the loops or the
    engine's calls it runs. ``pins``: the requests holding it (callcache.py)."""

    def __init__(self, algorithm, kind, n, parts=(), **fields):
        self.algorithm, self.parts = algorithm, parts
        self.s = _native.Plan(kind=kind, n=n, **fields)
        self.run = functools.partial(_native.alltoall, self.s)
        self.probe = functools.partial(_native.probe, self.s)
        self.pins = 0

    def start(self, sendbuf, recvbuf, kept=None):
        """A request's start of a call of this plan's shape (``kept``: a persistent
        request's :class:`~papcoll.algorithms.calls.Persistent`): what its algorithm's
        ``started`` makes of it (the op that Test and Wait move on), or None where the plan
        declines (disarmed since)."""
        rc = _native.start(self.s, sendbuf, recvbuf)
        return self.algorithm.started(self, rc, sendbuf, recvbuf, kept) if rc else None

    @classmethod
    def segment(cls, algorithm, loops, start, timeout, slice):
        """shm_pap's calls over the exchange of ``loops`` (a SegmentLoops serving every
        arrived peer per call), from ``start``, each at most ``timeout`` seconds."""
        if loops.batch != loops.n:
            raise ValueError("a plan needs loops that serve every arrived peer per call")
        return cls(algorithm, SEGMENT, loops.n, parts=loops, x=loops.x, epoch=loops.epoch,
                   start=start, timeout=timeout, slice=slice)

    @classmethod
    def engine(cls, algorithm, calls, counter, adverts, slice, **zero_copy):
        """PAP Direct over ``calls`` (the prepared XCall of each bank), counting calls in
        ``counter`` (a lib.counter: the Exchange's epoch; ``adverts``, its count of zero-copy
        calls); the engine runs ``slice`` seconds before the algorithm takes over. Calls of a
        zero-copy scheme are a persistent request's, on the buffers ``zero_copy`` names
        (struct pc_plan's fields: algorithms/plans.persistent)."""
        return cls(algorithm, ENGINE, calls[0].s.x.n, parts=calls, epoch=counter,
                   adverts=adverts, slice=slice, calls=[call.s for call in calls], **zero_copy)

    @classmethod
    def hier(cls, algorithm, rounds, n, counters, slice):
        """A hierarchical call's rounds (``rounds[epoch % 2 * 2 + round % 2]``: an object
        whose ``s`` is its Hier) among ``n`` processes, counted in ``counters`` (the
        board's epoch, the algorithm's round, its masters' calls and adverts: lib.counters; the
        last two are read by a master's rounds only); a call runs ``slice`` seconds before the
        algorithm takes over (:meth:`resume`)."""
        epoch, round, xepoch, adverts = counters
        plan = cls(algorithm, HIER, n, parts=rounds, epoch=epoch, round=round, xepoch=xepoch,
                   adverts=adverts, slice=slice, rounds=[r.s for r in rounds])
        plan.rounds = rounds
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
            plan = cls(algorithm, MPIW if w else MPIV, comm.Get_size(), comm=comm)
        else:
            plan = cls(algorithm, VAR, calls[0].s.x.n, parts=calls, epoch=counter,
                       adverts=adverts, slice=slice, calls=[call.s for call in calls])
        for side, shape in zip(plan.s.vshape, shapes):
            if shape is None:
                continue
            counts, displs, datatype, mpi_type = shape
            given = displs is not None
            displs = displs if given else np.concatenate(([0], np.cumsum(counts)[:-1]))
            side.counts, side.displs, side.icounts, side.idispls = (
                np.array(counts, np.int64), np.array(displs, np.int64),
                np.array(counts, np.intc), np.array(displs, np.intc))
            side.displs_given = given
            if w:
                side.datatypes, side.mpi_types = datatype, mpi_type
            else:
                side.mpi_type, side.datatype = mpi_type, datatype
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
        (side.move_at, side.move_off, side.move_len, side.move_count, side.move_type,
         side.staging) = (np.array(where, np.int64), np.array(blocks.offset, np.int64),
                          np.array(blocks.length, np.int64), np.array(counts, np.intc), types,
                          np.empty(int(blocks.length.sum()), np.uint8))

    def bindv(self, sendbuf, recvbuf, sig=0):
        """Arm an Alltoallv plan for calls of the shape of this fully checked one."""
        return _native.bindv(self.s, sendbuf, recvbuf, sig)

    def resume(self, seconds):
        """Run on, for at most ``seconds``, the call this plan left: 1 done, else < 0 (a
        hierarchical plan's round, ``s.current``, says where it is)."""
        return _native.resume(self.s, seconds)

    @classmethod
    def mpi(cls, algorithm, comm):
        """MPI_Alltoall on ``comm`` (counts are ints: blocks below 2 GiB)."""
        return cls(algorithm, MPI_ALLTOALL, comm.Get_size(), comm=comm)

    def bind(self, sendbuf, recvbuf, recv, sig=0):
        """Arm for calls of the shape of this fully checked one (``recv``: its parsed receive
        side), of signature ``sig``: whether it took. A call of a form no plan takes leaves
        the plan as it was."""
        if not _native.bind(self.s, sendbuf, recvbuf, recv.datatype, sig):
            return False
        self.datatype = recv.datatype       # compared by identity: its id stays its own
        if self.s.kind == ENGINE and not self.s.recv_at:    # copy-based, not zero-copy
            self.s.spare = np.empty(self.s.nbytes, np.uint8)
        return True

    def disarm(self):
        self.s.armed = 0


_native.set_in_place(MPI.IN_PLACE)
