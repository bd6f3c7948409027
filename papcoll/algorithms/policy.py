"""Selection policy: which algorithm serves a call, as a table separate from the mechanisms.

Rows are tried in order; the first whose topology matches, whose bounds admit the call (the
bytes each process sends in it, block x processes, at most the row's limit; the block within
its range) and whose algorithm can run on this communicator wins. Every input is the same on
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

# Blocks (bytes per peer) pap_direct serves across nodes, crowded or not: from DIRECT_FLOOR to
# DIRECT_CEILING. Measured with the native engine (papcoll.bench arrival, 200 iterations, MPICH,
# mpi-rma, N = 4 on this 2-core machine, as 4 nodes of 1 and 2 of 2, MIF 1 and 32; the issue-13
# note has every cell): pap_direct took 0.51-0.90 x MPI's time from 8 KiB to 64 KiB, 0.85-1.07 x
# at 256 KiB, and lost below (1.14-1.38 x at 2-4 KiB; 1.07-1.48 x at 8-256 B) and above
# (1.16-1.41 x at 512 KiB and 1 MiB). Before the engine it lost every cell below 1 MiB.
DIRECT_FLOOR = 8 << 10
DIRECT_CEILING = 256 << 10

# Smallest block of pap_direct where no machine of the job runs more processes than it has
# cores (16 cores, 4 emulated nodes of 4, before the engine: 1.13, 1.00, 0.76, 0.85 x MPI at
# 1 MiB and MIF 1, 32, 128, 512). Crowded, MPI wins there (above).
SPARE_FLOOR = 1 << 20

# (topology, largest call in bytes (block x processes) or None, blocks (smallest, largest;
# None: unbounded), algorithm). topology: "single-node"; "multi-node"; "multi-node spare" (no
# machine of the job crowded); "any". The hierarchical shm_direct and pap_shm_direct are never
# chosen: they lost to pap_direct and to MPI at every cell measured; force them by name.
TABLE = [
    ("single-node", SHM_LIMIT, (None, None), "shm_pap"),
    ("single-node", None, (None, None), "cma_pap"),
    ("single-node", None, (None, None), "shm_pap"),
    ("multi-node", None, (DIRECT_FLOOR, DIRECT_CEILING), "pap_direct"),
    ("multi-node spare", None, (SPARE_FLOOR, None), "pap_direct"),
    ("any", None, (None, None), "mpi"),
]


def kinds(topology):
    """The TABLE topologies that ``topology`` matches (the same on every rank)."""
    if len(topology.nodes) == 1:
        return {"single-node", "any"}
    return {"multi-node", "any"} | (set() if topology.crowded_anywhere else {"multi-node spare"})


def choose(ctx, block):
    matching = kinds(ctx.topology)
    for where, limit, (floor, ceiling), name in TABLE:
        if where in matching and (limit is None or block * ctx.size <= limit) \
                and (floor is None or block >= floor) and (ceiling is None or block <= ceiling) \
                and lookup(name).unsupported(ctx) is None:
            return name
    return "mpi"
