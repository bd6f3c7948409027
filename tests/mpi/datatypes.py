"""MPI worker for tests/test_datatypes.py: ``datatypes.py permuted|uncommitted ALGORITHM``.

permuted: datatypes whose bytes are contiguous but whose typemap is not in order (an indexed
    type of two ints swapped: lb 0, size = extent = true extent) through Alltoallw, Alltoallv,
    Ialltoallw and Alltoallw_init, against MPI's own calls on the same inputs; then the same
    after a contiguous type was freed and a permuted one made (MPI may give it the freed
    handle: a verdict kept by handle would take it for contiguous). Alltoall refuses a permuted
    type (it moves contiguous bytes only). Prints PERMUTED ok.
uncommitted: a datatype not committed is a BufferSpecError on every rank before any byte
    moves, in Alltoall, Alltoallv, Alltoallw and their requests; so is a datatype object used
    again after its Free (a plan made for it must not serve it, even once another datatype has
    its old handle); a correct call follows on the same Communicator. Prints UNCOMMITTED ok.
"""
import sys
import time

import numpy as np
from mpi4py import MPI

import papcoll
from papcoll.errors import BufferSpecError

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
mode, algorithm = sys.argv[1], sys.argv[2]
PAIRS = 3            # permuted pairs per block


def values(src, dst, n):
    """Ints that say their source, destination and index."""
    return (src * 1_000_000 + dst * 10_000 + np.arange(n)).astype(np.int32)


def send_buffer():
    return np.concatenate([values(rank, q, 2 * PAIRS) for q in range(size)])


def w_specs(buf, datatype, count):
    """Every peer's block: ``count`` x ``datatype`` at consecutive byte displacements."""
    step = 2 * PAIRS * 4
    return [buf, ([count] * size, [step * q for q in range(size)]), [datatype] * size]


def compare(run, reference, out, expected, what):
    out[:] = -1
    expected[:] = -1
    reference()
    run()
    assert np.array_equal(out, expected), (what, rank, out, expected)
    in_order = np.concatenate([values(q, rank, 2 * PAIRS) for q in range(size)])
    assert np.array_equal(expected, in_order) == what.endswith("both"), "permuted on one side"


def permuted_calls(pc, swapped, label):
    send = send_buffer()
    out, expected = np.empty((2, 2 * PAIRS * size), np.int32)
    for side in ("send", "recv", "both"):
        stype = swapped if side in ("send", "both") else MPI.INT
        rtype = swapped if side in ("recv", "both") else MPI.INT
        scount, rcount = (PAIRS if t is swapped else 2 * PAIRS for t in (stype, rtype))
        sw, rw = w_specs(send, stype, scount), w_specs(out, rtype, rcount)
        ew = w_specs(expected, rtype, rcount)
        what = f"{label} {side}"
        compare(lambda: pc.Alltoallw(sw, rw, algorithm=algorithm),
                lambda: world.Alltoallw(sw, ew), out, expected, f"Alltoallw {what}")
        hits = pc._ctx.cache.hits
        for late in (0, 0.05):    # the plan's calls (packing, unpacking): one on time, one
            compare(lambda: (rank == 0 and time.sleep(late),     # whose wait outlasts the
                             pc.Alltoallw(sw, rw, algorithm=algorithm)),   # slice in C
                    lambda: world.Alltoallw(sw, ew), out, expected, f"planned Alltoallw {what}")
        # one process under Open MPI: papcoll's own copy, no plan (api.py)
        planned = size > 1 or algorithm == "mpi" or "Open MPI" not in MPI.Get_library_version()
        assert pc._ctx.cache.hits == hits + 2 * planned, (what, hits, pc._ctx.cache.hits)
        compare(lambda: pc.Ialltoallw(sw, rw, algorithm=algorithm).Wait(),
                lambda: world.Alltoallw(sw, ew), out, expected, f"Ialltoallw {what}")
        request = pc.Alltoallw_init(sw, rw, algorithm=algorithm)
        for _ in range(2):
            compare(lambda: (request.Start(), request.Wait()),
                    lambda: world.Alltoallw(sw, ew), out, expected, f"Alltoallw_init {what}")
        request.Free()
        sv = [send, [scount] * size, [q * scount for q in range(size)], stype]
        rv = [out, [rcount] * size, [q * rcount for q in range(size)], rtype]
        ev = [expected, [rcount] * size, [q * rcount for q in range(size)], rtype]
        compare(lambda: pc.Alltoallv(sv, rv, algorithm=algorithm),
                lambda: world.Alltoallv(sv, ev), out, expected, f"Alltoallv {what}")
    try:
        pc.Alltoall([send, PAIRS, swapped], [out, PAIRS, swapped])
    except BufferSpecError as err:
        assert "not contiguous" in str(err), str(err)
    else:
        raise AssertionError("Alltoall took a permuted datatype")


