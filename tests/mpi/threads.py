"""MPI worker for tests/test_threads.py: ``threads.py MODE``; rank 0 prints ``<MODE> OK`` at
the end. One thread per Communicator: a second thread on one is refused at once, and threads
on Communicators of their own run side by side.

threads_one        two threads on one Communicator: the second call raises at once.
threads_two        two Communicators, one thread each, calls overlapping (THREAD_MULTIPLE).
"""
import os
import sys
import threading
import time

import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.dirname(__file__))
import pattern  # noqa: E402
from worker import expect, fresh, main, rank, size, world  # noqa: E402

import papcoll  # noqa: E402


def threads_one():
    pc = papcoll.Communicator(world)
    send, want = fresh(8)
    recv = np.empty_like(send)
    if rank == 1:
        time.sleep(1.0)                              # rank 0's first call waits for me
        pc.Alltoall(send, recv)
    elif rank == 0:
        first = threading.Thread(target=pc.Alltoall, args=(send, recv))
        first.start()
        time.sleep(0.2)
        start = time.monotonic()
        expect(papcoll.CommunicatorStateError, lambda: pc.Alltoall(*fresh(8)),
               "in use by another thread")
        assert time.monotonic() - start < 0.1
        first.join()
    if rank < 2:
        assert np.array_equal(recv, want)
    pc.close()


def threads_two():
    assert MPI.Query_thread() == MPI.THREAD_MULTIPLE
    pcs = [papcoll.Communicator(world), papcoll.Communicator(world)]   # made in one order
    names = ["shm_pap", "pap_direct"]
    errors = []

    def run(pc, name, salt):
        try:
            for call in range(1, 201):
                send = pattern.send_bytes(rank, size, call * 2 + salt, 24)
                recv = np.empty_like(send)
                pc.Alltoall(send, recv, algorithm=name)
                assert np.array_equal(recv, pattern.recv_bytes(rank, size, call * 2 + salt, 24))
        except BaseException as err:                 # reported by the main thread
            errors.append(err)

    workers = [threading.Thread(target=run, args=(pc, name, salt))
               for salt, (pc, name) in enumerate(zip(pcs, names))]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors, errors
    for pc in pcs:
        pc.close()


main({"threads_one": threads_one, "threads_two": threads_two})
