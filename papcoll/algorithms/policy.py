"""Selection policy: which algorithm serves a call, as a table separate from the mechanisms.

Rows are tried in order; the first whose topology matches, whose size bound admits the call
(the bytes each process sends in it: block x processes) and whose algorithm can run on this
communicator wins.
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

# (topology: "single-node" | "multi-node" | "any", largest call in bytes or None, algorithm)
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
    total = block * ctx.size
    for where, limit, name in TABLE:
        if where in (kind, "any") and (limit is None or total <= limit) \
                and lookup(name).unsupported(ctx) is None:
            return name
    return "mpi"
