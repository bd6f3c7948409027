"""The deadline-aware wait mechanism, without MPI."""
import time

import pytest

from papcoll.errors import PapcollTimeoutError
from papcoll.progress import Deadline, serve_as_ready, wait_until


def test_serves_ready_peers_without_waiting_for_a_late_one():
    start = time.monotonic()
    ready_at = {1: 0.0, 2: 0.3, 3: 0.0}
    served = []
    serve_as_ready([2, 3, 1], lambda p: time.monotonic() - start >= ready_at[p],
                   lambda p: served.append(p), Deadline(5), "test")
    assert served == [3, 1, 2]


def test_timeout_names_missing_ranks_and_is_bounded():
    start = time.monotonic()
    with pytest.raises(PapcollTimeoutError) as info:
        serve_as_ready([4, 1, 2], lambda p: p == 1, lambda p: None, Deadline(0.2), "stage",
                       ranks=lambda peers: [10 + p for p in peers])
    assert info.value.missing == [12, 14]
    assert "stage" in str(info.value) and "[12, 14]" in str(info.value)
    assert time.monotonic() - start < 1.0


def test_idle_work_runs_while_nobody_is_ready():
    work = [3, 2, 1]
    serve_as_ready([0], lambda p: not work, lambda p: None, Deadline(5), "test",
                   idle=lambda: bool(work) and work.pop() is not None)
    assert work == []


def test_wait_until():
    flag = []
    wait_until(lambda: flag.append(1) or len(flag) > 3, Deadline(5), "test", lambda: [])
    with pytest.raises(PapcollTimeoutError, match=r"\[7\]"):
        wait_until(lambda: False, Deadline(0.05), "test", lambda: [7])
