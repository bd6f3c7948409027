"""Shared pytest fixtures, and the MPI libraries' own leftovers of the whole session."""
from pathlib import Path

# Before anything starts MPI in this process (importing papcoll does): what is there already.
BEFORE = set(Path("/dev/shm").iterdir())

import pytest  # noqa: E402
from launcher import mpirun  # noqa: E402

from papcoll.bench import leftovers  # noqa: E402


def pytest_unconfigure(config):
    """Processes started without mpiexec (this one too) are Open MPI singletons, whose /dev/shm
    segment Open MPI never removes; the suite leaves /dev/shm as it found it."""
    leftovers.remove_new(BEFORE, leftovers.SINGLETON)


@pytest.fixture
def run_mpi():
    return mpirun
