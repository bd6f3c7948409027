"""Alltoallv and Alltoallw (papcoll.Communicator), against MPI's own on the same inputs
(tests/mpi/vcalls.py says what each mode checks)."""
import re

import pytest

SLOT = {"PAPCOLL_COPY_THRESHOLD": "4096"}    # blocks on both sides of pap_direct's slot


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs,node_size", [(1, 1), (2, 1), (3, 2), (4, 3), (5, 2), (5, 1)])
def test_alltoallv_matches_mpi(run_mpi, nprocs, node_size):
    res = run_mpi(nprocs, "vcalls.py", "v", "pap_direct", 40,
                  env={**SLOT, "PAPCOLL_NODE_SIZE": str(node_size)}, timeout=240)
    assert res.returncode == 0, res.stdout[-4000:]
    assert res.stdout.count("V ok 40") == nprocs, res.stdout[-4000:]


@pytest.mark.mpi
@pytest.mark.parametrize("algorithm", ["mpi", "auto"])
def test_alltoallv_by_mpi_and_by_the_policy(run_mpi, algorithm):
    res = run_mpi(3, "vcalls.py", "v", algorithm, 20, env=SLOT, timeout=240)
    assert res.returncode == 0, res.stdout[-4000:]
    assert res.stdout.count("V ok 20") == 3, res.stdout[-4000:]


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs,node_size,algorithm", [
    (1, 1, "pap_direct"), (2, 2, "pap_direct"), (3, 1, "pap_direct"), (4, 2, "pap_direct"),
    (5, 3, "pap_direct"), (3, 1, "mpi"), (4, 2, "auto")])
def test_alltoallw_pencils_vectors_resized_match_mpi(run_mpi, nprocs, node_size, algorithm):
    res = run_mpi(nprocs, "vcalls.py", "w", algorithm,
                  env={**SLOT, "PAPCOLL_NODE_SIZE": str(node_size)}, timeout=240)
    assert res.returncode == 0, res.stdout[-4000:]
    assert res.stdout.count("W ok") == nprocs, res.stdout[-4000:]


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs", [1, 3])
def test_bad_specs_are_refused_before_data_moves(run_mpi, nprocs):
    res = run_mpi(nprocs, "vcalls.py", "bad", "pap_direct", timeout=120)
    assert res.returncode == 0, res.stdout[-4000:]
    assert res.stdout.count("BAD ok") == nprocs, res.stdout[-4000:]


@pytest.mark.mpi
@pytest.mark.parametrize("threshold,seen", [("4096", "MISMATCH 0 [1]"),   # by the receiver
                                            ("1", "MISMATCH 1 [0]")])     # by the sender
def test_counts_that_disagree_raise_a_mismatch_naming_both(run_mpi, threshold, seen):
    res = run_mpi(3, "vcalls.py", "mismatch", "pap_direct",
                  env={"PAPCOLL_COPY_THRESHOLD": threshold, "PAPCOLL_TIMEOUT": "10"},
                  timeout=120)
    assert res.returncode == 0, res.stdout[-4000:]
    assert seen in res.stdout, res.stdout[-4000:]
    assert res.stdout.count("MISMATCH") == 3, res.stdout[-4000:]


@pytest.mark.mpi
@pytest.mark.parametrize("mode", ["cached-v", "cached-w"])
def test_a_disagreement_between_cached_shapes_is_a_mismatch_naming_both(run_mpi, mode):
    res = run_mpi(3, "vcalls.py", mode, "pap_direct",
                  env={"PAPCOLL_COPY_THRESHOLD": "4096", "PAPCOLL_TIMEOUT": "10"}, timeout=120)
    assert res.returncode == 0, res.stdout[-4000:]
    assert "MISMATCH 0 [1] hit=True" in res.stdout, res.stdout[-4000:]   # by the receiver
    assert re.search(r"MISMATCH 1 \S+ hit=True", res.stdout), res.stdout[-4000:]
    assert res.stdout.count("MISMATCH") == 3, res.stdout[-4000:]
