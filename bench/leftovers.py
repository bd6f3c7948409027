"""What an aborted MPICH job leaves behind -- shared-memory segments in /dev/shm and hydra's
temp files in /tmp -- so that the launchers (the report driver, the tests) can remove them.

Take ``snapshot()`` before a job; after it failed, ``remove_new(before)`` deletes what appeared.
Meant for a machine that runs one job at a time (CI): a concurrent job's files would go too.
"""
from pathlib import Path


def snapshot():
    return set(Path("/dev/shm").glob("mpich_shm_*")) | set(Path("/tmp").glob("hydra_hwloc_xmlfile_*"))


def remove_new(before):
    for leftover in snapshot() - before:
        leftover.unlink(missing_ok=True)
