"""MPI worker for tests/test_mismatch.py: ``mismatch.py MODE ARGS...``; rank 0 prints
``<MODE> OK`` at the end. Calls that disagree -- in size, in the policy's choice, in the
algorithm, or a buffer shorter than a peer expects -- raise on every rank, within the timeout.

mismatch NAME A B  the last rank passes B bytes per peer, the others A (after three calls of
                   A on every rank, so a plan may be left): every rank raises MismatchError
                   naming the calls, within the timeout, and the Communicator is unusable.
policy             N=2: calls at and above shm_pap's limit in the policy table, algorithm left to it
                   (shm_pap against cma_pap): MismatchError on both.
family             N=2: shm_pap against pap_direct on first use: an error within the timeout
                   on both, nothing left in /dev/shm.
beyond             N=2, cma_pap: rank 1 sends 8 bytes per peer from a buffer that ends where
                   an inaccessible page begins, rank 0 expects 16: MismatchError, never a read
                   past rank 1's buffer (that would be EFAULT).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from worker import expect, fresh, leftovers, main, rank, size, world  # noqa: E402

import papcoll  # noqa: E402


def unusable(pc):
    expect(papcoll.CommunicatorStateError, lambda: pc.Alltoall(*fresh(8)), "unusable")


def mismatch(name, a, b):
    odd = size - 1
    pc = papcoll.Communicator(world)
    for _ in range(3):                               # the same shape on every rank: a plan
        send, want = fresh(a)
        recv = np.empty_like(send)
        pc.Alltoall(send, recv, algorithm=name)
        assert np.array_equal(recv, want)
    nbytes = b if rank == odd else a
    send = np.zeros(size * nbytes, np.uint8)
    err = expect(papcoll.MismatchError,
                 lambda: pc.Alltoall(send, np.empty_like(send), algorithm=name),
                 "calls disagree", f"with {a} bytes per peer", f"with {b} bytes per peer")
    assert err.ranks and all(r != rank for r in err.ranks), err.ranks
    assert rank != odd or err.ranks[0] != odd
    unusable(pc)
    pc.close()


def policy():
    from papcoll.algorithms.policy import TABLE
    limit = next(row.max_call for row in TABLE if row.algorithm == "shm_pap")
    pc = papcoll.Communicator(world)
    small = limit // size                       # rank 0 at the limit, the others above it
    nbytes = small * (1 if rank == 0 else 2)
    send = np.zeros(size * nbytes, np.uint8)
    expect(papcoll.MismatchError, lambda: pc.Alltoall(send, np.empty_like(send)),
           f"shm_pap with {small} bytes per peer", f"cma_pap with {2 * small} bytes per peer")
    pc.close()


def family():
    pc = papcoll.Communicator(world)
    name = "shm_pap" if rank == 0 else "pap_direct"
    send = np.zeros(size * 8, np.uint8)
    err = expect(papcoll.PapcollError, lambda: pc.Alltoall(send, np.empty_like(send),
                                                           algorithm=name))
    print(f"FAMILY rank {rank}: {type(err).__name__}: {err}", flush=True)
    pc.close()
    world.Barrier()
    assert leftovers() == []


def beyond():
    import ctypes
    import mmap
    page = mmap.PAGESIZE
    area = mmap.mmap(-1, 2 * page)
    libc = ctypes.CDLL(None, use_errno=True)
    base = ctypes.addressof(ctypes.c_char.from_buffer(area))
    assert libc.mprotect(ctypes.c_void_p(base + page), page, 0) == 0   # PROT_NONE
    nbytes = 16 if rank == 0 else 8
    if rank == 1:                                    # ends where the guard page begins
        send = np.frombuffer(area, np.uint8, size * nbytes, page - size * nbytes)
    else:
        send = np.zeros(size * nbytes, np.uint8)
    pc = papcoll.Communicator(world)
    expect(papcoll.MismatchError,
           lambda: pc.Alltoall(send, np.empty(size * nbytes, np.uint8), algorithm="cma_pap"),
           "cma_pap with 8 bytes per peer", "cma_pap with 16 bytes per peer")
    pc.close()


main({"mismatch": lambda name, a, b: mismatch(name, int(a), int(b)), "policy": policy,
      "family": family, "beyond": beyond})
