"""Selection policy: which algorithm serves a call, as a table separate from the mechanisms.

Rows are tried in order; the first whose topology matches, whose bounds admit the call (the
bytes each process sends in it, block x processes, at most the row's limit; the block at least
its floor) and whose algorithm can run on this communicator wins. Every input is the same on
every rank of a call, so every rank chooses alike.
"""
from .registry import lookup

# Largest call (block x processes) shm_pap serves on one node. Its two copies go through
# slots of at most 64 KiB; a block larger than a slot goes in pieces, one epoch each, and every
# piece waits for every process. Measured (papcoll.bench arrival, 200 iterations, MIF 1 and 32,
# MPICH, this 2-core machine; the issue-13 note has every cell): shm_pap beat MPI_Alltoall
# (0.35-0.90 x) up to 128 KiB x 2, 64 KiB x 3 and 64 KiB x 4 processes, and lost (1.25-3.0 x)
# from 256 KiB x 2, 128 KiB x 3 and 128 KiB x 4: the calls of up to 256 KiB won, the larger
# lost. Above that cma_pap lost too (1.06-1.98 x, one cell 0.96), but by less, and it beat
# MPICH at the large cells of an earlier 16-core run; an earlier run here had shm_pap ahead up
# to 2 MiB x 2, which today's machine does not reproduce (the same commit: 611 against 206 us
# at 1 MiB x 2). cma_pap declines when CMA is not permitted; then shm_pap (the row after it)
# takes every size.
SHM_LIMIT = 256 << 10

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
