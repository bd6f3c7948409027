"""MPI worker: a rank dies (SIGKILL) in the middle of a loop of Alltoall calls, and every other
rank must report it: ``PapcollTimeoutError`` naming that rank, within PAPCOLL_TIMEOUT.

    kill.py ALGORITHM [VICTIM]       VICTIM: the rank that dies (default: the last one)

Launch it with ``mpiexec -disable-auto-cleanup`` (MPICH), else hydra ends the whole job as soon
as the victim dies. hydra tells the survivors that a process died with SIGUSR1, which would end
Python: they note it instead. Every rank prints one line:

    VICTIM r@host: dies before call K
    SURVIVOR r@host: PapcollTimeoutError missing [v] after S s in call K (SIGUSR1 seen|not seen)
    SURVIVOR r@host: FAILED <what happened instead>

and leaves with os._exit(0): MPI_Finalize (and the Communicator's close) would wait for the dead
rank. The launcher's time limit catches a survivor that never reports.
"""
import os
import signal
import socket
import sys
import time

import numpy as np
from mpi4py import MPI

import papcoll

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
name = sys.argv[1]
victim = int(sys.argv[2]) if len(sys.argv) > 2 else size - 1
CALLS = 20            # the victim dies before call CALLS (counting from 0); the others go on
BLOCK = 4096          # bytes per peer
me = f"{rank}@{socket.gethostname()}"

notified = []
signal.signal(signal.SIGUSR1, lambda *_: notified.append(time.monotonic()))


def say(line):
    os.write(1, (line + "\n").encode())     # one write: hydra may split a line written in parts


def main():
    pc = papcoll.Communicator(world)
    send = np.full(size * BLOCK, rank, np.uint8)
    recv = np.empty_like(send)
    for call in range(CALLS + 5):
        if rank == victim and call == CALLS:
            say(f"VICTIM {me}: dies before call {call}")
            os.kill(os.getpid(), signal.SIGKILL)
        start = time.monotonic()
        try:
            pc.Alltoall(send, recv, algorithm=name)
        except papcoll.PapcollTimeoutError as err:
            elapsed = time.monotonic() - start
            seen = "SIGUSR1 seen" if notified else "SIGUSR1 not seen"
            return (f"SURVIVOR {me}: PapcollTimeoutError missing {err.missing} after {elapsed:.1f} s"
                    f" in call {call} ({seen}): {err}")
        except Exception as err:        # noqa: BLE001  (reported, not raised: see the docstring)
            elapsed = time.monotonic() - start
            return (f"SURVIVOR {me}: FAILED {type(err).__name__} after {elapsed:.1f} s in call"
                    f" {call}: {err}")
        if not (recv.reshape(size, BLOCK) == np.arange(size, dtype=np.uint8)[:, None]).all():
            return f"SURVIVOR {me}: FAILED wrong data in call {call}"
    return f"SURVIVOR {me}: FAILED all {CALLS + 5} calls completed without rank {victim}"


try:
    say(main())
except BaseException as err:            # noqa: BLE001
    say(f"SURVIVOR {me}: FAILED {type(err).__name__} outside the calls: {err}")
os._exit(0)
