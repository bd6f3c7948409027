"""A program that alternates shapes of every call kind: each call against MPI's own, and the
calls that enter C once (a Communicator's CallCache) exactly those a model of the cache says
(tests/mpi/shapes.py)."""
import re

import pytest


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs,node_size,algorithm", [
    (1, 1, "mpi"), (2, 1, "mpi"), (3, 2, "mpi"), (4, 3, "pap_direct"), (5, 2, "pap_direct"),
    (3, 1, "pap_direct"), (4, 4, "mpi")])
def test_alternating_shapes_hit_the_cache_and_match_mpi(run_mpi, nprocs, node_size, algorithm):
    res = run_mpi(nprocs, "shapes.py", algorithm, 300,
                  env={"PAPCOLL_NODE_SIZE": str(node_size)}, timeout=300)
    assert res.returncode == 0, res.stdout[-4000:]
    found = re.findall(r"SHAPES ok (\d+) (\d+)", res.stdout)     # hydra may join two lines
    assert len(found) == nprocs, res.stdout[-4000:]
    hits, misses = map(int, found[0])
    assert hits + misses == 300
    # 18 shapes against 16 places: most calls hit, the rest are counted (N = 1 too: MPI's plans)
    assert hits > 150, (hits, misses)
