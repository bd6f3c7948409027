"""papcoll over RDMA verbs (SoftRoCE inside the VM): the transport alone, the correctness
matrix for the point-to-point and the hierarchical algorithms, PAP order, a write that fails
mid-call, a sample of the fault matrix, the cost benchmark with its bare verbs loop, and
Alltoallv/w and nonblocking and persistent requests. Emulation is ~10x slower than the host, so the matrix here is the quick
variant (PAPCOLL_TEST_QUICK) and N stays at 2..4."""
import pytest

import faultmatrix
from launcher import launch

pytestmark = pytest.mark.rdma

VERBS = {"PAPCOLL_TRANSPORT": "verbs", "PAPCOLL_NODE_SIZE": "1", "PAPCOLL_TIMEOUT": "120"}
ALGORITHMS = ["direct", "pap_direct", "pap_direct_copy", "pap_direct_zcopy"]


def test_raw_transport(run_mpi):
    res = run_mpi(2, "verbs_raw.py", env=VERBS, timeout=600)
    assert res.returncode == 0 and "RAW OK" in res.stdout, res.stdout[-4000:]
    assert "remote access error" in res.stdout.lower()


@pytest.mark.parametrize("nprocs", [2, 3, 4])
def test_matrix_over_verbs(run_mpi, nprocs):
    env = {**VERBS, "PAPCOLL_TEST_QUICK": "1", "PAPCOLL_TEST_CALLS": "60"}
    res = run_mpi(nprocs, "matrix.py", *ALGORITHMS, env=env, timeout=1200)
    assert res.returncode == 0, res.stdout[-6000:]
    for name in ALGORITHMS:
        assert f"PASS {name}:" in res.stdout, res.stdout[-3000:]
    assert "transport verbs" in res.stdout


@pytest.mark.parametrize("nprocs,node_size", [(2, 1), (3, 2), (4, 2)])
def test_hierarchical_matrix_over_verbs(run_mpi, nprocs, node_size):
    # The masters' aggregates go over verbs into the other node's segment (an MR on it).
    env = {**VERBS, "PAPCOLL_NODE_SIZE": str(node_size), "PAPCOLL_TEST_QUICK": "1",
           "PAPCOLL_TEST_CALLS": "60"}
    names = ["shm_direct", "pap_shm_direct"]
    res = run_mpi(nprocs, "matrix.py", *names, env=env, timeout=1200)
    assert res.returncode == 0, res.stdout[-6000:]
    for name in names:
        assert f"PASS {name}:" in res.stdout, res.stdout[-3000:]
    assert "transport verbs" in res.stdout


def test_pap_order_over_verbs(run_mpi):
    names = ["pap_direct_copy", "pap_direct_zcopy", "direct"]
    res = run_mpi(4, "pap.py", "order", *names, env=VERBS, timeout=900)
    assert res.returncode == 0, res.stdout[-4000:]
    for name in names:
        lines = [line for line in res.stdout.splitlines() if line.startswith(f"ORDER {name} ")]
        assert len(lines) == 2, res.stdout[-4000:]
        held = [("held up nothing" not in line) for line in lines]
        assert all(held) if name == "direct" else not any(held), lines


def test_fresh_receive_buffers_are_not_kept_over_verbs(run_mpi):
    names = ["direct", "pap_direct", "pap_direct_zcopy"]
    res = run_mpi(2, "resources.py", "rss", *names, "numpy", env=VERBS, timeout=1500)
    assert res.returncode == 0 and "RSS OK" in res.stdout, res.stdout[-4000:]


@pytest.mark.parametrize("name,a,b", [("pap_direct", 8, 16), ("pap_direct", 8, 1 << 17),
                                      ("direct", 16, 0), ("pap_direct_zcopy", 8, 16)])
def test_calls_that_disagree_raise_over_verbs(run_mpi, name, a, b):
    res = run_mpi(3, "mismatch.py", "mismatch", name, str(a), str(b),
                  env={**VERBS, "PAPCOLL_TIMEOUT": "30"}, timeout=600)
    assert res.returncode == 0 and "MISMATCH OK" in res.stdout, res.stdout[-4000:]


