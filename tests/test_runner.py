"""``python -m papcoll run``: an unmodified mpi4py program behaves as under ``python -m
mpi4py`` (same output, same exit status on failure), with its Alltoall calls served by
papcoll -- the summary counts them, on every kind of derived communicator."""
import re
import time

import pytest

import papcoll
from launcher import HERE, launch

PROGRAM = str(HERE / "mpi" / "unmodified.py")
RAISES = str(HERE / "mpi" / "raises.py")
ALLTOALLS = 10           # per rank: unmodified.py's


def results(text):
    """The RESULT lines (hydra may join two ranks' lines)."""
    return sorted(re.findall(r"RESULT \d+ \S+ [0-9a-f]{8}", text))


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs,node_size", [(1, 1), (3, 3), (4, 2), (5, 2)])
def test_an_unmodified_program_runs_through_papcoll_alike(nprocs, node_size):
    env = {"PAPCOLL_NODE_SIZE": str(node_size)}
    plain = launch(nprocs, [PROGRAM], env=env, timeout=120)
    routed = launch(nprocs, ["-m", "papcoll", "run", PROGRAM],
                    env={**env, "PAPCOLL_SUMMARY": "1"}, timeout=120, runner=())
    assert plain.returncode == 0, plain.stdout[-4000:]
    assert routed.returncode == 0, routed.stdout[-4000:]
    assert len(results(plain.stdout)) == nprocs
    assert results(routed.stdout) == results(plain.stdout)    # types and data alike
    row = re.search(r"^  Alltoall +(\d+) +(\d+) +[\d.]+  (.*)$", routed.stdout, re.M)
    assert row and int(row[1]) == ALLTOALLS * nprocs, routed.stdout[-4000:]
    chosen = dict(re.findall(r"(\w+) x (\d+)", row[3]))
    assert set(chosen) <= set(papcoll.algorithms), row[3]
    if node_size >= nprocs > 1:       # one node: papcoll's own policy picks shm_pap here
        assert "mpi" not in chosen, row[3]
    elif nprocs > 1:                  # across nodes MPI's for these sizes, not on a node's comm
        assert int(chosen.get("shm_pap", 0)) >= nprocs, row[3]
    for kind, calls in (("Alltoallv", nprocs), ("Alltoallw", nprocs)):
        row = re.search(r"^  %s +(\d+) +\d+ +[\d.]+  (.*)$" % kind, routed.stdout, re.M)
        assert row and int(row[1]) == calls, routed.stdout[-4000:]
        assert set(dict(re.findall(r"(\w+) x (\d+)", row[2]))) <= set(papcoll.algorithms)
    assert "papcoll run" not in plain.stdout
    quiet = launch(nprocs, ["-m", "papcoll", "run", PROGRAM], env=env, timeout=120, runner=())
    assert quiet.returncode == 0, quiet.stdout[-4000:]
    assert results(quiet.stdout) == results(plain.stdout) and "papcoll run" not in quiet.stdout


@pytest.mark.mpi
def test_an_uncaught_error_aborts_the_job_as_under_mpi4py():
    for runner, argv in ((("-m", "mpi4py"), [PROGRAM, "fail"]),
                         ((), ["-m", "papcoll", "run", PROGRAM, "fail"])):
        res = launch(3, argv, timeout=120, runner=runner)
        assert res.returncode != 0 and "this rank fails on purpose" in res.stdout, res.stdout
        assert "RESULT" not in res.stdout


@pytest.mark.mpi
@pytest.mark.parametrize("when,how", [("first", "raise"), ("later", "raise"), ("later", "exit")])
def test_an_uncaught_error_aborts_the_job_at_once(when, how):
    """Rank 1 ends with an error while the others enter an Alltoall it never joins: the job
    ends as soon as under python -m mpi4py, not after PAPCOLL_TIMEOUT (30 s here), and the
    error shown is rank 1's -- no other rank times out."""
    start = time.monotonic()
    res = launch(3, ["-m", "papcoll", "run", RAISES, when, how], env={"PAPCOLL_TIMEOUT": "30"},
                 timeout=120, runner=())
    took = time.monotonic() - start
    assert res.returncode != 0 and "rank 1 fails on purpose" in res.stdout, res.stdout[-4000:]
    assert "RESULT" not in res.stdout and "PapcollTimeoutError" not in res.stdout, res.stdout
    assert took < 10, f"the job took {took:.1f} s to end:\n{res.stdout[-4000:]}"


@pytest.mark.mpi
def test_ranks_that_disagree_on_the_summary_are_refused():
    res = launch(2, ["-c", "import os, sys; from mpi4py import MPI; "
                     "os.environ['PAPCOLL_SUMMARY'] = str(MPI.COMM_WORLD.Get_rank()); "
                     "from papcoll.runner import main; sys.exit(main([sys.argv[1]]))", PROGRAM],
                 timeout=120, runner=())
    assert res.returncode != 0
    assert "PAPCOLL_SUMMARY differs between ranks: set on [1], not on [0]" in res.stdout
