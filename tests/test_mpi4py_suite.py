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
KINDS = {"test_cco_buf": ["Alltoall"], "test_cco_vec": ["Alltoallv", "Alltoallw"],
         "test_cco_nb_buf": ["Ialltoall"], "test_cco_nb_vec": ["Ialltoallv", "Ialltoallw"],
         "test_cco_pr_buf": ["Alltoall_init"],
         "test_cco_pr_vec": ["Alltoallv_init", "Alltoallw_init"]}


@pytest.mark.mpi
@pytest.mark.parametrize("module", list(KINDS))
@pytest.mark.parametrize("nprocs,node_size,algorithm", [(2, 1, "auto"), (3, 2, "pap_direct")])
def test_mpi4py_own_alltoall_tests_pass_through_the_runner(module, nprocs, node_size,
                                                            algorithm):
    assert (SUITE / "mpiunittest.py").is_file(), f"{SUITE}: run ./scripts/setup to fetch it"
    requests = "0" if module in ("test_cco_buf", "test_cco_vec") else "1"
    env = {"PAPCOLL_SUMMARY": "1", "PAPCOLL_ALGORITHM": algorithm,
           "PAPCOLL_RUN_REQUESTS": requests, "PAPCOLL_NODE_SIZE": str(node_size)}
    res = launch(nprocs, ["-m", "papcoll", "run", str(SUITE / f"{module}.py")], env=env,
                 runner=(), timeout=300)
    assert res.returncode == 0, res.stdout[-4000:]         # unittest exits 1 on any failure
    # hydra may join two ranks' lines ("OKRan 62 tests"): count, never anchor at a line start
    assert len(re.findall(r"Ran \d+ tests? in", res.stdout)) == nprocs, res.stdout[-4000:]
    assert res.stdout.count("OK") >= nprocs, res.stdout[-4000:]
    assert "FAILED" not in res.stdout and "Error" not in res.stdout, res.stdout[-4000:]
    for kind in KINDS[module]:           # served by papcoll: the summary counts them
        row = re.search(r"^  %s +(\d+) +\d+ +[\d.]+  (.*)$" % kind, res.stdout, re.M)
        assert row and int(row[1]) > 0, res.stdout[-4000:]
        served = dict(re.findall(r"(\w+) x (\d+)", row[2]))
        assert set(served) <= set(papcoll.algorithms), row[2]
        if algorithm == "pap_direct":
            assert set(served) == {"pap_direct"}, row[2]
