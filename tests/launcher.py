"""Launching MPI workers under mpiexec with bounded time (shared by the tests; a module of its
own, because every conftest.py is imported as the same module name 'conftest')."""
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from papcoll.bench import leftovers

HERE = Path(__file__).parent
MPIEXEC = str(Path(sys.executable).with_name("mpiexec"))


def _open_mpi():
    out = subprocess.run([MPIEXEC, "--version"], capture_output=True, text=True).stdout
    return "Open MPI" in out or "OpenRTE" in out


MPIEXEC_FLAGS = ["--allow-run-as-root", "--oversubscribe"] if _open_mpi() else []


def mpirun(n, script, *args, env=None, timeout=300):
    """Run ``tests/mpi/<script>`` on ``n`` ranks; return the CompletedProcess (output as text)."""
    return launch(n, [HERE / "mpi" / script, *args], env=env, timeout=timeout)


def launch(n, argv, env=None, timeout=300):
    """Run ``python -m mpi4py ARGV...`` on ``n`` ranks; return the CompletedProcess.

    ``python -m mpi4py`` aborts every rank on an unhandled exception, and the timeout kills the
    whole process group, so a broken algorithm can fail this test but never hang it.
    """
    before = leftovers.snapshot()
    cmd = [MPIEXEC, *MPIEXEC_FLAGS, "-n", str(n), sys.executable, "-m", "mpi4py", *map(str, argv)]
    full_env = {**os.environ, "PAPCOLL_TIMEOUT": "30", **(env or {})}
    proc = subprocess.Popen(cmd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"{argv} on {n} ranks did not finish in {timeout} s:\n{out[-4000:]}")
    finally:
        if proc.returncode != 0:
            leftovers.remove_new(before)
    return subprocess.CompletedProcess(cmd, proc.returncode, out)

