"""The user-facing API under MPI, and the algorithm choice from the environment."""
import pytest


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs", [1, 2, 3])
def test_api(run_mpi, nprocs):
    res = run_mpi(nprocs, "api.py")
    assert res.returncode == 0 and "API OK" in res.stdout, res.stdout[-4000:]
