"""Every registered algorithm against MPI_Alltoall: N = 1..5, emulated node sizes 1, 2, 3, N."""
import pytest

import papcoll
from papcoll.node.cma import cma_status


def cma_available():
    return cma_status().startswith("CMA: available")


INTRA = {"shm_pap", "cma_pap"}
HIERARCHICAL = {"shm_direct", "pap_shm_direct"}
CASES = sorted({(n, k) for n in range(1, 6) for k in (1, 2, 3, n) if k <= n})


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs,node_size", CASES, ids=[f"N{n}-node{k}" for n, k in CASES])
def test_matches_mpi_alltoall(run_mpi, nprocs, node_size):
    res = run_mpi(nprocs, "matrix.py", env={"PAPCOLL_NODE_SIZE": str(node_size)})
    failed = "\n".join(line for line in res.stdout.splitlines() if " FAILED: " in line)
    assert res.returncode == 0, f"{failed}\n...\n{res.stdout[-6000:]}"
    for name in papcoll.algorithms:
        skipped = f"SKIP {name}:" in res.stdout
        # Only the topology excuses an algorithm -- an intra-node one across nodes, a
        # hierarchical one on one node -- or CMA being unavailable on this machine, as this
        # process finds it too.
        excused = ((name in INTRA and node_size < nprocs) or (name in HIERARCHICAL and
                                                                node_size >= nprocs)
                   or (name == "cma_pap" and not cma_available()))
        assert f"PASS {name}:" in res.stdout or (skipped and excused), res.stdout[-3000:]
    assert "PASS mixed" in res.stdout


@pytest.mark.mpi
@pytest.mark.parametrize("broken", ["broken_misroute", "broken_stale", "broken_in_place"])
def test_harness_catches_broken_algorithm(run_mpi, broken):
    """The harness itself: a deliberately wrong algorithm must fail it, with a decoded reason."""
    res = run_mpi(3, "matrix.py", broken, env={"PAPCOLL_TEST_BROKEN": "1"})
    assert res.returncode != 0, res.stdout[-3000:]
    assert f"AssertionError: {broken}" in res.stdout, res.stdout[-3000:]
