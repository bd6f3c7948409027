"""Arrival behaviour of papcoll's own algorithms: PAP order and bounded waits."""
import ast

import pytest
from launcher import assert_pap_order

import papcoll
from papcoll.algorithms.registry import Algorithm

OWN = [name for name in papcoll.algorithms if name != "mpi"]   # mpi's waits are MPI's
HIERARCHICAL = ["shm_direct", "pap_shm_direct"]        # across nodes only: 2 emulated nodes
FLAT = [name for name in OWN if name not in HIERARCHICAL]
PAP = [name for name in FLAT if name != "direct"]     # every PAP-aware flat algorithm
# A repeated call of one shape takes an algorithm's plan, where it has one: time out both ways.
SHAPES = [(name, "same") for name in OWN] + [
    (name, "new") for name in OWN if papcoll.algorithms[name].plan is not Algorithm.plan]


def nodes(name):
    """The environment an algorithm's test needs: 2 emulated nodes for the hierarchical ones."""
    return {"PAPCOLL_NODE_SIZE": "2"} if name in HIERARCHICAL else {}


@pytest.mark.mpi
@pytest.mark.parametrize("name", PAP + ["direct"])
def test_early_ranks_finish_among_themselves(run_mpi, name):
    res = run_mpi(4, "pap.py", "order", name)
    assert res.returncode == 0, res.stdout[-4000:]
    assert_pap_order(res.stdout, [name])


# Which early ranks receive which blocks only after the late rank arrives (rank: sources):
# blocks from the late rank's node travel in its aggregate, which needs the late rank, so they
# wait by nature; pap_shm_direct holds up nothing else, shm_direct also the late node's own.
HELD = {("pap_shm_direct", 2): {0: [3], 1: [3], 3: [0, 1]},
        ("pap_shm_direct", 3): {0: [2], 1: [2], 2: []},
        ("shm_direct", 2): {0: [3], 1: [3], 3: [0, 1]},
        ("shm_direct", 3): {0: [2], 1: [2], 2: [0, 1]}}


@pytest.mark.mpi
@pytest.mark.parametrize("name,late", sorted(HELD),
                         ids=[f"{n}-late-{'master' if late == 2 else 'non-master'}"
                              for n, late in sorted(HELD)])
def test_hierarchical_arrival_order(run_mpi, name, late):
    res = run_mpi(4, "pap.py", "hier_order", name, str(late), env=nodes(name))
    assert res.returncode == 0, res.stdout[-4000:]
    line = next(line for line in res.stdout.splitlines() if line.startswith("HELD"))
    held = ast.literal_eval(line.split(": ", 1)[1])     # the list the worker printed
    assert {r: h for r, h in enumerate(held) if h is not None} == HELD[name, late], line


@pytest.mark.mpi
def test_a_message_from_a_rank_whose_flag_another_raises_is_no_disagreement(run_mpi):
    """A remote master's blocks reach a non-master through its own master: the remote master may
    finish and send its next message before they are handed on (CI once raised MismatchError
    "rank 2 is at 'close'" in test_hierarchical_arrival_order, its master being slow)."""
    res = run_mpi(3, "pap.py", "handed_on", "-")
    assert res.returncode == 0 and "HANDED_ON ok" in res.stdout, res.stdout[-4000:]


@pytest.mark.mpi
@pytest.mark.parametrize("name,shape", SHAPES)
def test_missing_rank_is_named_within_the_timeout(run_mpi, name, shape):
    res = run_mpi(3, "pap.py", "timeout", name, shape,
                  env={"PAPCOLL_TIMEOUT": "2", **nodes(name)}, timeout=120)
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
