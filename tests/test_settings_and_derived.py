"""Settings agreed at creation, communicators derived from a Communicator, use after
MPI_Finalize, a failed hierarchical set-up's own error, communicators papcoll cannot use
(worker: tests/mpi/derived.py)."""
import os
import re

import pytest

from papcoll import config
from papcoll.node import segment

pytestmark = pytest.mark.mpi
FAST = {"PAPCOLL_TIMEOUT": "5"}


def ok(res, mode, n):
    found = re.findall(rf"{mode.upper()} rank (\d) OK", res.stdout)
    assert res.returncode == 0 and sorted(found) == [str(r) for r in range(n)], res.stdout[-5000:]


def test_wire_settings_that_differ_are_a_config_error_on_every_rank(run_mpi):
    ok(run_mpi(3, "derived.py", "settings", env={**FAST, "PAPCOLL_NODE_SIZE": "1"},
               timeout=120), "settings", 3)
    assert [n for n in os.listdir(segment.SHM_DIR) if n.startswith(segment.PREFIX)] == []


def test_settings_changed_after_creation_do_not_reach_the_communicator(run_mpi):
    ok(run_mpi(3, "derived.py", "read_once", env={**FAST, "PAPCOLL_NODE_SIZE": "1"},
               timeout=120), "read_once", 3)


def test_disagreement_names_every_setting_and_rank():
    error = config.disagreement({0: {"PAPCOLL_COPY_THRESHOLD": "65536"},
                                 1: {"PAPCOLL_COPY_THRESHOLD": None, "PAPCOLL_ALGORITHM": "mpi"},
                                 2: {"PAPCOLL_COPY_THRESHOLD": None}})
    assert isinstance(error, config.ConfigError)
    assert ("PAPCOLL_ALGORITHM differs between ranks: ranks 0, 2: unset, rank 1: 'mpi'; "
            "PAPCOLL_COPY_THRESHOLD differs between ranks: rank 0: '65536', ranks 1, 2: unset"
            ) in str(error)
    assert config.disagreement({0: config.wire(), 1: config.wire()}) is None


def test_agreed_settings_override_the_environment(monkeypatch):
    monkeypatch.setenv("PAPCOLL_COPY_THRESHOLD", "64")
    monkeypatch.setenv("PAPCOLL_TIMEOUT", "7")
    token = config.adopt({**config.wire(), "PAPCOLL_COPY_THRESHOLD": None})
    try:
        assert config.copy_threshold() is None and config.timeout() == 7   # timeout: local
    finally:
        config.restore(token)
    assert config.copy_threshold() == 64


def test_derived_communicators_are_set_up_when_made(run_mpi):
    ok(run_mpi(3, "derived.py", "derived", env=FAST, timeout=120), "derived", 3)


def test_after_mpi_finalize_every_use_says_so(run_mpi):
    ok(run_mpi(2, "derived.py", "finalize", env=FAST, timeout=120), "finalize", 2)


def test_a_failed_hierarchical_set_up_raises_its_own_error(run_mpi):
    res = run_mpi(4, "derived.py", "hier_setup", env={**FAST, "PAPCOLL_NODE_SIZE": "2"},
                  timeout=120)
    ok(res, "hier_setup", 4)
    found = re.findall(r"HIER_SETUP rank (\d): (MismatchError|PapcollTimeoutError)", res.stdout)
    assert sorted(r for r, _ in found) == ["0", "1", "2", "3"], res.stdout[-4000:]
    assert "AttributeError" not in res.stdout


def test_comm_null_and_inter_communicators_are_communicator_errors(run_mpi):
    ok(run_mpi(2, "derived.py", "bad_comm", env=FAST, timeout=120), "bad_comm", 2)
