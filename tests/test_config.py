"""Settings: every PAPCOLL_* variable is range-checked, and a bad value is an error naming the
variable, its value and what is allowed -- at once, not after zeroing a 4 TB window; `papcoll info`
says what it makes of each one set."""
import os
import re
import time
from pathlib import Path

import pytest

import papcoll
from papcoll import config
from papcoll.algorithms import pap_direct
from papcoll.errors import ConfigError
from papcoll.transport import choose
from papcoll.transport.mpi_rma import MpiRmaTransport

BAD = [
    ("PAPCOLL_TIMEOUT", "1e300", config.timeout, "> 0 and <= 1e+06"),
    ("PAPCOLL_TIMEOUT", "inf", config.timeout, "> 0 and <= 1e+06"),
    ("PAPCOLL_TIMEOUT", "nan", config.timeout, "> 0"),
    ("PAPCOLL_TIMEOUT", "0", config.timeout, "> 0"),
    ("PAPCOLL_TIMEOUT", "-3", config.timeout, "> 0"),
    ("PAPCOLL_TIMEOUT", "soon", config.timeout, "number of seconds"),
    ("PAPCOLL_NODE_SIZE", "0", config.node_size, "from 1 to"),
    ("PAPCOLL_NODE_SIZE", "-2", config.node_size, "from 1 to"),
    ("PAPCOLL_NODE_SIZE", "99999999999", config.node_size, "from 1 to 2147483647"),
    ("PAPCOLL_COPY_THRESHOLD", "1000000000000", config.copy_threshold, "from 0 to 67108864"),
    ("PAPCOLL_COPY_THRESHOLD", "1.5", config.copy_threshold, "integer"),
    ("PAPCOLL_TRACE", "yes", config.trace, "0 or 1"),
    ("PAPCOLL_IB_PORT", "0", config.ib_port, "from 1 to 255"),
    ("PAPCOLL_IB_GID_INDEX", "-1", config.ib_gid_index, "from 0 to 65535"),
    ("PAPCOLL_TRANSPORT", "carrier-pigeon", choose, "unknown; transports: verbs, mpi-rma"),
]


@pytest.mark.parametrize("name,value,read,allowed", BAD, ids=[f"{n}={v}" for n, v, *_ in BAD])
def test_bad_values_name_the_variable_and_the_range(monkeypatch, name, value, read, allowed):
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as err:
        read()
    assert f"{name}={value!r}" in str(err.value) and allowed in str(err.value)


def test_good_values_and_defaults(monkeypatch):
    for name in ("PAPCOLL_TIMEOUT", "PAPCOLL_NODE_SIZE", "PAPCOLL_COPY_THRESHOLD",
                 "PAPCOLL_TRACE", "PAPCOLL_IB_PORT", "PAPCOLL_IB_GID_INDEX"):
        monkeypatch.delenv(name, raising=False)
    assert config.timeout() == config.DEFAULT_TIMEOUT and config.node_size() is None
    assert config.copy_threshold() is None and config.trace() is False
    monkeypatch.setenv("PAPCOLL_TIMEOUT", " 2.5 ")
    monkeypatch.setenv("PAPCOLL_NODE_SIZE", "4")
    monkeypatch.setenv("PAPCOLL_COPY_THRESHOLD", "0")
    monkeypatch.setenv("PAPCOLL_TRACE", "1")
    monkeypatch.setenv("PAPCOLL_IB_PORT", "2")
    assert (config.timeout(), config.node_size(), config.copy_threshold(), config.trace(),
            config.ib_port()) == (2.5, 4, 0, True, 2)


def test_a_copy_threshold_whose_inbox_is_too_large_for_n_is_refused_at_once(monkeypatch):
    monkeypatch.setenv("PAPCOLL_COPY_THRESHOLD", str(config.MAX_COPY_THRESHOLD))
    start = time.monotonic()
    with pytest.raises(ConfigError, match=r"PAPCOLL_COPY_THRESHOLD=67108864: the inbox .* at most "
                                          r"8388608 with 64 processes"):
        pap_direct.copy_threshold(MpiRmaTransport, 64)
    assert time.monotonic() - start < 0.1
    assert pap_direct.copy_threshold(MpiRmaTransport, 2) == config.MAX_COPY_THRESHOLD


def test_an_unknown_algorithm_in_the_environment_names_it(monkeypatch):
    from papcoll.context import forced_algorithm
    monkeypatch.setenv("PAPCOLL_ALGORITHM", "fastest")
    with pytest.raises(ConfigError, match="PAPCOLL_ALGORITHM='fastest': unknown algorithm"):
        forced_algorithm()


def test_every_documented_setting_has_its_reader():
    """docs/settings.md and config.READERS name the same settings: info checks each one."""
    doc = (Path(__file__).parent.parent / "docs" / "settings.md").read_text()
    headings = re.findall(r"^\*\*(`PAPCOLL_.*?)\*\* --", doc, re.M)
    assert {n for h in headings for n in re.findall(r"`(PAPCOLL_[A-Z_]+)`", h)} == set(config.READERS)


def test_info_says_what_it_makes_of_each_setting_set_here(monkeypatch):
    """A good value as read, a bad one refused with why, a misspelt name flagged."""
    from papcoll.__main__ import settings
    for name in [k for k in os.environ if k.startswith("PAPCOLL_")]:
        monkeypatch.delenv(name)
    assert settings() == ["  none set: every default"]
    for name, value in (("PAPCOLL_NODE_SIZE", "2"), ("PAPCOLL_TIMEOUT", "-1"),
                        ("PAPCOLL_ALGORITHM", "fast"), ("PAPCOLL_ALGORTHM", "mpi")):
        monkeypatch.setenv(name, value)
    assert settings() == [
        "  PAPCOLL_ALGORITHM='fast': refused: unknown algorithm 'fast'; registered: "
        + ", ".join(sorted(papcoll.algorithms)) + " (or 'auto': the policy's choice)",
        "  PAPCOLL_ALGORTHM='mpi': papcoll reads no such setting",
        "  PAPCOLL_NODE_SIZE='2': read as 2",
        "  PAPCOLL_TIMEOUT='-1': refused: must be a number of seconds > 0 and <= 1e+06"]
