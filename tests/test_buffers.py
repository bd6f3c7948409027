"""Buffer-spec parsing (no mpiexec needed: mpi4py runs as a singleton)."""
import numpy as np
import pytest
from mpi4py import MPI

from papcoll.buffers import parse_alltoall
from papcoll.errors import BufferSpecError

N = 3


def recv_of(spec):
    return parse_alltoall(MPI.IN_PLACE, spec, N)[1]


@pytest.mark.parametrize("spec,block,count", [
    (np.zeros(6, np.complex128), 32, 2),
    (np.zeros((3, 2), np.int32, order="F"), 8, 2),
    (bytearray(9), 3, 3),
    (memoryview(bytearray(9)), 3, 3),
    ([np.zeros(6, np.float64), MPI.DOUBLE], 16, 2),
    ([np.zeros(6, np.int32), "i"], 8, 2),
    ([np.zeros(7, np.float64), 2, MPI.DOUBLE], 16, 2),
    ([np.zeros(7, np.float64), (2, 1), MPI.DOUBLE], 16, 2),
    ([np.zeros(7, np.float64), 2, 1, MPI.DOUBLE], 16, 2),
    ([np.zeros(6, np.int32), 2], 8, 2),
    (np.zeros(0, np.int32), 0, 0),
    ([np.zeros(6, np.int32), MPI.INT.Create_contiguous(2).Commit()], 8, 1),
])
def test_accepted_specs(spec, block, count):
    recv = recv_of(spec)
    assert (recv.block, recv.count) == (block, count)
    assert recv.data.dtype == np.uint8 and recv.data.nbytes == N * block
    assert recv.data.flags.writeable


def test_displacement_selects_the_right_bytes():
    buf = np.arange(7, dtype=np.float64)
    recv = recv_of([buf, (2, 1), MPI.DOUBLE])
    assert recv.data.ctypes.data == buf.ctypes.data + 8
    assert np.array_equal(recv.data.view(np.float64), buf[1:7])


def test_fortran_order_keeps_memory_order():
    buf = np.asfortranarray(np.arange(6, dtype=np.int32).reshape(3, 2))
    recv = recv_of(buf)
    assert recv.data.ctypes.data == buf.ctypes.data
    assert np.array_equal(recv.data.view(np.int32), buf.ravel(order="F"))


def readonly():
    a = np.zeros(6, np.int32)
    a.flags.writeable = False
    return a


same = np.zeros(6, np.int32)


@pytest.mark.parametrize("send,recv,message", [
    (np.zeros(6, np.int32), np.zeros(7, np.int32), "not a whole number"),
    (np.zeros(6, np.int32), np.zeros(9, np.int32), "bytes per peer"),
    (np.zeros(6, np.int32), np.zeros(6, np.float32), "does not match"),
    (np.zeros(6, np.int32), np.zeros(12, np.int32)[::2], "not contiguous"),
    (np.zeros(6, np.int32), readonly(), "read-only"),
    (np.zeros(6, np.int32), bytes(24), "read-only"),
    (np.zeros(6, np.int32), [np.zeros(6, np.int32), 3, MPI.INT], "holds 24"),
    (np.zeros(6, np.int32), [np.zeros(6, np.int32), -1, MPI.INT], "must not be negative"),
    (np.zeros(6, np.int32), [np.zeros(6, np.int32), 1.5, MPI.INT], "must be an integer"),
    (np.zeros(6, np.int32), [np.zeros(6, np.int32), "nonsense"], "unknown MPI typecode"),
    (np.zeros(6, np.int32), [np.zeros(12, np.int32), MPI.INT.Create_vector(2, 1, 2).Commit()],
     "not contiguous bytes"),
    (np.zeros(6, np.int32), [np.zeros(6, np.int32), 1, 2, 3, 4], "2 to 4 items"),
    (5, np.zeros(6, np.int32), "expected a buffer"),
    (np.zeros(6, ">i4"), np.zeros(6, np.int32), "no MPI datatype"),
    (np.zeros(6, np.int32), MPI.IN_PLACE, "only valid as sendbuf"),
    (same, same, "overlap"),
])
def test_bad_specs_name_the_problem(send, recv, message):
    with pytest.raises(BufferSpecError, match=message):
        parse_alltoall(send, recv, N)


