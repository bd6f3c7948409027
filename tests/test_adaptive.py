"""The adaptive auto (PAPCOLL_ADAPT; papcoll/adaptive.py): its measure, the policy's skew bands,
the setting, and, under MPI, that every rank runs the same algorithm in every call while the
arrival pattern changes, with the data checked against MPI_Alltoall."""
import numpy as np
import pytest

from papcoll import adaptive, config
from papcoll.algorithms import policy
from papcoll.errors import ConfigError

from test_registry import fake_ctx


def test_a_windows_spread_and_call_time_are_medians_over_its_calls():
    # three ranks, five calls: spreads 1, 9, 2, 3, 4 (median 3); shortest 1, 1, 2, 5, 1 (1)
    times = [[2, 10, 4, 8, 5], [1, 1, 2, 5, 1], [1.5, 5, 3, 6, 2]]
    calls = list(zip(*times))
    assert adaptive.window([max(c) for c in calls], [min(c) for c in calls]) == (3, 1)


def test_a_site_measures_against_its_quickest_window_so_far():
    """A window whose calls stretch (the last to arrive sharing a core) keeps the site's own
    call time from its quickest window: the skew is not hidden by the stretch."""
    site = adaptive.Site(8, lambda skew: "mpi")
    site.learn(np.array([2.0] * 4 + [-1.0] * 4))       # longest 2, shortest 1 in every call
    assert (site.base, site.skew) == (1.0, 1.0)
    site.learn(np.array([100.0] * 4 + [-50.0] * 4))
    assert (site.base, site.skew) == (1.0, 50.0)       # not 50 / 50


def test_skew_bands_serve_adaptive_calls_alone():
    ctx = fake_ctx([2, 2], False, emulated=False)
    low = policy.Row(topology="any", algorithm="direct", measured="t", max_skew=10.0)
    high = policy.Row(topology="any", algorithm="pap_direct", measured="t", min_skew=10.0)
    ctx.table = (low, high) + policy.TABLE
    plain = policy.choose(fake_ctx([2, 2], False, emulated=False), 8)
    assert policy.choose(ctx, 8) == plain                    # no skew agreed: the plain rows
    assert policy.choose(ctx, 8, skew=9.99) == "direct"
    assert policy.choose(ctx, 8, skew=10.0) == "pap_direct"
    chooser, banded = policy.by_skew(ctx, 8)                 # a site's, worked out once
    assert [chooser(s) for s in (None, 0.0, 9.99, 10.0, 1e9)] == \
        [policy.choose(ctx, 8, skew=s) for s in (None, 0.0, 9.99, 10.0, 1e9)]
    assert banded
    plain_chooser, banded = policy.by_skew(fake_ctx([2, 2], False, emulated=False), 8)
    assert not banded and plain_chooser(1e9) == plain_chooser(None) == plain  # the shipped rows


@pytest.mark.parametrize("row,why", [
    ('{"min_skew": -1}', "field 'min_skew': wants a number >= 0"),
    ('{"max_skew": "high"}', "field 'max_skew': wants a number >= 0"),
    ('{"min_skew": 5, "max_skew": 5}', "min_skew is not below max_skew"),
    ('{"min_skew": 1, "call": "alltoallv"}', "only alltoall rows take a skew band"),
])
def test_a_bad_skew_band_is_named(row, why):
    text = '{"rows": [' + row[:-1] + ', "topology": "any", "algorithm": "mpi", "measured": ""}]}'
    with pytest.raises(ConfigError, match=why):
        policy.load(text, "t.json")


@pytest.mark.parametrize("raw,want", [(None, None), ("0", None), ("4", 4), ("64", 64)])
def test_the_setting(monkeypatch, raw, want):
    monkeypatch.delenv("PAPCOLL_ADAPT", raising=False)
    if raw is not None:
        monkeypatch.setenv("PAPCOLL_ADAPT", raw)
    assert config.adapt() == want


@pytest.mark.parametrize("raw", ["1", "3", "-4", "x", str(config.MAX_ADAPT + 1)])
def test_a_bad_setting_is_named(monkeypatch, raw):
    monkeypatch.setenv("PAPCOLL_ADAPT", raw)
    with pytest.raises(ConfigError, match="PAPCOLL_ADAPT"):
        config.adapt()


def test_ranks_must_agree_on_the_window():
    said = {0: {**config.wire(), "PAPCOLL_ADAPT": "8"}, 1: {**config.wire(), "PAPCOLL_ADAPT": None}}
    assert "PAPCOLL_ADAPT differs between ranks: rank 0: '8', rank 1: unset" in str(
        config.disagreement(said))


@pytest.mark.mpi
@pytest.mark.parametrize("n,node_size", [(3, None), (4, "2"), (5, "2")])
def test_every_rank_follows_the_arrival_pattern_alike(run_mpi, tmp_path, n, node_size):
    env = {"PAPCOLL_NODE_SIZE": node_size} if node_size else {}
    res = run_mpi(n, "adaptive.py", str(tmp_path), env=env, timeout=180)
    assert res.returncode == 0 and "ADAPTIVE OK" in res.stdout, res.stdout[-4000:]
