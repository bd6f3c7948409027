"""mpi4py's own tests of the alltoalls pass through ``python -m papcoll run``: its source
release's test/ (fetched by scripts/setup with scripts/mpi4py-tests, checked against PyPI's
sha256, never kept in this repository), the blocking ones as routed by default, the
nonblocking and persistent ones with PAPCOLL_RUN_REQUESTS=1; papcoll's own algorithm forced,
and the policy's choice. Tests that MPI itself would fail are skipped by mpi4py's own rules."""
import re
from pathlib import Path

import mpi4py
import pytest

import papcoll
from launcher import launch

SUITE = Path(__file__).resolve().parent.parent / ".venv" / "mpi4py-tests" / mpi4py.__version__
BANDED = Path(__file__).resolve().parent / "mpi" / "banded.json"
KINDS = {"test_cco_buf": ["Alltoall"], "test_cco_vec": ["Alltoallv", "Alltoallw"],
         "test_cco_nb_buf": ["Ialltoall"], "test_cco_nb_vec": ["Ialltoallv", "Ialltoallw"],
         "test_cco_pr_buf": ["Alltoall_init"],
         "test_cco_pr_vec": ["Alltoallv_init", "Alltoallw_init"]}


def run_suite(module, nprocs, env):
    """mpi4py's ``module`` through the runner on ``nprocs`` ranks: all its tests pass, on
    every rank; -> per kind of call, the algorithms that served it and their counts."""
    assert (SUITE / "mpiunittest.py").is_file(), f"{SUITE}: run ./scripts/setup to fetch it"
    res = launch(nprocs, ["-m", "papcoll", "run", str(SUITE / f"{module}.py")],
                 env={"PAPCOLL_SUMMARY": "1", **env}, runner=(), timeout=300)
    assert res.returncode == 0, res.stdout[-4000:]         # unittest exits 1 on any failure
    # hydra may join two ranks' lines ("OKRan 62 tests"): count, never anchor at a line start
    assert len(re.findall(r"Ran \d+ tests? in", res.stdout)) == nprocs, res.stdout[-4000:]
    assert res.stdout.count("OK") >= nprocs, res.stdout[-4000:]
    assert "FAILED" not in res.stdout and "Error" not in res.stdout, res.stdout[-4000:]
    served = {}
    for kind in KINDS[module]:           # served by papcoll: the summary counts them
        row = re.search(r"^  %s +(\d+) +\d+ +[\d.]+  (.*)$" % kind, res.stdout, re.M)
        assert row and int(row[1]) > 0, res.stdout[-4000:]
        served[kind] = {name: int(n) for name, n in re.findall(r"(\w+) x (\d+)", row[2])}
        assert set(served[kind]) <= set(papcoll.algorithms), row[2]
    return served


@pytest.mark.mpi
@pytest.mark.parametrize("module", list(KINDS))
@pytest.mark.parametrize("nprocs,node_size,algorithm", [(2, 1, "auto"), (3, 2, "pap_direct")])
def test_mpi4py_own_alltoall_tests_pass_through_the_runner(module, nprocs, node_size,
                                                            algorithm):
    requests = "0" if module in ("test_cco_buf", "test_cco_vec") else "1"
    served = run_suite(module, nprocs, {"PAPCOLL_ALGORITHM": algorithm,
                                        "PAPCOLL_RUN_REQUESTS": requests,
                                        "PAPCOLL_NODE_SIZE": str(node_size)})
    if algorithm == "pap_direct":
        for kind in KINDS[module]:
            assert set(served[kind]) == {"pap_direct"}, served


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs", [3, 4])
def test_mpi4py_own_alltoall_tests_pass_with_the_adaptive_auto(nprocs):
    """The adaptive auto (PAPCOLL_ADAPT) on a program papcoll did not write: mpi4py's
    Alltoall tests, their many dtypes, sizes and buffer specs, each size a call site of each
    of the suite's communicators. The band (tests/mpi/banded.json) names ``pap_direct`` once a
    site has agreed, which plain ``auto`` never runs in nodes of 2: so calls it served were
    chosen by an agreement, and every rank chose alike (a call whose ranks ran different
    algorithms would fail or hang the suite)."""
    served = run_suite("test_cco_buf", nprocs, {
        "PAPCOLL_ADAPT": "4", "PAPCOLL_TUNING_FILE": str(BANDED), "PAPCOLL_NODE_SIZE": "2"})
    assert served["Alltoall"].get("pap_direct", 0) > 0, served
