"""Selection policy: which algorithm serves a call, as a table separate from the mechanisms.

Rows are tried in order; the first whose topology matches, whose size bound admits the
per-peer block, and whose algorithm can run on this communicator wins.
"""
from .registry import lookup

# (topology: "single-node" | "multi-node" | "any", largest block in bytes or None, algorithm)
TABLE = [
    ("any", None, "mpi"),
]


def choose(ctx, block):
    kind = "single-node" if len(ctx.topology.nodes) == 1 else "multi-node"
    for where, limit, name in TABLE:
        if where in (kind, "any") and (limit is None or block <= limit) \
                and lookup(name).unsupported(ctx) is None:
            return name
    return "mpi"