def test_in_place_has_no_send_message():
    send, recv = parse_alltoall(MPI.IN_PLACE, np.zeros(6, np.int32), N)
    assert send is None and recv.block == 8


def test_contiguous_derived_type_matches_its_base_type():
    pair = MPI.INT.Create_contiguous(2).Commit()
    send, recv = parse_alltoall([np.zeros(6, np.int32), pair], np.zeros(6, np.int32), N)
    assert send.block == recv.block == 8


def test_subarray_boxes_judge_overlap_as_the_bytes_do():
    """The receive blocks of a transpose (a subarray each, of one array) are judged by their
    boxes: the same verdict as marking every byte, on random boxes that do and do not meet,
    and no verdict where the boxes alone cannot tell."""
    from papcoll.vbuffers import _boxes, _coverage
    rng = np.random.default_rng(7)
    sizes = [6, 5, 4]
    made, verdicts = [], set()
    for trial in range(60):
        n = int(rng.integers(2, 5))
        types = []
        for _ in range(n):
            lo = [int(rng.integers(0, s)) for s in sizes]
            sub = [int(rng.integers(1, s - l + 1)) for s, l in zip(sizes, lo)]
            types.append(MPI.DOUBLE.Create_subarray(sizes, sub, lo,
                                                    order=[MPI.ORDER_C, MPI.ORDER_F][trial % 2]))
        types = [t.Commit() for t in types]
        made += types
        counts, starts = [1] * n, [8] * n
        boxed = _boxes(counts, starts, types)
        marked = _coverage(8 + 8 * 120, counts, starts, types)
        assert (boxed is None) == (marked is None), (boxed, marked)
        verdicts.add(boxed is None)
        if boxed is not None:        # the pair named shares a byte
            assert _coverage(8 + 8 * 120, [1, 1], [8, 8], [types[i] for i in boxed]) is not None
    assert verdicts == {True, False}
    a, b = made[:2]
    assert _boxes([1, 1], [0, 8], [a, b]) is False               # two starts
    assert _boxes([2, 1], [0, 0], [a, b]) is False               # a count of two
    vec = MPI.DOUBLE.Create_vector(2, 1, 3).Commit()
    assert _boxes([1, 1], [0, 0], [a, vec]) is False
    pair = MPI.DOUBLE.Create_contiguous(2).Commit()
    derived = pair.Create_subarray([4], [2], [0]).Commit()
    assert _boxes([1, 1], [0, 0], [derived, derived]) is False   # a derived element
    for t in made + [vec, pair, derived]:
        t.Free()


def test_datatypes_in_order_by_construction_are_what_mpi_packs():
    """A contiguous run of a predefined type and a whole-array subarray (either order) are
    judged in order without packing, as the pattern MPI packs says; a permuted type, or a run
    of one, is still packed and found out of order."""
    import papcoll.datatypes as D
    from papcoll.datatypes import _in_order_by_construction, _packs_in_order, verdict
    permuted = MPI.INT.Create_indexed([1, 1], [1, 0]).Commit()
    made = {
        "run": (MPI.DOUBLE.Create_contiguous(5).Commit(), True),
        "whole C": (MPI.INT.Create_subarray([3, 4], [3, 4], [0, 0]).Commit(), True),
        "whole F": (MPI.INT.Create_subarray([3, 4], [3, 4], [0, 0],
                                            order=MPI.ORDER_F).Commit(), True),
        "permuted run": (permuted.Create_contiguous(3).Commit(), False),
        "part": (MPI.INT.Create_subarray([3, 4], [2, 4], [1, 0]).Commit(), False),
    }
    for name, (datatype, by_construction) in made.items():
        assert _in_order_by_construction(datatype) == by_construction, name
        if by_construction:                 # the pattern's verdict agrees
            saved, D._in_order_by_construction = D._in_order_by_construction, lambda t: False
            try:
                assert _packs_in_order(datatype), name
            finally:
                D._in_order_by_construction = saved
    assert not verdict(made["permuted run"][0], "t").contiguous
    assert verdict(made["whole F"][0], "t").contiguous
    for datatype, _ in made.values():
        datatype.Free()
    permuted.Free()
