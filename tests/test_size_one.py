"""A communicator of one process (MPI.COMM_SELF; no mpiexec: mpi4py runs as a singleton): a
repeated call enters C once, through the plan its first call left (MPI's own call, which on
one process is the copy), and every call delivers what MPI's own call on the same inputs
does -- IN_PLACE and a datatype with a permuted typemap included -- while ``chosen`` names the
algorithm the call resolved, not ``mpi``."""
import numpy as np
import pytest
from mpi4py import MPI

import papcoll

PERMUTED = MPI.INT.Create_indexed([1, 1], [1, 0]).Commit()     # contiguous extent, swapped
# IN_PLACE_V: no Alltoallv/w plan takes MPI.IN_PLACE (native/papcoll_callv.c), at any size: those
# calls take the full path every time, and are checked here for their results only.


@pytest.fixture
def pc():
    with papcoll.Communicator(MPI.COMM_SELF) as pc:
        yield pc


def repeated(pc, call, fresh, algorithm, calls=5):
    """``call`` on fresh inputs ``calls`` times, each against MPI's own on a copy of them;
    returns the cache's hits over the repeats."""
    hits = first = None
    for i in range(calls):
        mine, theirs = fresh(i), fresh(i)
        call(pc, *mine, algorithm)
        call(MPI.COMM_SELF, *theirs, None)
        for a, b in zip(mine, theirs):
            assert np.array_equal(a, b), (i, a, b)
        if i == 0:
            hits, first = pc._ctx.cache.hits, pc.chosen
        assert pc.chosen == first          # a hit names what the first call resolved
        if algorithm not in (None, "auto"):
            assert pc.chosen == algorithm
    return pc._ctx.cache.hits - hits


def run(comm, name, send, recv, algorithm):
    kw = {} if comm is MPI.COMM_SELF else {"algorithm": algorithm}
    getattr(comm, name)(send, recv, **kw)


def data(i, n=6, dtype=np.int32):
    send = (np.arange(n) + 100 * i + 7).astype(dtype)
    return send, np.full(n, -1, dtype)


@pytest.mark.parametrize("algorithm", [None, "auto", "mpi", "pap_direct"])
def test_alltoall_enters_c_once_and_matches_mpi(pc, algorithm):
    def call(comm, send, recv, algo):
        run(comm, "Alltoall", send, recv, algo)
    assert repeated(pc, call, lambda i: data(i, 1, np.int64), algorithm) == 4    # 8 B

    def in_place(comm, recv, algo):
        run(comm, "Alltoall", MPI.IN_PLACE, recv, algo)
    assert repeated(pc, in_place, lambda i: (data(i)[0],), algorithm) == 4

    def typed(comm, send, recv, algo):
        run(comm, "Alltoall", [send, MPI.DOUBLE], [recv, MPI.DOUBLE], algo)
    assert repeated(pc, typed, lambda i: data(i, 3, np.float64), algorithm) == 4
    if algorithm not in (None, "auto"):
        assert pc.chosen == algorithm


@pytest.mark.parametrize("algorithm", [None, "mpi", "pap_direct"])
def test_alltoallv_enters_c_once_and_matches_mpi(pc, algorithm):
    def call(comm, send, recv, algo):
        run(comm, "Alltoallv", [send, ([4], [1])], [recv, ([4], [2])], algo)
    assert repeated(pc, call, data, algorithm) == 4

    def in_place(comm, recv, algo):
        run(comm, "Alltoallv", MPI.IN_PLACE, [recv, ([4], [1]), MPI.INT], algo)
    repeated(pc, in_place, lambda i: (data(i)[0],), algorithm)      # see IN_PLACE_V below
    if algorithm is not None:
        assert pc.chosen == algorithm


# Open MPI 5.0.11's own MPI_Alltoallw on one process moves nothing to the byte displacements it
# is given and writes past the buffer instead (heap corruption, then an abort): there papcoll
# copies itself unless told "mpi" (no plan), and these calls are checked against the typemaps,
# not against MPI. Other MPIs' own call is the copy, and leaves its plan, as Alltoallv's.
OPEN_MPI = "Open MPI" in MPI.Get_library_version()


def typemapped(spec):
    """The int positions a ``[buf, [count], [displacement], [datatype]]`` side names, in the
    order MPI packs them (PERMUTED: each pair swapped)."""
    (count,), (displacement,), (datatype,) = spec[1:]
    unit = [1, 0] if datatype is PERMUTED else [0]
    return [displacement // 4 + len(unit) * k + u for k in range(count) for u in unit]


@pytest.mark.parametrize("algorithm", [None, "auto", "pap_direct", pytest.param(
    "mpi", marks=pytest.mark.skipif(OPEN_MPI, reason="Open MPI 5.0.11's MPI_Alltoallw on one "
                                                     "process writes past the buffer"))])
def test_alltoallw_matches_the_typemaps(pc, algorithm):
    for side in ("plain", "send", "recv", "both"):
        hits = pc._ctx.cache.hits
        for i in range(5):
            send, recv = data(i, 8)
            s, r = ([buf, [2], [disp], [PERMUTED]] if side in (which, "both")
                    else [buf, [4], [disp], [MPI.INT]]                      # 16 bytes either way
                    for buf, disp, which in ((send, 4, "send"), (recv, 8, "recv")))
            want = recv.copy()
            want[typemapped(r)] = send[typemapped(s)]
            run(pc, "Alltoallw", s, r, algorithm)
            assert np.array_equal(recv, want), (side, i, recv, want)
        # MPI's own call leaves a plan: under Open MPI only when named (above)
        assert pc._ctx.cache.hits - hits == (4 if algorithm == "mpi" or not OPEN_MPI else 0), side
    recv = data(0, 8)[0]
    want = recv.copy()             # IN_PLACE on one process: my block to myself, unchanged
    run(pc, "Alltoallw", MPI.IN_PLACE, [recv, [3], [4], [PERMUTED]], algorithm)
    assert np.array_equal(recv, want), (recv, want)
    assert pc.chosen == ("mpi" if algorithm in (None, "auto") else algorithm)   # the policy's


def test_chosen_names_the_resolved_algorithm_on_a_hit(pc):
    send, recv = data(0)
    for _ in range(3):
        pc.Alltoall(send, recv, algorithm="pap_direct")
        assert pc.chosen == "pap_direct"
        pc.Alltoall(send, recv, algorithm="mpi")
        assert pc.chosen == "mpi"
    assert pc._ctx.cache.hits >= 4