@pytest.mark.parametrize("name", ["direct", "pap_direct_copy"])
def test_a_write_failing_mid_call_is_named_and_close_releases_everything(run_mpi, name):
    res = run_mpi(3, "verbs_fault.py", name, env={**VERBS, "PAPCOLL_TIMEOUT": "20"}, timeout=600)
    assert res.returncode == 0 and f"FAULT OK {name}" in res.stdout, res.stdout[-4000:]


def test_cost_over_verbs_includes_the_bare_verbs_loop_and_counts():
    res = launch(3, ["-m", "papcoll.bench", "cost", "--sizes", "8,8K", "--iterations", "10",
                     "--algorithms", "mpi,pap_direct", "--counts"], env=VERBS, timeout=600)
    assert res.returncode == 0 and "transport verbs" in res.stdout, res.stdout[-4000:]
    rows = [line.split() for line in res.stdout.splitlines() if line[:1].isdigit()]
    assert [(r[0], " ".join(r[1:-3])) for r in rows] == [
        (s, a) for s in ("8", "8K") for a in ("mpi", "pap_direct", "bare verbs loop")]
    assert all(float(r[-3]) > 0 and float(r[-2]) > 0 for r in rows), rows
    # Per late call of pap_direct, N=3: at least a write to each of its 2 peers, and their 2
    # notices reaped, each receive posted again.
    counts = [dict(zip(words[::2], map(float, words[1::2]))) for words in (
        line.split(": ", 1)[1].replace(",", "").split()
        for line in res.stdout.splitlines() if line.startswith("#   per late call:"))]
    assert len(counts) == 4, res.stdout[-4000:]
    for mine in (counts[1], counts[3]):
        assert mine["send_wrs"] >= 2 and mine["recv_cqes"] >= 2, mine
        assert mine["recv_wrs"] == mine["recv_cqes"] and mine["polls"] >= mine["empty_polls"]


# A sample of the fault matrix (tests/faultmatrix.py) over verbs: kills, a stop, a late rank and
# disagreements, on copy-based and zero-copy writes and the masters' exchange.
# Emulation is slow, so the timeout is longer than on the host.
FAULT_CELLS = [("kill_during", "pap_direct-4K"), ("stop", "pap_direct-64K-zcopy"),
               ("late", "pap_direct_zcopy"), ("size_warm", "direct"),
               ("kill_during", "pap_shm_direct-ns2-master"), ("alg_cold", "shm_direct-ns2-nonmaster")]


@pytest.mark.parametrize("fault,config", FAULT_CELLS, ids=[f"{f}-{c}" for f, c in FAULT_CELLS])
def test_fault_matrix_sample_over_verbs(fault, config, tmp_path):
    faultmatrix.assert_cell(fault, faultmatrix.CONFIGS[config], tmp_path, timeout=20, slack=10,
                            env={"PAPCOLL_TRANSPORT": "verbs"})


# Alltoallv/w (each pair by its block's length: inbox or zero-copy) and requests (a persistent
# zero-copy request's notice-only starts) over verbs, blocks on both sides of a small slot.
CALLS = [("V ok", ["vcalls.py", "v", "pap_direct", 20]),
         ("W ok", ["vcalls.py", "w", "pap_direct"]),
         ("MISMATCH 0 [1]", ["vcalls.py", "mismatch", "pap_direct"]),
         ("PERSISTENT ok", ["requests.py", "persistent", "pap_direct", 30]),
         ("NONBLOCKING ok", ["requests.py", "nonblocking", "pap_direct"])]


@pytest.mark.parametrize("done,args", CALLS, ids=[args[1] for _, args in CALLS])
def test_variable_calls_and_requests_over_verbs(run_mpi, done, args):
    res = run_mpi(3, *args, env={**VERBS, "PAPCOLL_COPY_THRESHOLD": "4096"}, timeout=900)
    assert res.returncode == 0, res.stdout[-4000:]
    assert res.stdout.count(done) == (1 if done.startswith("MISMATCH") else 3), \
        res.stdout[-4000:]
