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


@pytest.mark.parametrize("algorithm", [None, "mpi", "pap_direct"])
def test_alltoallw_enters_c_once_and_matches_mpi(pc, algorithm):
    def permuted(side):
        def call(comm, send, recv, algo):
            s, r = ([buf, [2], [disp], [PERMUTED]] if side in (which, "both")
                    else [buf, [4], [disp], [MPI.INT]]                      # 16 bytes either way
                    for buf, disp, which in ((send, 4, "send"), (recv, 8, "recv")))
            run(comm, "Alltoallw", s, r, algo)
        return call
    for side in ("plain", "send", "recv", "both"):
        assert repeated(pc, permuted(side), lambda i: data(i, 8), algorithm) == 4, side

    def in_place(comm, recv, algo):
        run(comm, "Alltoallw", MPI.IN_PLACE, [recv, [3], [4], [PERMUTED]], algo)
    repeated(pc, in_place, lambda i: (data(i, 8)[0],), algorithm)   # see IN_PLACE_V below
    if algorithm is not None:
        assert pc.chosen == algorithm


def test_chosen_names_the_resolved_algorithm_on_a_hit(pc):
    send, recv = data(0)
    for _ in range(3):
        pc.Alltoall(send, recv, algorithm="pap_direct")
        assert pc.chosen == "pap_direct"
        pc.Alltoall(send, recv, algorithm="mpi")
        assert pc.chosen == "mpi"
    assert pc._ctx.cache.hits >= 4
