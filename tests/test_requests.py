"""Nonblocking and persistent alltoalls (papcoll.Request), against MPI's own calls on the same
data (tests/mpi/requests.py says what each mode checks)."""
import pytest


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs,node_size,algorithm", [
    (1, 1, "pap_direct"), (2, 1, "pap_direct"), (3, 2, "pap_direct"), (4, 2, "auto"),
    (5, 3, "pap_direct"), (3, 1, "mpi")])
def test_persistent_requests_started_a_thousand_times(run_mpi, nprocs, node_size, algorithm):
    res = run_mpi(nprocs, "requests.py", "persistent", algorithm, 1000,
                  env={"PAPCOLL_NODE_SIZE": str(node_size), "PAPCOLL_COPY_THRESHOLD": "4096"},
                  timeout=300)
    assert res.returncode == 0, res.stdout[-4000:]
    assert res.stdout.count("PERSISTENT ok") == nprocs, res.stdout[-4000:]


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs,node_size,algorithm", [
    (1, 1, "pap_direct"), (2, 2, "pap_direct"), (3, 1, "pap_direct"), (4, 2, "auto"),
    (5, 2, "pap_direct"), (4, 1, "mpi")])
def test_nonblocking_requests_tested_while_computing(run_mpi, nprocs, node_size, algorithm):
    res = run_mpi(nprocs, "requests.py", "nonblocking", algorithm,
                  env={"PAPCOLL_NODE_SIZE": str(node_size), "PAPCOLL_COPY_THRESHOLD": "4096"},
                  timeout=300)
    assert res.returncode == 0, res.stdout[-4000:]
    assert res.stdout.count("NONBLOCKING ok") == nprocs, res.stdout[-4000:]


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs,algorithm", [(1, "pap_direct"), (3, "pap_direct"),
                                              (2, "mpi")])
def test_request_misuse_is_refused(run_mpi, nprocs, algorithm):
    res = run_mpi(nprocs, "requests.py", "misuse", algorithm, timeout=120)
    assert res.returncode == 0, res.stdout[-4000:]
    assert res.stdout.count("MISUSE ok") == nprocs, res.stdout[-4000:]


@pytest.mark.mpi
@pytest.mark.parametrize("algorithm", ["pap_direct", "pap_direct_zcopy"])
def test_a_peer_that_never_starts_is_named_by_wait_and_test(run_mpi, algorithm):
    res = run_mpi(3, "requests.py", "absent", algorithm, env={"PAPCOLL_TIMEOUT": "4"},
                  timeout=120)
    assert res.returncode == 0, res.stdout[-4000:]
    assert "ABSENT 0 [2]" in res.stdout and "ABSENT 1 [2]" in res.stdout, res.stdout[-4000:]


@pytest.mark.mpi
@pytest.mark.parametrize("node_size,algorithm", [
    (None, "pap_direct"), (1, "pap_direct"), (None, "mpi"), (1, "direct"),
    (None, "pap_direct_zcopy"), (1, "pap_direct_zcopy")])
def test_dropped_requests_are_completed_by_the_next_call_and_by_close(run_mpi, node_size,
                                                                      algorithm):
    env = {"PAPCOLL_COPY_THRESHOLD": "4096"}
    if node_size is not None:
        env["PAPCOLL_NODE_SIZE"] = str(node_size)
    res = run_mpi(3, "requests.py", "dropped", algorithm, env=env, timeout=180)
    assert res.returncode == 0, res.stdout[-4000:]
    assert res.stdout.count("DROPPED ok") == 3, res.stdout[-4000:]


@pytest.mark.mpi
@pytest.mark.parametrize("algorithm,named", [("pap_direct", "[2]"), ("pap_direct_zcopy", "[2]"),
                                             ("mpi", "None")])    # MPI does not say which
def test_close_names_the_rank_missing_from_a_dropped_call_and_still_closes(run_mpi, algorithm,
                                                                           named):
    res = run_mpi(3, "requests.py", "dropped_absent", algorithm, env={"PAPCOLL_TIMEOUT": "4"},
                  timeout=120)
    assert res.returncode == 0, res.stdout[-4000:]
    assert f"DROPPED_ABSENT 0 {named}" in res.stdout, res.stdout[-4000:]
    assert f"DROPPED_ABSENT 1 {named}" in res.stdout, res.stdout[-4000:]
