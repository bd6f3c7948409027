"""The runner's own cost: one loop of small calls, run two ways and compared --

    mpiexec -n 2 python -m papcoll run -m papcoll.bench.runner_loop plain v     # unmodified
    mpiexec -n 2 python -m mpi4py -m papcoll.bench.runner_loop explicit v       # papcoll's API

``plain`` calls ``MPI.COMM_WORLD`` as an unmodified program does (the runner routes it);
``explicit`` calls a ``papcoll.Communicator``. ``v``: Alltoallv of 8 + q bytes to rank q;
``a``: Alltoall of 8 bytes. Rank 0 prints the median over 15 rounds of 2,000 calls."""
import sys
import time

import numpy as np
from mpi4py import MPI

ROUNDS, CALLS, WARMUP = 15, 2000, 500


def main(how, kind):
    comm = MPI.COMM_WORLD
    if how == "explicit":
        import papcoll
        comm = papcoll.Communicator(comm)
    rank, size = comm.Get_rank(), comm.Get_size()
    counts = [8 + q for q in range(size)]
    send, recv = np.zeros(sum(counts), np.uint8), np.zeros((8 + rank) * size, np.uint8)
    plain_send, plain_recv = np.zeros((2, 8 * size), np.uint8)
    if kind == "v":
        def call():
            comm.Alltoallv([send, counts], [recv, [8 + rank] * size])
    else:
        def call():
            comm.Alltoall(plain_send, plain_recv)
    for _ in range(WARMUP):
        call()
    rounds = []
    for _ in range(ROUNDS):
        comm.Barrier()
        start = time.perf_counter()
        for _ in range(CALLS):
            call()
        rounds.append((time.perf_counter() - start) / CALLS)
    if rank == 0:
        print(f"runner_loop {how} {kind}: median {np.median(rounds) * 1e6:.2f} us per call",
              flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:3])