def run_permuted():
    with papcoll.Communicator(world) as pc:
        swapped = MPI.INT.Create_indexed([1, 1], [1, 0]).Commit()
        permuted_calls(pc, swapped, "permuted")
        swapped.Free()
        # A contiguous type used (its verdict kept), freed, and a permuted one made after it.
        plain = MPI.INT.Create_contiguous(2).Commit()
        send = send_buffer()
        out = np.empty(2 * PAIRS * size, np.int32)
        pc.Alltoallw(w_specs(send, plain, PAIRS), w_specs(out, plain, PAIRS), algorithm=algorithm)
        assert np.array_equal(out, np.concatenate([values(q, rank, 2 * PAIRS)
                                                   for q in range(size)])), out
        # The same counts and displacements with a live permuted type of the same extents:
        # the plan made for the contiguous one must decline it.
        other = MPI.INT.Create_indexed([1, 1], [1, 0]).Commit()
        hits, expected = pc._ctx.cache.hits, np.empty_like(out)
        world.Alltoallw(w_specs(send, other, PAIRS), w_specs(expected, plain, PAIRS))
        pc.Alltoallw(w_specs(send, other, PAIRS), w_specs(out, plain, PAIRS), algorithm=algorithm)
        assert np.array_equal(out, expected) and pc._ctx.cache.hits == hits, (out, expected)
        other.Free()
        handle = plain.handle
        plain.Free()
        swapped = MPI.INT.Create_indexed([1, 1], [1, 0]).Commit()
        permuted_calls(pc, swapped, f"reused handle {swapped.handle == handle}")
        swapped.Free()
    print("PERMUTED ok", flush=True)


def refused(call):
    try:
        call()
    except BufferSpecError as err:
        assert "not committed" in str(err), str(err)
        return
    raise AssertionError("an uncommitted datatype was taken")


def run_uncommitted():
    with papcoll.Communicator(world) as pc:
        loose = MPI.INT.Create_contiguous(2)             # contiguous, but never committed
        strided = MPI.INT.Create_vector(2, 1, 2)         # strided, never committed
        send = send_buffer()
        out = np.empty(2 * PAIRS * size, np.int32)
        for t in (loose, strided):
            span = t.Get_extent()[1]
            count = 2 * PAIRS * 4 // span
            refused(lambda: pc.Alltoallw(w_specs(send, t, count), w_specs(out, MPI.INT, count),
                                         algorithm=algorithm))
            refused(lambda: pc.Alltoallw(w_specs(send, MPI.INT, 2 * PAIRS),
                                         w_specs(out, t, count), algorithm=algorithm))
            refused(lambda: pc.Alltoallw_init(w_specs(send, t, count),
                                              w_specs(out, MPI.INT, count), algorithm=algorithm))
            refused(lambda: pc.Alltoallv([send, count, t], [out, count, t], algorithm=algorithm))
            refused(lambda: pc.Ialltoallv([send, count, t], [out, count, t],
                                          algorithm=algorithm))
        refused(lambda: pc.Alltoall([send, PAIRS, loose], [out, PAIRS, loose],
                                    algorithm=algorithm))
        refused(lambda: pc.Alltoall_init([send, PAIRS, loose], [out, PAIRS, loose],
                                         algorithm=algorithm))
        loose.Free(), strided.Free()
        pair = MPI.INT.Create_contiguous(2).Commit()
        for _ in range(3):                              # the full path, then its plan
            pc.Alltoallw(w_specs(send, pair, PAIRS), w_specs(out, pair, PAIRS),
                         algorithm=algorithm)
        pair.Free()                                     # the object is DATATYPE_NULL now
        swapped = MPI.INT.Create_indexed([1, 1], [1, 0]).Commit()   # may get its handle
        try:
            pc.Alltoallw(w_specs(send, pair, PAIRS), w_specs(out, pair, PAIRS),
                         algorithm=algorithm)
        except BufferSpecError as err:
            assert "DATATYPE_NULL" in str(err), str(err)
        else:
            raise AssertionError("a freed datatype object was taken")
        swapped.Free()
        pc.Alltoallw(w_specs(send, MPI.INT, 2 * PAIRS), w_specs(out, MPI.INT, 2 * PAIRS),
                     algorithm=algorithm)
        assert np.array_equal(out, np.concatenate([values(q, rank, 2 * PAIRS)
                                                   for q in range(size)])), out
    print("UNCOMMITTED ok", flush=True)


{"permuted": run_permuted, "uncommitted": run_uncommitted}[mode]()
