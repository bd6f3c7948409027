"""What the host tests share whose workers run one mode per job, rank 0 printing
``<MODE> OK`` at its end (tests/test_resources.py, test_mismatch.py, test_peer_failures.py,
test_threads.py; their workers share tests/mpi/worker.py)."""

FAST = {"PAPCOLL_TIMEOUT": "5"}


def ok(res, mode):
    assert res.returncode == 0 and f"{mode.upper()} OK" in res.stdout, res.stdout[-5000:]
