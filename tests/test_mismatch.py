"""Calls that disagree (tests/mpi/mismatch.py): in size on every signed algorithm, in the
policy's choice, in the algorithm on first use, or with a sender's buffer shorter than the
reader expects: MismatchError on every rank within the timeout, never a read past a buffer."""
import re

import pytest

from modes import FAST, ok

pytestmark = pytest.mark.mpi
SIGNED = ["shm_pap", "cma_pap", "direct", "pap_direct", "pap_direct_copy", "pap_direct_zcopy",
          "shm_direct", "pap_shm_direct"]
HIERARCHICAL = {"PAPCOLL_NODE_SIZE": "2"}                     # 2 emulated nodes: 2 ranks, 1
SIZES = [(8, 16), (16, 0), (65536, 131072), (8, 2 << 20)]     # the last straddles pap_direct's
                                                              # scheme threshold on mpi-rma


@pytest.mark.parametrize("a,b", SIZES, ids=[f"{a}-vs-{b}" for a, b in SIZES])
@pytest.mark.parametrize("name", SIGNED)
def test_calls_that_disagree_raise_on_every_rank(run_mpi, name, a, b):
    env = {**FAST, **(HIERARCHICAL if "shm_direct" in name else {})}
    ok(run_mpi(3, "mismatch.py", "mismatch", name, str(a), str(b), env=env, timeout=120),
       "mismatch")


def test_the_policy_on_both_sides_of_a_threshold_is_a_mismatch(run_mpi):
    ok(run_mpi(2, "mismatch.py", "policy", env=FAST, timeout=120), "policy")


def test_a_reader_never_reads_past_a_senders_buffer(run_mpi):
    ok(run_mpi(2, "mismatch.py", "beyond", env=FAST, timeout=120), "beyond")


def test_different_algorithms_on_first_use_end_in_errors(run_mpi):
    res = run_mpi(2, "mismatch.py", "family", env=FAST, timeout=120)
    ok(res, "family")
    assert len(re.findall(r"FAMILY rank \d: MismatchError", res.stdout)) == 2, res.stdout[-3000:]
