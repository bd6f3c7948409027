"""papcoll across two kernels: ranks on two VMs, each with its own rxe device, joined by a
virtual link (scripts/softroce-vm --hosts 2). Real RoCE packets between the hosts, a real node
boundary that MPI's COMM_TYPE_SHARED finds without PAPCOLL_NODE_SIZE.

N = 4: ranks 0, 1 on papcoll-h1 and 2, 3 on papcoll-h2 (tests/launcher.py: placement). These
tests run only under the two-host fabric; elsewhere they skip, except with CI=true, where they
fail: CI must really run them (scripts/test does, in its last step).
"""
import os
import re

import pytest

import faultmatrix
from launcher import assert_pap_order, chain, hosts, placement

pytestmark = [pytest.mark.rdma, pytest.mark.two_hosts]

N = 4
# Real topology: PAPCOLL_NODE_SIZE empty means unset, whatever the caller's environment holds.
REAL = {"PAPCOLL_TRANSPORT": "verbs", "PAPCOLL_NODE_SIZE": "", "PAPCOLL_TIMEOUT": "120"}
# The one-sided algorithms, and the hierarchical ones over a real node boundary.
ALGORITHMS = ["direct", "pap_direct", "pap_direct_copy", "pap_direct_zcopy", "shm_direct",
              "pap_shm_direct"]
KILL_TIMEOUT = 20      # PAPCOLL_TIMEOUT of the killed-rank test
KILL_MARGIN = 5        # seconds past it that a survivor may take to report, under emulation


@pytest.fixture(autouse=True)
def two_hosts():
    names = hosts()
    if len(names) == 2:
        return names
    why = "not under the two-host fabric (SOFTROCE_VM_HOSTS unset)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{why}; with CI=true the two-host tests must run "
                    "(inside scripts/softroce-vm --hosts 2)")
    pytest.skip(f"{why}; run inside scripts/softroce-vm --hosts 2")


def test_across_hosts(run_mpi, two_hosts):
    """One job for the workers that need nothing but the fabric (under emulation its start-up
    across the hosts, ~80 s, is more than most of them take: tests/mpi/chain.py):
    - the topology: MPI's shared-memory split finds the two hosts, verbs on rxe0 everywhere;
    - `python -m papcoll info` chooses verbs with PAPCOLL_TRANSPORT unset;
    - the quick correctness matrix of every one-sided and hierarchical algorithm;
    - PAP order, the late rank (3) on the second host, the early ones on both;
    - Alltoallv and a persistent request, blocks on both sides of a small slot;
    - the model's calibration: a write inside a host (the NIC's loopback) measured apart from
      one across the link, and quicker."""
    quick = ["PAPCOLL_TEST_QUICK=1", "PAPCOLL_TEST_CALLS=60"]
    order = ["pap_direct_copy", "pap_direct_zcopy", "direct"]
    small_slot = "PAPCOLL_COPY_THRESHOLD=4096"
    res = run_mpi(N, "chain.py", *chain(
        ["hosts.py"], ["PAPCOLL_TRANSPORT=", "-m", "papcoll", "info"],
        [*quick, "matrix.py", *ALGORITHMS], ["pap.py", "order", *order],
        [small_slot, "vcalls.py", "v", "pap_direct", 20],
        [small_slot, "requests.py", "persistent", "pap_direct", 30],
        ["-m", "papcoll", "model", "calibrate", "--out", "/dev/null"]), env=REAL, timeout=2400)
    out = res.stdout
    assert res.returncode == 0, out[-6000:]
    got = {line.split()[0]: line.split(None, 2)[1:] for line in out.splitlines()
           if line.startswith("  net_")}
    assert "a process of its node" in got["net_local_L"][1], got
    assert float(got["net_local_L"][0]) < float(got["net_L"][0]), got
    h1, h2 = two_hosts
    for line in (f"HOSTS {h1},{h1},{h2},{h2}", "SHARED 2,2,2,2",
                 "TRANSPORTS " + ",".join(["verbs:rxe0"] * N),
                 "TOPOLOGY nodes=[[0, 1], [2, 3]] emulated=False", "chosen: verbs"):
        assert line in out, out[-4000:]
    for name in ALGORITHMS:
        assert f"PASS {name}:" in out, out[-3000:]
    assert "transport verbs" in out
    assert_pap_order(out, order)
    for done in ("V ok", "PERSISTENT ok"):
        assert out.count(done) == N, out[-4000:]


