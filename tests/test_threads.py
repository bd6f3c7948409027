"""Threads (tests/mpi/threads.py): one thread per Communicator -- a second thread on one is
refused at once, and one Communicator per thread works with calls overlapping."""
import pytest

from modes import ok

pytestmark = pytest.mark.mpi


def test_two_threads_on_one_communicator(run_mpi):
    ok(run_mpi(2, "threads.py", "threads_one", timeout=120), "threads_one")


def test_one_communicator_per_thread_works(run_mpi):
    ok(run_mpi(2, "threads.py", "threads_two", timeout=300), "threads_two")
