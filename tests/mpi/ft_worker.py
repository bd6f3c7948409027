"""FT runs for tests/test_ft.py, launched as ``mpiexec -n N python -m mpi4py ft_worker.py ...``.

    ft_worker.py [FT OPTIONS]                  python -m papcoll.bench ft [FT OPTIONS]
    ft_worker.py --perturb [FT OPTIONS]        same, initial condition off by 1e-6 in one element
    ft_worker.py --every-algorithm CLASS       run_ft with each registered papcoll algorithm,
                                               ranks arriving up to 5 ms apart
"""
import sys

from mpi4py import MPI
from papcoll.bench import __main__ as bench
from papcoll.bench import ft

import papcoll


def perturb():
    """Shift u0 at grid point (0, 0, 0), which the checksum samples: verification must fail."""
    npb = ft.initial_conditions

    def perturbed(nx, ny, nz, z0, nzl):
        u = npb(nx, ny, nz, z0, nzl)
        if z0 == 0:
            u[0, 0, 0] += 1e-6
        return u
    ft.initial_conditions = perturbed


def every_algorithm(cls):
    comm = MPI.COMM_WORLD
    failed = 0
    for name in sorted(papcoll.algorithms):
        try:
            result = ft.run_ft(comm, cls, name, imbalance=0.005)
        except papcoll.AlgorithmError as err:     # e.g. it needs hardware this machine lacks
            if comm.Get_rank() == 0:
                print(f"{name}: skipped: {err}", flush=True)
            continue
        failed += not result["verified"]
        if comm.Get_rank() == 0:
            status = "SUCCESSFUL" if result["verified"] else "UNSUCCESSFUL"
            print(f"{name}: VERIFICATION {status} ({result['time']:.3f} s)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    argv = sys.argv[1:]
    if argv[:1] == ["--every-algorithm"]:
        sys.exit(every_algorithm(argv[1]))
    if argv[:1] == ["--perturb"]:
        perturb()
        argv = argv[1:]
    sys.exit(bench.main(["ft", *argv]))
