"""MPI worker (3 ranks, inside the SoftRoCE VM): an RDMA write that fails in the middle of a call.

    verbs_fault.py ALGORITHM

After a few good calls (checked), one call goes wrong on purpose: for the zero-copy ``direct``
rank 1 advertises its receive buffer under a wrong key; for the copy-based
``pap_direct_copy`` rank 0 writes into rank 1's inbox under a wrong key. The device refuses
those writes (a remote access error) and the queue pairs involved fail. Rank 1 must raise a
papcoll error within the timeout, never hang or return. The writes are staged (copied at their
post, so no call waits for their completions): a writer into rank 1, like rank 2, may finish
that call with the right data, and then its next call must raise -- a writer's error naming
rank 1 and the device's status. Then every rank closes, and the device's resource counts
(``rdma resource show``: PDs, CQs, QPs, MRs) are back where they were before the Communicator
was made: a failed call leaves nothing registered. Rank 0 prints FAULT OK.
"""
import json
import os
import subprocess
import sys
import time

import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.dirname(__file__))
import pattern  # noqa: E402

import papcoll  # noqa: E402

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
name = sys.argv[1]
TIMEOUT = float(os.environ["PAPCOLL_TIMEOUT"])
NBYTES = 4099                 # above the inline size: staged, its failure seen at a later poll
BAD = 0x5A5A5A


def resources():
    """{device: {resource: count}} over every process on this host."""
    out = subprocess.run(["rdma", "-j", "resource", "show"], check=True, capture_output=True,
                         text=True).stdout
    return {entry["ifname"]: {k: v for k, v in entry.items() if isinstance(v, int)
                              and k not in ("ifindex",)} for entry in json.loads(out)}


def call(pc, number):
    send = pattern.send_bytes(rank, size, number, NBYTES)
    recv = np.empty_like(send)
    pc.Alltoall(send, recv, algorithm=name)
    assert np.array_equal(recv, pattern.recv_bytes(rank, size, number, NBYTES)), number


def sabotage(transport):
    """Make this call's writes into rank 1 use a wrong key."""
    if name == "direct" and rank == 1:
        expose = transport.expose

        def wrong_key(array):
            descriptor = expose(array)
            return descriptor._replace(rkey=descriptor.rkey ^ BAD)
        transport.expose = wrong_key
    elif name == "pap_direct_copy" and rank == 0:
        adverts, (inbox, rkey, nbytes) = transport.remote[1]   # what the native writes use
        transport.native.set_peer(1, adverts, (inbox, rkey ^ BAD), nbytes)


world.Barrier()
before = resources()
world.Barrier()
pc = papcoll.Communicator(world)
for number in range(1, 4):
    call(pc, number)
world.Barrier()
during = resources()             # the counts see papcoll's resources, so they can tell
assert all(during[dev][kind] > before[dev][kind] for dev in before for kind in ("qp", "mr")), \
    f"rank {rank}: resources before {before}, in use {during}"
sabotage(pc._context().algorithms[name].exchange.transport)
world.Barrier()
start = time.monotonic()
try:
    # Rank 1 fails. A rank whose data all came may finish this call with the right data
    # (call() checks it); its next one ends in an error: its refused write's completion, or
    # one that names the ranks that gave up.
    call(pc, 4)
    if rank == 1:
        raise AssertionError(f"rank {rank}: a call whose writes failed returned")
    call(pc, 5)
    raise AssertionError(f"rank {rank}: a call after its peers failed returned")
except papcoll.PapcollError as err:
    took = time.monotonic() - start
    assert took < TIMEOUT + 5, f"rank {rank}: the error took {took:.1f} s"
    print(f"rank {rank} ({took:.2f} s): {type(err).__name__}: {err}", flush=True)
    errors = world.allgather(str(err).lower())
# A writer into rank 1 names it and the device's status. (Another writer may instead find that
# a rank which gave up first has deregistered its buffer: its error names that rank.)
assert any("rank 1" in e and "remote access error" in e for e in errors), errors
pc.close()
world.Barrier()
after = resources()
assert after == before, f"rank {rank}: resources before {before}, after close {after}"
if rank == 0:
    print(f"FAULT OK {name}: in use {during}, after close {after}", flush=True)
