"""Launching MPI workers under mpiexec with bounded time (shared by the tests; a module of its
own, because every conftest.py is imported as the same module name 'conftest')."""
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from mpi4py import MPI

from papcoll.bench import leftovers

HERE = Path(__file__).parent
# The venv's mpiexec through the one script that knows the flags and environment each MPI
# needs here (Open MPI's, without RDMA, among them): the tests launch what users launch.
MPIEXEC = str(HERE.parent / "scripts" / "mpiexec")
OPEN_MPI = "Open MPI" in MPI.Get_library_version()


def hosts():
    """The hosts of the two-host fabric (scripts/softroce-vm --hosts 2 sets SOFTROCE_VM_HOSTS
    on its first host); [] elsewhere."""
    return [h for h in os.environ.get("SOFTROCE_VM_HOSTS", "").split(",") if h]


def placement(n):
    """mpiexec flags putting ``n`` ranks on the fabric's hosts, consecutive ranks per host and as
    even as can be (N=4: 0,1 on the first host, 2,3 on the second); none on one host."""
    names = hosts()
    if not names:
        return []
    per_host = -(-n // len(names))
    slots = ",".join(f"{name}:{per_host}" for name in names)
    if OPEN_MPI:                   # without --map-by, PRRTE put all four ranks on the first host
        return ["--host", slots, "--map-by", f"ppr:{per_host}:node"]
    return ["-hosts", slots]


def mpirun(n, script, *args, env=None, timeout=300, flags=()):
    """Run ``tests/mpi/<script>`` on ``n`` ranks; return the CompletedProcess (output as text)."""
    return launch(n, [HERE / "mpi" / script, *args], env=env, timeout=timeout, flags=flags)


def launch(n, argv, env=None, timeout=300, flags=(), runner=("-m", "mpi4py")):
    """Run ``python -m mpi4py ARGV...`` on ``n`` ranks; return the CompletedProcess.
    ``flags`` go to mpiexec before ``-n``; ``runner`` replaces ``-m mpi4py``.

    ``python -m mpi4py`` aborts every rank on an unhandled exception, and the timeout kills the
    whole process group, so a broken algorithm can fail this test but never hang it.
    """
    before = leftovers.snapshot()
    cmd = [MPIEXEC, *placement(n), *flags, "-n", str(n),
           sys.executable, *runner, *map(str, argv)]
    full_env = {**os.environ, "PAPCOLL_TIMEOUT": "30", **(env or {})}
    proc = subprocess.Popen(cmd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"{argv} on {n} ranks did not finish in {timeout} s:\n{out[-4000:]}")
    finally:       # a job may end with rc 0 and a rank killed in it (the ones that freeze one)
        leftovers.remove_new(before)
    return subprocess.CompletedProcess(cmd, proc.returncode, out)



def chain(*steps):
    """The arguments of ``tests/mpi/chain.py`` that run ``steps`` (each a list of a worker's
    words, ``NAME=VALUE`` first) one after another in one job."""
    words = []
    for step in steps:
        words += [*(["--"] if words else []), *map(str, step)]
    return words


def assert_pap_order(out, names):
    """``tests/mpi/pap.py order NAME...``'s verdict in its output ``out``: for each name, both
    early ranks' ORDER lines; a PAP algorithm lets them finish among themselves (held up
    nothing), Direct's step order makes them wait for the late rank."""
    for name in names:
        lines = [line for line in out.splitlines() if line.startswith(f"ORDER {name} ")]
        assert len(lines) == 2, out[-4000:]
        held = [("held up nothing" not in line) for line in lines]
        assert all(held) if name == "direct" else not any(held), lines
