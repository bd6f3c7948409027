"""``python -m papcoll info``: what papcoll found here -- algorithms, transports, devices, MPI."""
import argparse
import sys

from mpi4py import MPI

import papcoll
from papcoll import config, transport
from papcoll.algorithms import policy
from papcoll.node.cma import THROTTLE, cma_status


def info():
    lines = [f"papcoll {papcoll.__version__}",
             f"MPI: {MPI.Get_library_version().splitlines()[0].strip()} "
             f"(mpi4py {sys.modules['mpi4py'].__version__})",
             "", "algorithms (PAPCOLL_ALGORITHM or Alltoall(..., algorithm=NAME)):"]
    width = max(map(len, papcoll.algorithms))
    lines += [f"  {name:{width}}  {cls.description}" for name, cls in papcoll.algorithms.items()]
    lines += ["", "selection policy (first matching row wins):"]
    lines += [f"  {where:16}  block x N <= {limit if limit is not None else 'any':>7}"
              f"  block in [{floor or 0}, {ceiling if ceiling is not None else 'any'}]  -> {name}"
              for where, limit, (floor, ceiling), name in policy.TABLE]
    lines += ["", "transports (PAPCOLL_TRANSPORT):"]
    lines += [f"  {line}" for line in transport.status()]
    measured = config.cma_throttle()
    throttle = (f"{measured} (measured: PAPCOLL_CMA_MODEL)" if measured else
                f"{THROTTLE} (default; measure with papcoll.bench cma-model, PAPCOLL_CMA_MODEL)")
    lines += ["", "inside a node:",
              "  shared memory: one POSIX shm segment per Communicator and node (shm_pap, cma_pap)",
              f"  {cma_status()}", f"  CMA throttle factor k: {throttle}"]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m papcoll", description=__doc__)
    parser.add_argument("command", choices=["info"])
    parser.parse_args(argv)
    print(info())
    return 0


if __name__ == "__main__":
    sys.exit(main())
