"""MPI worker for the adaptive auto (PAPCOLL_ADAPT; papcoll/adaptive.py): two call sites
(blocks of 8 and 3001 bytes) alternate through balanced windows, windows where the ranks
arrive skewed by different delays of their own, and balanced ones again. A tuning file gives
``direct`` below a skew of ``EDGE`` and ``pap_direct`` above it, for adaptive calls only; the
last rank is ``LATE`` seconds late in the skewed windows (the skews both phases read, and why
this edge: docs/adaptive.md, "Tests"). Every call is checked against
MPI_Alltoall on data that names its source, destination and index; every rank must have run
the same algorithm in every call and agreed the same skews; the skewed windows must run
``pap_direct`` and the balanced ones ``direct``. Calls that a cached plan serves
(``pap_direct``'s, here: ``direct`` has none at these sizes) the Entry serves and times in C;
the others Python, into the same windows. Then, on the shipped table (no band), a site runs
what plain auto runs, served by its plan, untimed and never agreed on. Rank 0 prints
ADAPTIVE OK."""
import json
import os
import sys
import time

import numpy as np
from mpi4py import MPI

import papcoll

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
K = 8
EDGE, LATE = 300.0, 0.1
path = os.path.join(sys.argv[1], "banded.json")
if rank == 0:
    with open(path, "w") as f:
        json.dump({"rows": [
            {"topology": "any", "algorithm": "direct", "measured": "test", "max_skew": EDGE},
            {"topology": "any", "algorithm": "pap_direct", "measured": "test", "min_skew": EDGE}]},
            f, indent=1)
world.Barrier()
os.environ.update(PAPCOLL_TUNING_FILE=path, PAPCOLL_ADAPT=str(K))
pc = papcoll.Communicator(world)
assert pc._adaptive is not None and pc._adaptive.every == K and pc._adaptive is pc._ctx.adaptive


python_timed = []                  # the calls Python timed (the Entry timed the others)
timed = pc._adaptive.timed
pc._adaptive.timed = lambda site, seconds: (python_timed.append(1), timed(site, seconds))[1]
python_agreed = []                 # the windows Python ended (the Entry ended the others)
agree = pc._adaptive.agree
pc._adaptive.agree = lambda ctx, site: (python_agreed.append(1), agree(ctx, site))[1]


def data(block, call):
    """Bytes that name the source, the destination, the byte's index and the call."""
    i = np.arange(block, dtype=np.int64)
    return np.concatenate([((rank * 131 + dest * 17 + i * 7 + call * 3) % 251).astype(np.uint8)
                           for dest in range(size)])


PHASES = [("balanced", 4), ("skewed", 4), ("balanced", 4)]       # windows of K calls per site
ran, by, call = [], [], 0   # by: (what served it, Python timed it), by call
for phase, windows in PHASES:
    for _ in range(windows * K):
        for block in (8, 3001):
            send = data(block, call)
            want, got = np.empty_like(send), np.zeros_like(send)
            world.Alltoall(send, want)
            world.Barrier()
            if phase == "skewed":          # every rank its own lateness, the last LATE
                late = np.random.default_rng([call, rank]).random()
                time.sleep(LATE if rank == size - 1 else 0.001 * (rank % 3) * late)
            site = pc._adaptive.sites.get(block)
            planned = site.name if site else None
            before, agreed = len(python_timed), len(python_agreed)
            pc.Alltoall(send, got)
            assert np.array_equal(got, want), (rank, call, block)
            ran.append((phase, block, planned or pc.chosen, pc.chosen))
            by.append((pc.chosen, len(python_timed) > before, len(python_agreed) > agreed))
            call += 1

# of the pap_direct calls, Python timed only the first of each site (no plan yet); a window
# that one of them filled the Entry ended, unless its last reduction was still in flight
assert any(name == "pap_direct" for name, *_ in by), by
assert sum(py for name, py, _ in by if name == "pap_direct") <= 2, by
ends = [n for n in range(len(by)) if n // 2 and n // 2 % K == 0]   # each site's K-th, 2K-th...
assert all(by[n][2] for n in ends if by[n][1]), "a window Python timed was not ended"
assert not any(by[n][2] for n in range(len(by)) if n not in ends), "an end off the window"
assert not all(by[n][2] for n in ends if not by[n][1]), "the Entry ended no window"
skews = {b: s.skew for b, s in pc._adaptive.sites.items()}
everyone = world.allgather((ran, skews))
assert all(other == everyone[0] for other in everyone), "ranks chose differently"
# A site's first call is not timed, so its windows end at its calls K, 2K, ... after the
# first; a window's reduction is finished, and chosen by, at the end of the next one. So from
# the (2K + 1)-th call of a phase on, every call runs what a window wholly in the phase gave.
start = 0
for n, (phase, windows) in enumerate(PHASES):
    steps = ran[start:start + 2 * windows * K]
    start += len(steps)
    settled = [name for _, _, name, chosen in steps[2 * (2 * K + 1):]]
    if n:                                 # the first phase runs the policy's pick at first
        assert set(settled) == {"pap_direct" if phase == "skewed" else "direct"}, (phase,
                                                                                   settled)
    assert all(name == chosen for *_, name, chosen in steps), steps
if os.environ.get("SHOW"):
    print(rank, [(b, round(s.skew, 1), s.base) for b, s in pc._adaptive.sites.items()])
pc.close()

# The shipped table names no band: no skew changes a site's choice, so its calls run what
# plain auto runs, untimed and never agreed on -- the Entry serves them by the site's key.
del os.environ["PAPCOLL_TUNING_FILE"]
fixed = papcoll.Communicator(world)
del os.environ["PAPCOLL_ADAPT"]
plain = papcoll.Communicator(world)
assert fixed._adaptive is not None and plain._adaptive is None
for call in range(3 * K):
    send = data(8, call)
    want, got, also = np.empty_like(send), np.zeros_like(send), np.zeros_like(send)
    world.Alltoall(send, want)
    plain.Alltoall(send, also)
    hits = fixed._entry.hits
    fixed.Alltoall(send, got)
    assert np.array_equal(got, want) and np.array_equal(also, want), (rank, call)
    assert fixed.chosen == plain.chosen, (fixed.chosen, plain.chosen)
    assert call == 0 or fixed._entry.hits == hits + 1, "not served by its plan in C"
site = fixed._adaptive.sites[8]
assert not site.banded and site.window is None and site.pending is None
assert fixed._adaptive.by_length[8 * size] == site.key
fixed.close()
plain.close()
world.Barrier()
if rank == 0:
    print("ADAPTIVE OK", skews, flush=True)
