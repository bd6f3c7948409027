"""Registry, selection policy and settings."""
import pytest

import papcoll
from papcoll import config
from papcoll.algorithms import lookup, policy
from papcoll.errors import AlgorithmError, PapcollError


def test_every_algorithm_has_a_name_and_description():
    for name, cls in papcoll.algorithms.items():
        assert cls.name == name and cls.description and cls.description != "?"


def test_unknown_algorithm_lists_the_known_ones():
    with pytest.raises(AlgorithmError, match="unknown algorithm 'nope'.*pap_direct"):
        lookup("nope")


def test_policy_rows_name_registered_algorithms():
    for where, limit, name in policy.TABLE:
        assert where in ("single-node", "multi-node", "any")
        assert limit is None or limit >= 0
        lookup(name)


@pytest.mark.parametrize("name,value", [("PAPCOLL_TIMEOUT", "0"), ("PAPCOLL_TIMEOUT", "soon"),
                                        ("PAPCOLL_NODE_SIZE", "0"), ("PAPCOLL_NODE_SIZE", "two"),
                                        ("PAPCOLL_COPY_THRESHOLD", "-1")])
def test_bad_settings_are_named(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    getter = {"PAPCOLL_TIMEOUT": config.timeout, "PAPCOLL_NODE_SIZE": config.node_size,
              "PAPCOLL_COPY_THRESHOLD": config.copy_threshold}[name]
    with pytest.raises(PapcollError, match=name):
        getter()

