"""Shared pytest fixtures."""
import pytest
from launcher import mpirun


@pytest.fixture
def run_mpi():
    return mpirun
