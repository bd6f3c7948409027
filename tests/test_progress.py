"""The bounded wait (papcoll/progress.py), without MPI."""
import time

import pytest

from papcoll.errors import PapcollTimeoutError
from papcoll.native.lib import SLICE
from papcoll.progress import DONE, IDLE, MORE, Deadline, polled, wait


def test_a_wait_runs_slices_until_its_step_is_done():
    slices, between = [], []
    wait(lambda seconds: slices.append(seconds) or len(slices) == 3, Deadline(5),
         lambda: AssertionError("timed out"), check=lambda: between.append(1))
    assert len(slices) == 3 and len(between) == 2
    assert all(0 < s <= SLICE for s in slices)       # never longer than a slice: Ctrl-C


def test_a_wait_raises_its_error_at_the_deadline_and_no_later():
    start = time.monotonic()
    with pytest.raises(PapcollTimeoutError, match=r"\[7\]"):
        wait(lambda seconds: time.sleep(seconds) or False, Deadline(0.25),
             lambda: PapcollTimeoutError("test", [7], 0.25))
    assert 0.25 <= time.monotonic() - start < 0.25 + 2 * SLICE


def test_a_check_may_end_a_wait_early():
    def give_up():
        raise PapcollTimeoutError("peer gave up", [3], 5)
    start = time.monotonic()
    with pytest.raises(PapcollTimeoutError, match="gave up"):
        wait(lambda seconds: False, Deadline(5), lambda: AssertionError("deadline"), give_up)
    assert time.monotonic() - start < 1


def test_a_deadline_slices_what_is_left():
    d = Deadline(0.05)
    assert 0 < d.slice() <= min(0.05, SLICE)
    time.sleep(0.06)
    assert d.expired() and d.left() == 0 and d.slice() == 0


def test_a_wait_without_an_error_says_it_timed_out():
    assert wait(lambda seconds: False, Deadline(0.01), None) is False
    assert wait(lambda seconds: True, Deadline(0), None) is True


def test_a_polled_step_polls_again_at_once_after_progress_and_backs_off_in_vain():
    found = iter([MORE, MORE, IDLE, IDLE, DONE])
    step = polled(lambda: next(found))
    assert [step(1.0) for _ in range(5)] == [False, False, False, False, True]
