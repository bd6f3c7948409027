"""Arrival behaviour of papcoll's own algorithms: PAP order and bounded waits."""
import pytest

import papcoll
from papcoll.algorithms.registry import Algorithm

OWN = [name for name in papcoll.algorithms if name != "mpi"]   # mpi's waits are MPI's
PAP = [name for name in OWN if name != "direct"]      # every PAP-aware algorithm
# A repeated call of one shape takes an algorithm's fast lane, where it has one: time out both ways.
SHAPES = [(name, "same") for name in OWN] + [
    (name, "new") for name in OWN if papcoll.algorithms[name].lane is not Algorithm.lane]


@pytest.mark.mpi
@pytest.mark.parametrize("name", PAP + ["direct"])
def test_early_ranks_finish_among_themselves(run_mpi, name):
    res = run_mpi(4, "pap.py", "order", name)
    assert res.returncode == 0, res.stdout[-4000:]
    lines = [line for line in res.stdout.splitlines() if line.startswith("ORDER")]
    assert len(lines) == 2, res.stdout[-4000:]
    if name == "direct":   # step order makes some early rank wait for the late one
        assert all("held up nothing" not in line for line in lines), lines
    else:
        assert all("held up nothing" in line for line in lines), lines


@pytest.mark.mpi
@pytest.mark.parametrize("name,shape", SHAPES)
def test_missing_rank_is_named_within_the_timeout(run_mpi, name, shape):
    res = run_mpi(3, "pap.py", "timeout", name, shape, env={"PAPCOLL_TIMEOUT": "2"}, timeout=120)
    assert res.returncode == 0, res.stdout[-4000:]
    assert f"TIMEOUT {name} ok" in res.stdout
    assert "no sign of rank(s) [2]" in res.stdout


@pytest.mark.mpi
@pytest.mark.parametrize("name,shape", [("shm_pap", "same"), ("shm_pap", "new"),
                                        ("cma_pap", "same")])
def test_ctrl_c_gets_through_a_wait(run_mpi, name, shape):
    res = run_mpi(3, "pap.py", "interrupt", name, shape, env={"PAPCOLL_TIMEOUT": "30"},
                  timeout=60)
    assert res.returncode == 0, res.stdout[-4000:]
    assert f"INTERRUPT {name} ok" in res.stdout
