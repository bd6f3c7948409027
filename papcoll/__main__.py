"""``python -m papcoll info``: what papcoll found here -- algorithms, transports, devices, MPI."""
import argparse
import sys

from mpi4py import MPI

import papcoll
from papcoll import config, transport
from papcoll.algorithms import policy
from papcoll.node.cma import THROTTLE, cma_status


def _bytes(bound):
    return "any" if bound is None else str(bound)


def info():
    lines = [f"papcoll {papcoll.__version__}",
             f"MPI: {MPI.Get_library_version().splitlines()[0].strip()} "
             f"(mpi4py {sys.modules['mpi4py'].__version__})",
             "", "algorithms (PAPCOLL_ALGORITHM or Alltoall(..., algorithm=NAME)):"]
    width = max(map(len, papcoll.algorithms))
    lines += [f"  {name:{width}}  {cls.description}" for name, cls in papcoll.algorithms.items()]
    lines += ["", f"selection policy ({policy.SOURCE}; first matching row wins):"]
    lines += [f"  {row.topology:16}  block x N <= {_bytes(row.max_call):>7}"
              f"  block in [{_bytes(row.min_block or 0)}, {_bytes(row.max_block)}]  -> {row.algorithm}"
              for row in policy.TABLE]
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
