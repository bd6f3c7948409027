"""Failure paths and resources (tests/mpi/hardening.py): buffers never pinned, every set-up
bounded, calls that disagree detected, one thread per Communicator, close and exit that never
hang, Communicators dropped without close(), blame that falls on the right rank."""
import os
import re
import time

import pytest

from papcoll.node import segment

pytestmark = pytest.mark.mpi
ZERO_COPY = ["direct", "pap_direct", "pap_direct_zcopy"]      # pap_direct: 8 MiB blocks, zero-copy
SIGNED = ["shm_pap", "cma_pap", "direct", "pap_direct", "pap_direct_copy", "pap_direct_zcopy",
          "shm_direct", "pap_shm_direct"]
HIERARCHICAL = {"PAPCOLL_NODE_SIZE": "2"}                     # 2 emulated nodes: 2 ranks, 1
SIZES = [(8, 16), (16, 0), (65536, 131072), (8, 2 << 20)]     # the last straddles pap_direct's
FAST = {"PAPCOLL_TIMEOUT": "5"}                               # scheme threshold on mpi-rma


def ok(res, mode):
    assert res.returncode == 0 and f"{mode.upper()} OK" in res.stdout, res.stdout[-5000:]


@pytest.mark.parametrize("kind", ["numpy", "bytearray"])
@pytest.mark.parametrize("name", ZERO_COPY)
def test_fresh_receive_buffers_are_not_kept(run_mpi, name, kind):
    ok(run_mpi(2, "hardening.py", "rss", name, kind, timeout=300), "rss")


@pytest.mark.parametrize("a,b", SIZES, ids=[f"{a}-vs-{b}" for a, b in SIZES])
@pytest.mark.parametrize("name", SIGNED)
def test_calls_that_disagree_raise_on_every_rank(run_mpi, name, a, b):
    env = {**FAST, **(HIERARCHICAL if "shm_direct" in name else {})}
    ok(run_mpi(3, "hardening.py", "mismatch", name, str(a), str(b), env=env, timeout=120),
       "mismatch")


def test_the_policy_on_both_sides_of_a_threshold_is_a_mismatch(run_mpi):
    ok(run_mpi(2, "hardening.py", "policy", env=FAST, timeout=120), "policy")


def test_a_reader_never_reads_past_a_senders_buffer(run_mpi):
    ok(run_mpi(2, "hardening.py", "beyond", env=FAST, timeout=120), "beyond")


def test_different_algorithms_on_first_use_end_in_errors(run_mpi):
    res = run_mpi(2, "hardening.py", "family", env=FAST, timeout=120)
    ok(res, "family")
    assert len(re.findall(r"FAMILY rank \d: MismatchError", res.stdout)) == 2, res.stdout[-3000:]


@pytest.mark.parametrize("name", ["shm_pap", "cma_pap", "direct", "pap_direct"])
def test_a_rank_missing_at_set_up_is_named(run_mpi, name):
    ok(run_mpi(3, "hardening.py", "setup_missing", name, env=FAST, timeout=120), "setup_missing")


@pytest.mark.parametrize("step", ["topology", "node segment mapped", "CMA check"])
def test_a_rank_dying_at_set_up_is_named_and_leaves_nothing(run_mpi, step):
    res = run_mpi(3, "hardening.py", "dies", step, env=FAST, timeout=120)
    assert "DIES OK" in res.stdout, res.stdout[-4000:]
    found = re.findall(r"DIES rank (\d): [^\n]*?no sign (?:yet )?of rank\(s\) \[0\][^\n]*?leftovers \[\]",
                       res.stdout)                   # two ranks' lines may share one line
    assert sorted(found) == ["1", "2"], res.stdout[-4000:]
    assert [n for n in os.listdir(segment.SHM_DIR) if n.startswith(segment.PREFIX)] == []


def test_two_threads_on_one_communicator(run_mpi):
    ok(run_mpi(2, "hardening.py", "threads_one", timeout=120), "threads_one")


def test_one_communicator_per_thread_works(run_mpi):
    ok(run_mpi(2, "hardening.py", "threads_two", timeout=300), "threads_two")


@pytest.mark.parametrize("name", ["pap_direct", "shm_pap"])
def test_exit_with_a_broken_communicator_does_not_hang(run_mpi, name):
    start = time.monotonic()
    ok(run_mpi(3, "hardening.py", "exit_broken", name, env={"PAPCOLL_TIMEOUT": "3"},
               timeout=120), "exit_broken")
    assert time.monotonic() - start < 60


@pytest.mark.parametrize("nprocs,count,name", [(2, 2000, None), (3, 2000, None),
                                               (2, 1000, "pap_direct")])
def test_unclosed_communicators_are_freed(run_mpi, nprocs, count, name):
    res = run_mpi(nprocs, "hardening.py", "unclosed", str(count), *([name] if name else []),
                  timeout=600)
    ok(res, "unclosed")


@pytest.mark.parametrize("name", ["shm_pap", "cma_pap", "direct", "pap_direct"])
def test_blame_falls_on_the_missing_rank_not_on_one_that_gave_up(run_mpi, name):
    ok(run_mpi(3, "hardening.py", "gave_up", name, env=FAST, timeout=120), "gave_up")


def test_a_cma_failure_names_the_rank(run_mpi):
    ok(run_mpi(2, "hardening.py", "cma_rank", env=FAST, timeout=120), "cma_rank")


def test_a_give_up_flagged_before_its_message_arrives_keeps_its_reason(run_mpi):
    ok(run_mpi(2, "hardening.py", "late_word", timeout=120), "late_word")


@pytest.mark.parametrize("phase", ["gather", "scatter"])
@pytest.mark.parametrize("name", ["shm_direct", "pap_shm_direct"])
def test_a_process_dying_in_a_hierarchical_phase_is_named_everywhere(run_mpi, name, phase):
    res = run_mpi(4, "hardening.py", "hier_dies", name, phase,
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