def test_killed_rank_reported_across_hosts(run_mpi, two_hosts):
    """Rank 3 (second host) dies by SIGKILL in a loop of pap_direct calls; the ranks on the first
    host must raise PapcollTimeoutError naming it within PAPCOLL_TIMEOUT. hydra must not end
    the job at the death (-disable-auto-cleanup)."""
    env = {**REAL, "PAPCOLL_TIMEOUT": str(KILL_TIMEOUT)}
    res = run_mpi(N, "kill.py", "pap_direct", "3", env=env, timeout=600,
                  flags=["-disable-auto-cleanup"])
    out = res.stdout
    assert re.search(rf"VICTIM 3@{two_hosts[1]}: dies", out), out[-4000:]
    # One report per survivor; ranks' lines may interleave, so match anywhere.
    reports = dict(re.findall(r"SURVIVOR (\d)@\S+: (.*?)(?=SURVIVOR|VICTIM|\n|$)", out))
    for rank in (0, 1):                        # the first host
        report = reports.get(str(rank))
        assert report is not None, f"rank {rank} reported nothing:\n{out[-4000:]}"
        found = re.match(r"PapcollTimeoutError missing \[3\] after ([\d.]+) s", report)
        assert found, f"rank {rank}: {report}"
        assert float(found.group(1)) <= KILL_TIMEOUT + KILL_MARGIN, f"rank {rank}: {report}"


# A sample of the fault matrix (tests/faultmatrix.py) across the hosts, the victim on the second
# one: a master stopped in the hierarchical call, a zero-copy call late past the timeout, a
# block size that differs. Processes left behind are looked for on the first host only (the
# second host's hydra proxy ends its own).
HOST_CELLS = [("stop", (N, "pap_shm_direct", "2", 4096, {})),
              ("late", (N, "pap_direct_zcopy", "3", 4096, {})),
              ("size_warm", (N, "pap_direct", "3", 4096, {}))]


@pytest.mark.parametrize("fault,config", HOST_CELLS,
                         ids=[f"{f}-{c[1]}-victim{c[2]}" for f, c in HOST_CELLS])
def test_fault_matrix_sample_across_hosts(fault, config, tmp_path):
    # 20 s: the hierarchical call's verbs set-up across the two emulated guests (the masters'
    # QPs and the node segment's registration) took over 10 s on a slow day, before any fault.
    faultmatrix.assert_cell(fault, config, tmp_path, timeout=20, slack=10,
                            env={"PAPCOLL_TRANSPORT": "verbs"}, flags=placement(N))


def test_mpi_over_rdma_exits_cleanly_three_times(run_mpi):
    """MPI's own traffic on rxe0, as `scripts/softroce-vm --mpi-net rdma` sets it (vm-init
    exports it in every session): right data, the RDMA device really used, and MPI_Finalize
    ends, three jobs in a row. Without vm-init's UCX settings for it, most such jobs hung in
    MPI_Finalize (docs/softroce.md)."""
    env = dict(pair.split("=", 1) for pair in os.environ["SOFTROCE_VM_MPI_ENV_RDMA"].split())
    for job in range(3):
        res = run_mpi(N, "mpi_fabric.py", env=env, timeout=400)
        assert res.returncode == 0, f"job {job}:\n{res.stdout[-4000:]}"
        for nbytes in (8, 65536):
            assert f"NETWORKS {nbytes} rdma:rxe0\n" in res.stdout, f"job {job}:\n{res.stdout}"
        assert sorted(re.findall(r"DONE (\d)", res.stdout)) == ["0", "1", "2", "3"], res.stdout
