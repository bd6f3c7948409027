"""Peer failures (tests/mpi/peer_failures.py, tests/mpi/blame.py): a rank missing or frozen
at set-up, gone under a CMA read, frozen in a hierarchical phase or giving up is named within
the timeout, blame falls on the rank at fault and never on one that gave up, and /dev/shm
stays clean."""
import os
import re

import pytest

from modes import FAST, ok
from papcoll.node import segment

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("name", ["shm_pap", "cma_pap", "direct", "pap_direct"])
def test_a_rank_missing_at_set_up_is_named(run_mpi, name):
    ok(run_mpi(3, "peer_failures.py", "setup_missing", name, env=FAST, timeout=120),
       "setup_missing")


@pytest.mark.parametrize("step", ["topology", "node segment mapped", "CMA check"])
def test_a_rank_dying_at_set_up_is_named_and_leaves_nothing(run_mpi, step):
    res = run_mpi(3, "peer_failures.py", "dies", step, env=FAST, timeout=120)
    assert "DIES OK" in res.stdout, res.stdout[-4000:]
    found = re.findall(r"DIES rank (\d): [^\n]*?no sign (?:yet )?of rank\(s\) \[0\][^\n]*?leftovers \[\]",
                       res.stdout)                   # two ranks' lines may share one line
    assert sorted(found) == ["1", "2"], res.stdout[-4000:]
    assert [n for n in os.listdir(segment.SHM_DIR) if n.startswith(segment.PREFIX)] == []


@pytest.mark.parametrize("name", ["shm_pap", "cma_pap", "direct", "pap_direct"])
def test_blame_falls_on_the_missing_rank_not_on_one_that_gave_up(run_mpi, name):
    ok(run_mpi(3, "peer_failures.py", "gave_up", name, env=FAST, timeout=120), "gave_up")


def test_a_cma_failure_names_the_rank(run_mpi):
    ok(run_mpi(2, "peer_failures.py", "cma_rank", env=FAST, timeout=120), "cma_rank")


def test_a_give_up_flagged_before_its_message_arrives_keeps_its_reason(run_mpi):
    ok(run_mpi(2, "peer_failures.py", "late_word", timeout=120), "late_word")


def test_a_rank_late_inside_mpis_window_creation_fails_every_rank_naming_none(run_mpi):
    """The fault matrix's stop cell of the adaptive auto (a switch sets up pap_direct in
    call 10) once stopped its victim inside MPI_Win_allocate: the others, held there past
    their deadline, blamed ranks that had only given up."""
    ok(run_mpi(3, "peer_failures.py", "held", env={"PAPCOLL_TIMEOUT": "1"}, timeout=120),
       "held")


@pytest.mark.parametrize("phase", ["gather", "scatter"])
@pytest.mark.parametrize("name", ["shm_direct", "pap_shm_direct"])
def test_a_process_dying_in_a_hierarchical_phase_is_named_everywhere(run_mpi, name, phase):
    res = run_mpi(4, "peer_failures.py", "hier_dies", name, phase,
                  env={**FAST, "PAPCOLL_NODE_SIZE": "2"}, timeout=120)
    assert "HIER_DIES OK" in res.stdout, res.stdout[-4000:]
    found = re.findall(r"HIER_DIES rank (\d) call \d: [^\n]*?no sign (?:yet )?of rank\(s\) \[3\]",
                       res.stdout)
    assert sorted(found) == ["0", "1", "2"], res.stdout[-4000:]
    assert [n for n in os.listdir(segment.SHM_DIR) if n.startswith(segment.PREFIX)] == []


@pytest.mark.parametrize("name", ["shm_direct", "pap_shm_direct"])
def test_a_frozen_master_is_blamed_by_its_node(run_mpi, name):
    """Issue F: a master frozen in the masters' phase was not named by its own node's process,
    which named the other (late, live) master instead."""
    res = run_mpi(4, "blame.py", name, env={"PAPCOLL_NODE_SIZE": "2", "PAPCOLL_TIMEOUT": "3"},
                  timeout=120)
    assert "BLAME OK" in res.stdout, res.stdout[-3000:]
