"""The user-facing API under MPI, and the algorithm choice from the environment."""
import pytest


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs", [1, 2, 3])
def test_api(run_mpi, nprocs):
    res = run_mpi(nprocs, "api.py")
    assert res.returncode == 0 and "API OK" in res.stdout, res.stdout[-4000:]


@pytest.mark.mpi
@pytest.mark.parametrize("algorithm", ["auto", "mpi", "pap_direct"])
@pytest.mark.parametrize("nprocs", [1, 2, 3, 5])
def test_a_plan_serves_only_what_the_full_path_checked(run_mpi, nprocs, algorithm):
    env = {} if algorithm == "auto" else {"PAPCOLL_ALGORITHM": algorithm}
    if algorithm == "pap_direct":       # zero-copy calls between planned ones too
        env["PAPCOLL_COPY_THRESHOLD"] = "64"
    res = run_mpi(nprocs, "plan.py", env=env)
    assert res.returncode == 0 and "PLAN OK" in res.stdout, res.stdout[-4000:]


@pytest.mark.mpi
@pytest.mark.parametrize("algorithm", ["shm_direct", "pap_shm_direct"])
@pytest.mark.parametrize("nprocs", [3, 5])
def test_a_hierarchical_plan_serves_only_what_the_full_path_checked(run_mpi, nprocs, algorithm):
    res = run_mpi(nprocs, "plan.py", env={"PAPCOLL_ALGORITHM": algorithm,
                                          "PAPCOLL_NODE_SIZE": "2"})
    assert res.returncode == 0 and "PLAN OK" in res.stdout, res.stdout[-4000:]
