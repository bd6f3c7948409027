"""The intra-node algorithms when a process dies mid-run: bounded waits that name it, and
nothing left in /dev/shm."""
import os
import re

import pytest

from papcoll.node import segment as shm

TIMEOUT = 5


@pytest.mark.mpi
@pytest.mark.parametrize("name", ["shm_pap", "cma_pap"])
def test_a_dead_process_is_named_within_the_timeout(run_mpi, name):
    res = run_mpi(3, "intranode.py", name, env={"PAPCOLL_TIMEOUT": str(TIMEOUT)}, timeout=120)
    out = res.stdout
    pids = [int(p) for p in re.search(r"PIDS ([\d ]+)", out).group(1).split()]
    timeouts = re.findall(r"TIMEOUT rank (\d) missing \[([\d, ]*)\] after ([\d.]+) s", out)
    assert sorted(int(r) for r, _, _ in timeouts) == [0, 1], out[-3000:]
    for _, missing, elapsed in timeouts:
        assert 2 in [int(m) for m in missing.split(",")], out[-3000:]
        assert TIMEOUT <= float(elapsed) < TIMEOUT + 2, out[-3000:]
    # Survivors closed without hanging, and found nothing while the dead rank was frozen...
    assert len(re.findall(r"CLOSED rank \d leftovers \[\]", out)) == 2, out[-3000:]
    # ...nor is there anything now that every process of the job is gone.
    prefixes = tuple(f"{shm.PREFIX}{pid}-" for pid in pids)
    assert [name for name in os.listdir(shm.SHM_DIR) if name.startswith(prefixes)] == []
