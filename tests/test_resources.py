"""Resources (tests/mpi/resources.py): buffers never pinned past their call, Communicators
dropped without close() freed, objects dropped in any order, exit with a broken Communicator
that never hangs."""
import time
from pathlib import Path

import pytest

from modes import ok

pytestmark = pytest.mark.mpi
ZERO_COPY = ["direct", "pap_direct", "pap_direct_zcopy"]      # pap_direct: 8 MiB blocks, zero-copy


@pytest.mark.parametrize("kind", ["numpy", "bytearray"])
@pytest.mark.parametrize("name", ZERO_COPY)
def test_fresh_receive_buffers_are_not_kept(run_mpi, name, kind):
    ok(run_mpi(2, "resources.py", "rss", name, kind, timeout=300), "rss")


@pytest.mark.parametrize("name", ["pap_direct", "shm_pap"])
def test_exit_with_a_broken_communicator_does_not_hang(run_mpi, name):
    start = time.monotonic()
    ok(run_mpi(3, "resources.py", "exit_broken", name, env={"PAPCOLL_TIMEOUT": "3"},
               timeout=120), "exit_broken")
    assert time.monotonic() - start < 60


@pytest.mark.parametrize("nprocs,count,name", [(2, 2000, None), (3, 2000, None),
                                               (2, 1000, "pap_direct")])
def test_unclosed_communicators_are_freed(run_mpi, nprocs, count, name):
    res = run_mpi(nprocs, "resources.py", "unclosed", str(count), *([name] if name else []),
                  timeout=600)
    ok(res, "unclosed")


@pytest.mark.parametrize("name,node_size", [("mpi", 3), ("pap_direct", 1), ("pap_direct", 2),
                                            ("pap_shm_direct", 2)])
def test_objects_dropped_in_any_order_leave_nothing(run_mpi, name, node_size):
    segments = set(Path("/dev/shm").glob("papcoll-*"))
    ok(run_mpi(3, "resources.py", "orders", name, env={"PAPCOLL_NODE_SIZE": str(node_size)},
               timeout=180), "orders")
    assert set(Path("/dev/shm").glob("papcoll-*")) <= segments
