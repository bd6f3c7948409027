"""papcoll over RDMA verbs (SoftRoCE inside the VM): the transport alone, the correctness
matrix for the point-to-point and the hierarchical algorithms, PAP order, calls that
disagree, a write that fails mid-call, a sample of the fault matrix, the cost benchmark with
its bare verbs loop, and Alltoallv/w and nonblocking and persistent requests. Emulation is
~100x slower than the host, so the matrix here is the quick variant (PAPCOLL_TEST_QUICK), N
stays at 2..4, and the workers of one N share a job (tests/mpi/chain.py)."""
import pytest

import faultmatrix
from launcher import assert_pap_order, chain

pytestmark = pytest.mark.rdma

VERBS = {"PAPCOLL_TRANSPORT": "verbs", "PAPCOLL_NODE_SIZE": "1", "PAPCOLL_TIMEOUT": "120"}
ALGORITHMS = ["direct", "pap_direct", "pap_direct_copy", "pap_direct_zcopy"]


# Under emulation a rank's start-up costs more than most workers' work (tests/mpi/chain.py), so
# the workers of one process count run as one job: the transport alone and then the correctness
# matrix, flat and hierarchical, at N = 2, 3 and 4, with the other workers of that N.
QUICK = {"PAPCOLL_TEST_QUICK": "1", "PAPCOLL_TEST_CALLS": "60"}
HIERARCHICAL = ["shm_direct", "pap_shm_direct"]


def matrix_steps(node_size):
    quick = [f"{name}={value}" for name, value in QUICK.items()]
    return [[*quick, "matrix.py", *ALGORITHMS],
            [*quick, f"PAPCOLL_NODE_SIZE={node_size}", "matrix.py", *HIERARCHICAL]]


def assert_matrix(out):
    for name in ALGORITHMS + HIERARCHICAL:
        assert f"PASS {name}:" in out, out[-3000:]
    assert "transport verbs" in out


def test_two_ranks_over_verbs(run_mpi):
    """The raw transport (a refused write among its cases), the matrix (the hierarchical one as
    two nodes of one rank: the masters' aggregates go over verbs into the other node's segment,
    an MR on it), fresh receive buffers never kept registered, and Direct's persistent
    requests (zero-copy at every size: their own plans, in step order)."""
    rss = ["resources.py", "rss", "direct", "pap_direct", "pap_direct_zcopy", "numpy"]
    res = run_mpi(2, "chain.py", *chain(["verbs_raw.py"], *matrix_steps(1), rss,
                                        ["requests.py", "persistent", "direct", 20]),
                  env=VERBS, timeout=2400)
    assert res.returncode == 0, res.stdout[-6000:]
    assert res.stdout.count("PERSISTENT ok") == 2, res.stdout[-4000:]
    assert "RAW OK" in res.stdout and "remote access error" in res.stdout.lower(), \
        res.stdout[-4000:]
    assert_matrix(res.stdout)
    assert "RSS OK" in res.stdout, res.stdout[-4000:]


# Alltoallv/w (each pair by its block's length: inbox or zero-copy) and requests (a persistent
# zero-copy request's notice-only starts) over verbs, blocks on both sides of a small slot.
CALLS = [("V ok", ["vcalls.py", "v", "pap_direct", 20]),
         ("W ok", ["vcalls.py", "w", "pap_direct"]),
         ("PERSISTENT ok", ["requests.py", "persistent", "pap_direct", 30]),
         ("NONBLOCKING ok", ["requests.py", "nonblocking", "pap_direct"]),
         ("MISMATCH 0 [1]", ["vcalls.py", "mismatch", "pap_direct"])]
COST = ["-m", "papcoll.bench", "cost", "--sizes", "8,8K", "--iterations", "10",
        "--algorithms", "mpi,pap_direct", "--counts"]
POSTED = ["-m", "papcoll.bench", "cost", "--sizes", "8", "--iterations", "10",
          "--algorithms", "mpi,pap_direct", "--posted"]


def test_three_ranks_over_verbs(run_mpi):
    """The cost benchmark with its bare verbs loop and counts, and up to the posts, the matrix
    (the hierarchical one as nodes of 2 and 1), Alltoallv/w and requests."""
    calls = [["PAPCOLL_COPY_THRESHOLD=4096", *args] for _, args in CALLS]
    res = run_mpi(3, "chain.py", *chain(COST, POSTED, *matrix_steps(2), *calls), env=VERBS,
                  timeout=2400)
    assert res.returncode == 0, res.stdout[-6000:]
    out = res.stdout
    assert_matrix(out)
    for done, _ in CALLS:
        assert out.count(done) == (1 if done.startswith("MISMATCH") else 3), out[-4000:]
    rows = [line.split() for line in out.splitlines() if line.split()[:1] in (["8"], ["8K"])]
    assert [(r[0], " ".join(r[1:-4])) for r in rows] == [
        (s, a) for s in ("8", "8K", "8") for a in ("mpi", "pap_direct", "bare verbs loop")], out
    assert all(float(r[-4]) > 0 and float(r[-3]) >= 0 and float(r[-2]) > 0 for r in rows), rows
    # Per late call of pap_direct, N=3: at least a write to each of its 2 peers, and their 2
    # notices reaped, each receive posted again.
    counts = [dict(zip(words[::2], map(float, words[1::2]))) for words in (
        line.split(": ", 1)[1].replace(",", "").split()
        for line in out.splitlines() if line.startswith("#   per late call:"))]
    assert len(counts) == 4, out[-4000:]
    for mine in (counts[1], counts[3]):
        assert mine["send_wrs"] >= 2 and mine["recv_cqes"] >= 2, mine
        assert mine["recv_wrs"] == mine["recv_cqes"] and mine["polls"] >= mine["empty_polls"]
        assert 1 <= mine["doorbells"] <= mine["send_wrs"], mine     # lists of writes


