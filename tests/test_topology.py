"""Emulated nodes (PAPCOLL_NODE_SIZE) belong to processes: a sub-communicator sees the world's
emulated nodes, as it would real ones (tests/mpi/subnodes.py)."""
import pytest


@pytest.mark.mpi
def test_emulated_nodes_follow_the_process_into_sub_communicators(run_mpi):
    res = run_mpi(4, "subnodes.py", env={"PAPCOLL_NODE_SIZE": "2"}, timeout=300)
    assert res.returncode == 0 and "SUBNODES OK" in res.stdout, res.stdout[-4000:]
