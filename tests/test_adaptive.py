"""The adaptive auto (PAPCOLL_ADAPT; papcoll/adaptive.py): its measure, the policy's skew bands,
the setting, and, under MPI, that every rank runs the same algorithm in every call while the
arrival pattern changes, with the data checked against MPI_Alltoall."""
from types import SimpleNamespace

import numpy as np
import pytest

from papcoll import _native, adaptive, config
from papcoll.algorithms import policy
from papcoll.errors import ConfigError

from test_registry import fake_ctx


def test_a_windows_spread_and_call_time_are_medians_over_its_calls():
    # three ranks, five calls: spreads 1, 9, 2, 3, 4 (median 3); shortest 1, 1, 2, 5, 1 (1)
    times = [[2, 10, 4, 8, 5], [1, 1, 2, 5, 1], [1.5, 5, 3, 6, 2]]
    calls = list(zip(*times))
    assert adaptive.window([max(c) for c in calls], [min(c) for c in calls]) == (3, 1)


def test_the_medians_in_c_are_a_sort_s_middle_for_odd_and_even_windows():
    rng = np.random.default_rng(7)
    for k in (1, 2, 5, 16, 17):
        shortest = rng.random(k)
        longest = shortest + rng.random(k)
        want = (sorted(longest - shortest)[k // 2], sorted(shortest)[k // 2])
        assert adaptive.window(longest, shortest) == want
    with pytest.raises(ValueError, match="as many longest as shortest"):
        _native.window(np.zeros(3), np.zeros(2))
    with pytest.raises(TypeError, match="float64"):
        _native.window(np.zeros(3, np.float32), np.zeros(3, np.float32))


def test_a_window_opens_at_its_sites_first_call_and_fills_in_k():
    w = _native.Window(3)
    assert (w.k, w.count, w.times) == (3, -1, (0.0, 0.0, 0.0))
    assert w.note(9.0) is False and w.count == 0           # the first: opens it, untimed
    assert [w.note(t) for t in (1.0, 2.0, 3.0)] == [False, False, True]
    assert w.times == (1.0, 2.0, 3.0)
    with pytest.raises(ValueError, match="k >= 1"):
        _native.Window(0)


def test_a_site_measures_against_its_quickest_window_so_far():
    """A window whose calls stretch (the last to arrive sharing a core) keeps the site's own
    call time from its quickest window: the skew is not hidden by the stretch. The site's
    steps then name its algorithm by that skew."""
    site = adaptive.Site(8, "mpi", ((0.0, "mpi"), (10.0, "pap_direct")))
    _native.window_learn(site, np.array([2.0] * 4 + [-1.0] * 4))   # longest 2, shortest 1
    assert (site.base, site.skew, site.key) == (1.0, 1.0, ("a", "mpi"))
    _native.window_learn(site, np.array([100.0] * 4 + [-50.0] * 4))
    assert (site.base, site.skew, site.key) == (1.0, 50.0, ("a", "pap_direct"))   # not 50 / 50


def test_a_window_ends_by_starting_its_reduction_and_learns_when_it_has_completed():
    """window_end on one process: the first end starts the site's persistent reduction of the
    window's times and their negatives; the next end learns from it, and starts the next."""
    from mpi4py import MPI
    comm = MPI.COMM_SELF.Dup()
    ctx = SimpleNamespace(comm=comm, size=1, rank=0, timeout=10.0)
    try:
        sites = adaptive.Sites(4)
        site = sites.sites[8] = adaptive.Site(8, "mpi", ((0.0, "pap_direct"),))
        sites.open(ctx, site)
        assert not sites.timed(site, 0.0)                   # the first call: not timed
        assert [sites.timed(site, t) for t in (1.0, 2.0, 3.0, 4.0)] == [False] * 3 + [True]
        assert _native.window_end(site) is True
        assert site.window.count == 0 and site.pending is site.reduce and site.key == ("a", "mpi")
        assert list(site.send) == [1.0, 2.0, 3.0, 4.0, -1.0, -2.0, -3.0, -4.0]
        for t in (5.0, 6.0, 7.0, 8.0):
            sites.timed(site, t)
        assert _native.window_end(site) is True             # one rank: done at once
        assert (site.base, site.skew, site.key) == (3.0, 0.0, ("a", "pap_direct"))   # [2] of 4
        sites.close(ctx)
        assert site.pending is None and site.reduce is None
        assert list(site.out) == [5.0, 6.0, 7.0, 8.0, -5.0, -6.0, -7.0, -8.0]
    finally:
        comm.Free()


def test_skew_bands_serve_adaptive_calls_alone():
    ctx = fake_ctx([2, 2], False, emulated=False)
    low = policy.Row(topology="any", algorithm="direct", measured="t", max_skew=10.0)
    high = policy.Row(topology="any", algorithm="pap_direct", measured="t", min_skew=10.0)
    ctx.table = (low, high) + policy.TABLE
    plain = policy.choose(fake_ctx([2, 2], False, emulated=False), 8)
    assert policy.choose(ctx, 8) == plain                    # no skew agreed: the plain rows
    assert policy.choose(ctx, 8, skew=9.99) == "direct"
    assert policy.choose(ctx, 8, skew=10.0) == "pap_direct"
    unagreed, steps, banded = policy.by_skew(ctx, 8)         # a site's, worked out once
    assert unagreed == plain and banded
    assert steps == ((0.0, "direct"), (10.0, "pap_direct"))
    site = adaptive.Site(8, unagreed, steps)
    assert site.key == ("a", plain)
    for skew in (0.0, 9.5, 10.0, 1e9):      # a window whose calls' shortest 1, longest 1 + skew
        _native.window_learn(site, np.array([1.0 + skew] * 3 + [-1.0] * 3))
        assert site.skew == skew and site.key == ("a", policy.choose(ctx, 8, skew=skew))
    unagreed, steps, banded = policy.by_skew(fake_ctx([2, 2], False, emulated=False), 8)
    assert not banded and steps == ((0.0, plain),) and unagreed == plain   # the shipped rows


def test_steps_by_skew_follow_overlapping_bands_in_the_policys_order():
    ctx = fake_ctx([2, 2], False, emulated=False)
    ctx.table = (policy.Row(topology="any", algorithm="direct", measured="t", min_skew=2.0,
                            max_skew=8.0),
                 policy.Row(topology="any", algorithm="pap_direct", measured="t", min_skew=4.0),
                 policy.Row(topology="any", algorithm="shm_direct", measured="t", max_skew=3.0)) \
        + policy.TABLE
    unagreed, steps, banded = policy.by_skew(ctx, 8)
    assert [edge for edge, _ in steps] == [0.0, 2.0, 3.0, 4.0, 8.0]
    site = adaptive.Site(8, unagreed, steps)
    for skew in (0.0, 1.0, 2.0, 2.5, 3.0, 3.5, 4.0, 7.5, 8.0, 100.0):
        _native.window_learn(site, np.array([1.0 + skew] + [-1.0]))
        assert site.key == ("a", policy.choose(ctx, 8, skew=skew)), skew
    assert (unagreed, banded) == (policy.choose(ctx, 8), True)


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


def test_an_mpi_without_persistent_collectives_is_named(monkeypatch):
    from mpi4py import MPI

    class Legacy:
        def Allreduce_init(self, *args):
            raise NotImplementedError("MPI_Allreduce_init")
    monkeypatch.setattr(MPI, "COMM_SELF", Legacy())
    with pytest.raises(ConfigError, match=r"PAPCOLL_ADAPT=16: .*MPI_Allreduce_init.*does not have"):
        adaptive.Sites(16)


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
