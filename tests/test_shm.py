"""The node segment (papcoll.node.segment): permissions, layout, and that nothing is ever
left in /dev/shm -- after close, after a crash, with one process or several."""
import os
import re
import stat
import subprocess
import sys

import pytest
from mpi4py import MPI

from papcoll.bench import leftovers as mpich
from papcoll.node import segment as shm
from papcoll.node.segment import LINE, PAGE, SHM_DIR, Segment
from papcoll.progress import Deadline


def leftovers(pids):
    """Names in /dev/shm that papcoll created from any of these processes."""
    prefixes = tuple(f"{shm.PREFIX}{pid}-" for pid in pids)
    return [name for name in os.listdir(SHM_DIR) if name.startswith(prefixes)]


@pytest.fixture
def spy_unlink(monkeypatch):
    """Records (name, mode, existed) for every name the segment unlinks, just before it does."""
    seen = []
    real = shm._unlink

    def spy(name):
        st = os.stat(os.path.join(SHM_DIR, name))
        seen.append((name, stat.S_IMODE(st.st_mode), st.st_size))
        real(name)

    monkeypatch.setattr(shm, "_unlink", spy)
    return seen


def test_created_owner_only_and_unlinked_once_attached(spy_unlink):
    old = os.umask(0)           # a permissive umask must not widen the mode
    try:
        seg = Segment(MPI.COMM_SELF, 100, 5000, Deadline(5))
    finally:
        os.umask(old)
    (name, mode, size), = spy_unlink
    assert mode == 0o600
    assert size == seg.nbytes == PAGE + 2 * PAGE
    assert name.startswith(f"{shm.PREFIX}{os.getpid()}-")
    assert not os.path.exists(os.path.join(SHM_DIR, name))
    assert leftovers([os.getpid()]) == []
    seg.close()
    seg.close()                 # safe twice
    assert seg.closed


def test_layout_is_page_aligned_and_words_stride_over_control_pages():
    seg = Segment(MPI.COMM_SELF, 3 * LINE, 10, Deadline(5))
    assert seg.control_stride == PAGE and seg.region_stride == PAGE
    assert seg.data_offset % PAGE == 0
    assert seg.array.ctypes.data % PAGE == 0
    seg.words(LINE)[0] = 7
    assert seg.control(0)[LINE] == 7
    mine = seg.my_words(0, 3)
    mine[2] = 9
    assert seg.control(0)[2 * LINE] == 9 and mine.strides == (LINE,)
    seg.region(0)[:] = 5
    assert (seg.regions[:PAGE] == 5).all()
    with pytest.raises(ValueError):
        seg.words(PAGE)            # past the control page
    with pytest.raises(ValueError):
        seg.words(4)               # unaligned
    seg.close()


def test_close_with_live_views_defers_the_unmap():
    seg = Segment(MPI.COMM_SELF, 8, PAGE, Deadline(5))
    view = seg.region(0)
    view[:] = 1
    seg.close()                    # the view keeps the mapping: no crash, no error
    assert view.sum() == PAGE
    del view


def test_creation_failure_is_a_transport_error(monkeypatch):
    monkeypatch.setattr(shm, "SHM_DIR", "/nonexistent-papcoll-dir")
    with pytest.raises(shm.TransportError, match="cannot create a node segment"):
        Segment(MPI.COMM_SELF, 8, 8, Deadline(5))


def test_nothing_left_after_a_killed_process():
    """A process killed with its segment mapped leaves nothing behind."""
    code = ("import os, signal, sys; from mpi4py import MPI; "
            "from papcoll.node.segment import Segment; from papcoll.progress import Deadline; "
            "seg = Segment(MPI.COMM_SELF, 64, 1 << 16, Deadline(5)); seg.region(0)[:] = 1; "
            "print(os.getpid(), flush=True); os.kill(os.getpid(), signal.SIGKILL)")
    before = mpich.snapshot()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    mpich.remove_new(before)      # the killed singleton's own MPICH segment is MPICH's, not ours
    assert proc.returncode == -9, proc.stderr
    pid = int(proc.stdout.split()[0])
    assert leftovers([pid]) == []


@pytest.mark.mpi
@pytest.mark.parametrize("mode", ["close", "kill"])
def test_segment_across_processes(run_mpi, mode):
    """Every process sees the others' regions; the name is gone once all attached; nothing is
    left after close, nor when a process is killed with the segment mapped."""
    res = run_mpi(3, "segment.py", mode, timeout=120)
    pids = [int(pid) for pid in re.findall(r"PID \d+ (\d+)", res.stdout)]
    assert len(pids) == 3, res.stdout[-3000:]
    if mode == "close":
        assert res.returncode == 0, res.stdout[-3000:]
        assert res.stdout.count("SEGMENT ok") == 3, res.stdout[-3000:]
    else:
        assert res.returncode != 0, res.stdout[-3000:]
    assert leftovers(pids) == []
