"""A plain mpi4py program that only calls mpi4py-fft (PyPI `mpi4py-fft`, not part of papcoll).

Forward and backward 3-D FFTs of a random complex array of N^3 on a pencil (2-D process grid)
or slab (1-D) decomposition; mpi4py-fft's transposes are its own Alltoallw calls over subarray
datatypes on sub-communicators of a Cartesian communicator. It never imports papcoll: run it
under `python -m mpi4py` and under `python -m papcoll run` and compare what rank 0 prints.

    mpiexec -n 4 python -m mpi4py scripts/fft_roundtrip.py N pencil|slab [ROUNDS]

Prints the round-trip error (max |backward(forward(u)) - u|) and a checksum of the spectrum
(FFTW_ESTIMATE plans: the same arithmetic in every run, so equal outputs print equal digits).
"""
import sys

import numpy as np
from mpi4py import MPI
from mpi4py_fft import PFFT, newDistArray

n = int(sys.argv[1])
grid = {"pencil": None, "slab": (-1,)}[sys.argv[2]]       # None: the library's 2-D grid
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 10
comm = MPI.COMM_WORLD

fft = PFFT(comm, (n, n, n), dtype=np.complex128, grid=grid, planner_effort="FFTW_ESTIMATE")
u = newDistArray(fft, False)
rng = np.random.default_rng(1234 + comm.rank)
u[:] = rng.random(u.shape) + 1j * rng.random(u.shape)
u_hat = newDistArray(fft, True)
v = newDistArray(fft, False)
error = 0.0
for _ in range(rounds):
    u_hat = fft.forward(u, u_hat)
    v = fft.backward(u_hat, v)
    error = max(error, float(np.max(np.abs(v - u))))
error = comm.allreduce(error, op=MPI.MAX)
checksum = comm.allreduce(float(np.sum(np.abs(u_hat))), op=MPI.SUM)
if comm.rank == 0:
    print(f"N={n} {sys.argv[2]} grid={fft.subcomm and [c.size for c in fft.subcomm]} "
          f"rounds={rounds} roundtrip_error={error:.3e} checksum={checksum:.15e}")
fft.destroy()
