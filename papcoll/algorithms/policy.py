"""Selection policy: which algorithm serves a call, as a table separate from the mechanisms.

Rows are tried in order; the first whose topology matches, whose bounds admit the call (the
bytes each process sends in it, block x processes, at most the row's limit; the block at least
its floor) and whose algorithm can run on this communicator wins. Every input is the same on
every rank of a call, so every rank chooses alike.
"""
from .registry import lookup

# Largest call (block x processes) shm_pap serves on one node. Its two copies go through
# 64 KiB slots that stay in cache, and beat cma_pap's single copy (a syscall, and pinning every
# page of the peer's buffer) while the processes' buffers fit in cache too: shm_pap won at
# 128 KiB to 2 MiB x 2, 256 KiB to 1 MiB x 3 and up to 512 KiB x 4 processes, and lost or tied
# at 4 MiB x 2 and 1 MiB x 4 (papcoll.bench arrival, MIF 1 and 32, this 2-core machine); the
# limit sits between 2 and 4 MiB, where the measurements part. cma_pap declines when CMA is
# not permitted; then shm_pap (the row after it) takes every size.
SHM_LIMIT = 3 << 20

# Smallest block (bytes per peer) pap_direct serves across nodes, where no machine of the job
# runs more processes than it has cores. Measured (papcoll.bench arrival, 200 iterations, MPICH,
# mpi-rma; the issue-12 note has every cell): with 2 emulated nodes of 2 on this 2-core machine
# MPI's alltoall won every cell from 8 B to 8 KiB, at MIF 1 to 512 and with 25 % or 75 % of the
# processes late (pap_direct 1.2-7.5 x, shm_direct and pap_shm_direct slower still: their
# masters' phase alone cost more than MPI's whole call), and at 1 MiB pap_direct was 1.36,
# 1.13, 1.03, 0.99 x MPI at MIF 1, 32, 128, 512. With cores to spare (16 cores, 4 emulated
# nodes of 4) pap_direct at 1 MiB was 1.13, 1.00, 0.76, 0.85 x MPI, and 1.1-7 x below it.
# So: the MPI library below 1 MiB, and wherever processes outnumber cores.
DIRECT_FLOOR = 1 << 20

# (topology, largest call in bytes (block x processes) or None, smallest block or None, algorithm)
# topology: "single-node"; "multi-node"; "multi-node spare" (no machine of the job crowded);
# "any". The hierarchical shm_direct and pap_shm_direct are never chosen: they lost to
# pap_direct and to MPI at every cell measured (above); force them by name.
TABLE = [
    ("single-node", SHM_LIMIT, None, "shm_pap"),
    ("single-node", None, None, "cma_pap"),
    ("single-node", None, None, "shm_pap"),
    ("multi-node spare", None, DIRECT_FLOOR, "pap_direct"),
    ("any", None, None, "mpi"),
]


def kinds(topology):
    """The TABLE topologies that ``topology`` matches (the same on every rank)."""
    if len(topology.nodes) == 1:
        return {"single-node", "any"}
    return {"multi-node", "any"} | (set() if topology.crowded_anywhere else {"multi-node spare"})


def choose(ctx, block):
    matching = kinds(ctx.topology)
    for where, limit, floor, name in TABLE:
        if where in matching and (limit is None or block * ctx.size <= limit) \
                and (floor is None or block >= floor) and lookup(name).unsupported(ctx) is None:
            return name
    return "mpi"
