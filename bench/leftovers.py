"""What MPI libraries leave behind, so that the launchers (the report driver, the tests) can
remove it. Take ``snapshot()`` before; after, ``remove_new(before)`` deletes what appeared.
Meant for a machine that runs one job at a time (CI): a concurrent job's files would go too.
"""
from pathlib import Path

# An aborted MPICH job: its shared-memory segments, and hydra's temp files.
JOB = (("/dev/shm", "mpich_shm_*"), ("/tmp", "hydra_hwloc_xmlfile_*"))
# An Open MPI process started without mpiexec (a singleton): its btl/sm segment, which Open MPI
# never unlinks (open-mpi/ompi#13261). Jobs under mpiexec leave none, even with a rank killed.
SINGLETON = (("/dev/shm", "sm_segment.*"),)


def snapshot(patterns=JOB):
    return {path for folder, pattern in patterns for path in Path(folder).glob(pattern)}


def remove_new(before, patterns=JOB):
    for leftover in snapshot(patterns) - before:
        leftover.unlink(missing_ok=True)
