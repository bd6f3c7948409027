"""MPI worker (N=2, one node) for the tuning file: every rank must read the same one, a bad or
missing one is the same ConfigError on every rank, naming the rank and the file, and a good
one's rows serve only the shape they name. Files go to the folder argv[1]. Rank 0 prints
TUNING OK."""
import json
import os
import sys

import numpy as np
from mpi4py import MPI

import papcoll
from papcoll.algorithms import policy

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
assert size == 2
folder = sys.argv[1]
ROW = {"topology": "any", "processes": 2, "nodes": 1, "ppn": 2, "max_block": 64,
       "algorithm": "pap_direct", "measured": "the test"}


def named(name, rows=None, text=None):
    """PAPCOLL_TUNING_FILE = folder/name, holding ``rows`` (or ``text``), written by rank 0."""
    path = os.path.join(folder, name)
    if rank == 0 and (rows is not None or text is not None):
        with open(path, "w") as f:
            f.write(text if text is not None else json.dumps({"rows": rows}, indent=1))
    world.Barrier()
    os.environ["PAPCOLL_TUNING_FILE"] = path


def refused(*words):
    """A Communicator made now raises ConfigError on this rank, with every word in it."""
    try:
        papcoll.Communicator(world).close()
    except papcoll.ConfigError as err:
        assert all(w in str(err) for w in words), (rank, str(err))
        return
    raise AssertionError(f"rank {rank}: no ConfigError")


named("a.json", [ROW])
named("b.json", [{**ROW, "algorithm": "mpi"}])
named("a.json" if rank == 0 else "b.json")            # other contents: refused everywhere
refused("the tuning file differs between ranks", "rank 0:", "rank 1:", "a.json", "b.json")

named("bad.json", text=json.dumps({"rows": [ROW, {**ROW, "ppn": "two"}]}, indent=1))
named("a.json" if rank == 0 else "bad.json")          # one rank's file is malformed
refused("rank 1:", "bad.json", "line", "field 'ppn'")

named("missing.json")                                  # named, but not there
refused("rank 0:", "PAPCOLL_TUNING_FILE=", "missing.json")

named("a2.json", [ROW])
named("a.json" if rank == 0 else "a2.json")            # the same bytes, another path: agreed
papcoll.Communicator(world).close()

# A row for another shape never serves; this shape's row serves its blocks, the shipped table
# the rest.
named("c.json", [{**ROW, "processes": 3, "algorithm": "mpi", "max_block": None}, ROW])
with papcoll.Communicator(world) as pc:
    ctx = pc._context()
    assert policy.choose(ctx, 8) == "pap_direct" and policy.choose(ctx, 1024) == "shm_pap"
    send = np.arange(2 * 8, dtype=np.uint8) + 16 * rank
    recv, want = np.empty_like(send), np.empty_like(send)
    pc.Alltoall(send, recv)
    world.Alltoall(send, want)
    assert np.array_equal(recv, want) and ctx.cache.plans(("a", None))[0].algorithm.name == "pap_direct"
world.Barrier()
if rank == 0:
    print("TUNING OK", flush=True)
