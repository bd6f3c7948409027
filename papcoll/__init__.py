"""papcoll: a process-arrival-pattern aware MPI alltoall.

    comm = papcoll.Communicator(MPI.COMM_WORLD)
    comm.Alltoall(sendbuf, recvbuf)        # same buffer specs and results as mpi4py's
    comm.Alltoallv(...), comm.Alltoallw(...), comm.Ialltoall(...), comm.Alltoall_init(...)
"""
from .algorithms import REGISTRY as algorithms
from .api import Alltoall, Communicator, _at_finalize
from .requests import Request, waitall
from .errors import (AlgorithmError, BufferSpecError, CommunicatorError, CommunicatorStateError,
                     ConfigError, MismatchError, PapcollError, PapcollTimeoutError,
                     TransportError)

__version__ = "0.1.0"
__all__ = ["Alltoall", "Communicator", "Request", "waitall", "algorithms", "PapcollError", "BufferSpecError",
           "MismatchError", "ConfigError", "AlgorithmError", "TransportError",
           "CommunicatorError", "CommunicatorStateError", "PapcollTimeoutError"]

_at_finalize()
