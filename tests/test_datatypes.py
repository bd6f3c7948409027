"""Datatypes papcoll must read as MPI does: permuted typemaps with contiguous extents, handles
reused after a Free, uncommitted types (tests/mpi/datatypes.py says what each mode checks)."""
import pytest


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs,node_size,algorithm", [
    (1, 1, "pap_direct"), (3, 1, "pap_direct"), (4, 2, "pap_direct"), (3, 3, "auto"),
    (2, 1, "mpi")])
def test_permuted_datatypes_match_mpi(run_mpi, nprocs, node_size, algorithm):
    res = run_mpi(nprocs, "datatypes.py", "permuted", algorithm,
                  env={"PAPCOLL_NODE_SIZE": str(node_size)}, timeout=180)
    assert res.returncode == 0, res.stdout[-4000:]
    assert res.stdout.count("PERMUTED ok") == nprocs, res.stdout[-4000:]


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs,algorithm", [(1, "pap_direct"), (3, "pap_direct"),
                                              (3, "mpi"), (2, "auto")])
def test_uncommitted_datatypes_are_refused_before_data_moves(run_mpi, nprocs, algorithm):
    res = run_mpi(nprocs, "datatypes.py", "uncommitted", algorithm,
                  env={"PAPCOLL_NODE_SIZE": "1"}, timeout=180)
    assert res.returncode == 0, res.stdout[-4000:]
    assert res.stdout.count("UNCOMMITTED ok") == nprocs, res.stdout[-4000:]
