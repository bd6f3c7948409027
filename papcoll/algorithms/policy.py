"""Selection policy: which algorithm serves a call, as data separate from the mechanisms.

The table is ``policy.json`` beside this module, in the manner of MPICH's selection JSON: a
file, not code, so that a table measured elsewhere can replace it. Each row says where it was
measured; docs/policy.md keeps the measurements behind the rows. Rows are tried in order; the
first whose topology matches, whose bounds admit the call and whose algorithm can run on this
communicator wins. Every input is the same on every rank of a call, so every rank chooses
alike.
"""
import json
from dataclasses import dataclass, fields
from importlib import resources

from ..errors import AlgorithmError, ConfigError
from .registry import lookup

TOPOLOGIES = ("single-node", "multi-node", "multi-node spare", "any")


@dataclass(frozen=True)
class Row:
    topology: str
    algorithm: str
    measured: str                 # on what machine, with which command
    max_call: int | None = None   # bytes each process sends in the call: block x processes
    min_block: int | None = None  # bytes per peer
    max_block: int | None = None

    def admits(self, block, size):
        return ((self.max_call is None or block * size <= self.max_call)
                and (self.min_block is None or block >= self.min_block)
                and (self.max_block is None or block <= self.max_block))


def load(text, source):
    """The rows of a policy table in JSON ``text``; a ConfigError naming ``source``, the row
    and the field for anything malformed (the rows decide what every rank runs)."""
    def bad(where, why):
        return ConfigError(f"policy table {source}: {where}: {why}")
    try:
        table = json.loads(text)
    except ValueError as e:
        raise bad("not JSON", e) from None
    if not isinstance(table, dict) or not isinstance(table.get("rows"), list) or not table["rows"]:
        raise bad("top level", 'wants an object with a non-empty list "rows"')
    names = {f.name: f for f in fields(Row)}
    rows = []
    for i, entry in enumerate(table["rows"]):
        if not isinstance(entry, dict):
            raise bad(f"row {i}", "wants an object")
        unknown = sorted(entry.keys() - names.keys())
        if unknown:
            raise bad(f"row {i}, field {unknown[0]!r}", f"unknown (known: {', '.join(names)})")
        for key in ("topology", "algorithm", "measured"):
            if not isinstance(entry.get(key), str):
                raise bad(f"row {i}, field {key!r}", "wants a string")
        for key in ("max_call", "min_block", "max_block"):
            value = entry.get(key)
            if value is not None and (type(value) is not int or value < 0):
                raise bad(f"row {i}, field {key!r}", f"wants a byte count >= 0, not {value!r}")
        row = Row(**entry)
        if row.topology not in TOPOLOGIES:
            raise bad(f"row {i}, field 'topology'", f"{row.topology!r} is not one of {TOPOLOGIES}")
        try:
            lookup(row.algorithm)
        except AlgorithmError as e:
            raise bad(f"row {i}, field 'algorithm'", e) from None
        if None not in (row.min_block, row.max_block) and row.min_block > row.max_block:
            raise bad(f"row {i}", "min_block is above max_block")
        rows.append(row)
    return tuple(rows)


SOURCE = resources.files(__package__).joinpath("policy.json")
TABLE = load(SOURCE.read_text(), SOURCE.name)


def kinds(topology):
    """The TABLE topologies that ``topology`` matches (the same on every rank)."""
    if len(topology.nodes) == 1:
        return {"single-node", "any"}
    return {"multi-node", "any"} | (set() if topology.crowded_anywhere else {"multi-node spare"})


def choose(ctx, block):
    matching = kinds(ctx.topology)
    for row in TABLE:
        if row.topology in matching and row.admits(block, ctx.size) \
                and lookup(row.algorithm).unsupported(ctx) is None:
            return row.algorithm
    return "mpi"
