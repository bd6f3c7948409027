"""CMA inside a node (papcoll.node.cma): the status line, the permission check and its
fallback, and the one-to-all / all-to-one primitives with their throttled variants."""
import errno
import json

import numpy as np
import pytest
from mpi4py import MPI

from papcoll import native
from papcoll.errors import PapcollError, TransportError
from papcoll.node import cma
from papcoll.node.board import NodeBoard
from papcoll.node.cma import CmaNode, cma_status
from papcoll.progress import Deadline


def cma_node(comm=MPI.COMM_SELF, timeout=5):
    """A CmaNode over a node board of its own (papcoll makes them per Communicator)."""
    deadline = Deadline(timeout)
    return CmaNode(NodeBoard(comm, range(comm.Get_size()), deadline), comm, deadline, timeout)


def refuse(*args, **kwargs):
    raise TransportError(errno.EPERM, "Operation not permitted")


def test_status_is_one_line_and_available_here():
    status = cma_status()
    assert "\n" not in status
    assert status.startswith("CMA: available ("), status


def test_status_when_a_child_may_not_read_us(monkeypatch):
    monkeypatch.setattr(native, "cma_read", refuse)      # the forked child inherits it
    status = cma_status()
    assert status.startswith("CMA: unavailable: process_vm_readv: Operation not permitted")
    assert status.endswith("; using shared memory") and "\n" not in status


def test_status_when_the_opt_in_fails(monkeypatch):
    monkeypatch.setattr(native, "allow_ptrace_any", refuse)
    assert cma_status().startswith("CMA: unavailable: cannot allow CMA on this process")


def test_one_process_node_runs_every_primitive():
    node = cma_node()
    assert node.available
    data = np.arange(10, dtype=np.uint8)
    out = np.zeros(10, np.uint8)
    node.scatter_read(0, data, out, k=1)
    node.scatter_write(0, data, out)
    node.gather_write(0, data, out, k=None)
    node.gather_read(0, data, out)
    assert (out == data).all() and node.epoch == 4
    node.close()
    node.close()


def test_the_measured_throttle_factor_is_the_default(tmp_path, monkeypatch):
    assert cma_node().throttle == cma.THROTTLE
    model = tmp_path / "cma-model.json"
    model.write_text(json.dumps({"benchmark": "papcoll CMA cost model", "throttle": 2}))
    monkeypatch.setenv("PAPCOLL_CMA_MODEL", str(model))
    node = cma_node()
    assert node.throttle == 2
    node.close()
    model.write_text(json.dumps({"throttle": 0}))
    with pytest.raises(PapcollError, match="PAPCOLL_CMA_MODEL.*integer from 1 to"):
        cma_node()
    monkeypatch.setenv("PAPCOLL_CMA_MODEL", str(tmp_path / "missing.json"))
    with pytest.raises(PapcollError, match="not a papcoll.bench cma-model result"):
        cma_node()


def test_unavailable_node_refuses_to_run(monkeypatch):
    monkeypatch.setattr(native, "allow_ptrace_any", refuse)
    node = cma_node()
    assert not node.available and "Operation not permitted" in node.reason
    with pytest.raises(TransportError, match="CMA is unavailable"):
        node.gather_read(0, np.zeros(1, np.uint8), np.zeros(1, np.uint8))
    node.close()


@pytest.mark.parametrize("me,root,k,want", [
    (3, 0, 1, 2), (3, 0, 2, 1), (3, 0, 3, None), (1, 0, 1, None), (0, 4, 2, None),
    (2, 4, 2, 0), (1, 4, 2, 5), (5, 0, None, None)])
def test_turn_after(me, root, k, want):
    """With k at a time (of 6), a process waits for the one k places before it in root order."""
    assert cma.turn_after(me, root, k, 6) == want


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs", [2, 3, 4])
def test_primitives(run_mpi, nprocs):
    res = run_mpi(nprocs, "cma.py", "primitives", timeout=240)
    assert res.returncode == 0, res.stdout[-4000:]
    assert res.stdout.count("PRIMITIVES ok") == nprocs


@pytest.mark.mpi
def test_throttled_reads_wait_their_turn(run_mpi):
    res = run_mpi(3, "cma.py", "throttle", timeout=120)
    assert res.returncode == 0, res.stdout[-4000:]
    assert res.stdout.count("THROTTLE ok") == 3


@pytest.mark.mpi
@pytest.mark.parametrize("failure", ["read", "ptracer"])
def test_falls_back_to_shared_memory_when_cma_fails(run_mpi, failure):
    res = run_mpi(3, "cma.py", "fallback", failure, timeout=120)
    assert res.returncode == 0, res.stdout[-4000:]
    assert "FALLBACK CMA: unavailable: " in res.stdout, res.stdout[-4000:]


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs,node_size,refused", [(3, 2, False), (5, 3, False),
                                                      (4, 2, True)])
def test_hierarchical_reads_large_blocks_by_cma_or_through_the_board(run_mpi, nprocs,
                                                                      node_size, refused):
    res = run_mpi(nprocs, "cma.py", "hierarchical", *(["refused"] if refused else []),
                  env={"PAPCOLL_NODE_SIZE": str(node_size)}, timeout=240)
    assert res.returncode == 0, res.stdout[-4000:]
    assert f"HIERARCHICAL ok {not refused}" in res.stdout, res.stdout[-4000:]


@pytest.mark.mpi
@pytest.mark.parametrize("name,block", [("pap_shm_direct", 8), ("shm_direct", 200_000),
                                        ("pap_shm_direct", 200_000)])
def test_a_master_stopped_for_two_seconds_delays_the_call_and_it_completes(run_mpi, name,
                                                                             block):
    res = run_mpi(4, "stopped.py", name, str(block),
                  env={"PAPCOLL_NODE_SIZE": "2", "PAPCOLL_TIMEOUT": "30"}, timeout=120)
    assert res.returncode == 0, res.stdout[-4000:]
    assert "STOPPED ok" in res.stdout, res.stdout[-4000:]
