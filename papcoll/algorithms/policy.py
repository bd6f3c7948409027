"""Selection policy: which algorithm serves a call, as a table separate from the mechanisms.

Rows are tried in order; the first whose topology matches, whose size bound admits the
per-peer block, and whose algorithm can run on this communicator wins.
"""
from .registry import lookup

# Largest block shm_pap serves on one node: its two copies beat cma_pap's single copy (one
# syscall and page pinning per peer, then waiting for peers to read) up to 64 KiB at N = 2 and
# 4 here, and cma_pap wins from 128-256 KiB (papcoll.bench arrival, MIF 1). 64 KiB is also
# shm_pap's largest slot, so below it a call is one epoch. cma_pap declines when CMA is not
# permitted here; then shm_pap (the row after it) takes every size.
SHM_LIMIT = 64 << 10

# (topology: "single-node" | "multi-node" | "any", largest block in bytes or None, algorithm)
TABLE = [
    ("single-node", SHM_LIMIT, "shm_pap"),
    ("single-node", None, "cma_pap"),
    ("single-node", None, "shm_pap"),
    # Across nodes the PAP-aware Direct: it beat Direct by 3x and the MPI library's alltoall
    # under random arrival (MIF >= 32) in papcoll.bench arrival; MPI keeps an edge only for
    # small blocks with balanced arrival. pap_direct picks its own scheme by size.
    ("multi-node", None, "pap_direct"),
    ("any", None, "mpi"),
]


def choose(ctx, block):
    kind = "single-node" if len(ctx.topology.nodes) == 1 else "multi-node"
    for where, limit, name in TABLE:
        if where in (kind, "any") and (limit is None or block <= limit) \
                and lookup(name).unsupported(ctx) is None:
            return name
    return "mpi"