def test_four_ranks_over_verbs(run_mpi):
    """The matrix (the hierarchical one as two nodes of 2), PAP order (the PAP algorithms let
    the early ranks finish whatever the late one holds, Direct does not), persistent
    zero-copy requests at every size, each started by its own plan, and the model's
    calibration over verbs: the largest write copied at its post (PC_IBV_BCOPY between two
    processes), a larger write's acknowledgement, measured, and no write waiting for its
    target's answer."""
    names = ["pap_direct_copy", "pap_direct_zcopy", "direct"]
    calibrate = ["PAPCOLL_NODE_SIZE=2", "-m", "papcoll", "model", "calibrate", "--out", "/dev/null"]
    res = run_mpi(4, "chain.py", *chain(*matrix_steps(2), ["pap.py", "order", *names],
                                        ["requests.py", "persistent", "pap_direct_zcopy", 20],
                                        calibrate),
                  env=VERBS, timeout=2400)
    assert res.returncode == 0, res.stdout[-6000:]
    assert res.stdout.count("PERSISTENT ok") == 4, res.stdout[-4000:]
    assert_matrix(res.stdout)
    assert_pap_order(res.stdout, names)
    got = {line.split()[0]: line.split(None, 2)[1:] for line in res.stdout.splitlines()
           if line.startswith("  net_")}
    assert "transport verbs" in res.stdout and got["net_copied"][0] == "8192", got
    assert float(got["net_ack"][0]) >= 0 and "to each other at once" in got["net_ack"][1], got
    # an RDMA write completes by the target's NIC, wherever it lands: no call of the target's
    assert [got[f"net{w}_answered"][0] for w in ("", "_given", "_exposed")] == ["0"] * 3, got


MISMATCHES = [("pap_direct", 8, 16), ("pap_direct", 8, 1 << 17), ("direct", 16, 0),
              ("pap_direct_zcopy", 8, 16)]


def test_a_failing_write_and_calls_that_disagree_over_verbs(run_mpi):
    """One job of three ranks. First a write refused mid-call, on the zero-copy direct and then
    on the copy-based pap_direct_copy: it is named, and close gives the device back every
    resource (the next Communicator starts from the same counts). Then each disagreement
    raises on every rank, names the calls and leaves its Communicator unusable; the next
    Communicator works."""
    names = ["direct", "pap_direct_copy"]
    steps = [*(["PAPCOLL_TIMEOUT=20", "verbs_fault.py", name] for name in names),
             *(["PAPCOLL_TIMEOUT=30", "mismatch.py", "mismatch", name, a, b]
               for name, a, b in MISMATCHES)]
    res = run_mpi(3, "chain.py", *chain(*steps), env=VERBS, timeout=2400)
    assert res.returncode == 0, res.stdout[-4000:]
    for name in names:
        assert f"FAULT OK {name}" in res.stdout, res.stdout[-4000:]
    assert res.stdout.count("MISMATCH OK") == len(MISMATCHES), res.stdout[-4000:]


# A sample of the fault matrix (tests/faultmatrix.py) over verbs: kills, a stop and a
# disagreement, on copy-based and zero-copy writes and the masters' exchange. A zero-copy call
# late past the timeout and a block size that differs are the two-host step's cells
# (tests/rdma/test_two_hosts.py), across two kernels. Emulation is slow, so the timeout is
# longer than on the host.
FAULT_CELLS = [("kill_during", "pap_direct-4K"), ("stop", "pap_direct-64K-zcopy"),
               ("kill_during", "pap_shm_direct-ns2-master"), ("alg_cold", "shm_direct-ns2-nonmaster")]


@pytest.mark.parametrize("fault,config", FAULT_CELLS, ids=[f"{f}-{c}" for f, c in FAULT_CELLS])
def test_fault_matrix_sample_over_verbs(fault, config, tmp_path):
    faultmatrix.assert_cell(fault, faultmatrix.CONFIGS[config], tmp_path, timeout=20, slack=10,
                            env={"PAPCOLL_TRANSPORT": "verbs"})
