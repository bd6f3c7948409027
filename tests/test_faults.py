"""The fault matrix on this machine (tests/faultmatrix.py says what each cell does and what it
must show). By default a subset runs: every fault and every algorithm at least once, the
hierarchical ones with a master and a non-master victim (about 3 minutes on 2 cores). The
whole product (258 cells, about 10 minutes):

    PAPCOLL_FAULTS=full .venv/bin/python -m pytest -q -rf tests/test_faults.py
"""
import os

import pytest

import faultmatrix
from launcher import OPEN_MPI

pytestmark = [pytest.mark.mpi,
              pytest.mark.skipif(OPEN_MPI, reason="needs MPICH's hydra "
                                 "(-disable-auto-cleanup, SIGUSR1 on a death)")]
CELLS = faultmatrix.cells(full=os.environ.get("PAPCOLL_FAULTS") == "full")


@pytest.mark.parametrize("fault,config", CELLS, ids=[f"{f}-{c}" for f, c in CELLS])
def test_fault(fault, config, tmp_path):
    faultmatrix.assert_cell(fault, faultmatrix.CONFIGS[config], tmp_path)
