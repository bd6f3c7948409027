"""Selection policy: which algorithm serves a call, as data separate from the mechanisms.

The table is ``policy.json`` beside this module, in the manner of MPICH's selection JSON: a
file, not code, so that a table measured elsewhere can replace it. Each row says where it was
measured; docs/policy.md keeps the measurements behind the rows. A **tuning file** (``python -m
papcoll tune`` writes it; ``PAPCOLL_TUNING_FILE``, else :data:`DEFAULT_FILE` if it exists) adds
rows measured on this machine, tried before the shipped ones; each names the shape it was
measured on (processes, nodes, processes per node, transport, real or emulated nodes) and
serves only that shape, so a file from another machine shape leaves the shipped table in force.
``tune --model`` writes rows the performance model predicts (``"predicted": true``); a
measured row always wins over a predicted one: wherever a measured row names the shape of a
communicator, its predicted rows are dropped (:func:`in_force`).
Rows are tried in order; the first whose shape and topology match, whose bounds admit the call
and whose algorithm can run on this communicator wins. Every input is the same on every rank of
a call -- a Communicator's creation meeting checks that every rank read the same tuning file
(context.py) -- so every rank chooses alike.
"""
import functools
import json
import os
from dataclasses import dataclass, fields
from pathlib import Path

from mpi4py import MPI

from .. import config, transport
from ..errors import AlgorithmError, ConfigError
from .registry import AUTO, REGISTRY, lookup

DEFAULT_FILE = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "papcoll" \
    / "tuning.json"
TOPOLOGIES = ("single-node", "multi-node", "multi-node spare", "any")
CALLS = ("alltoall", "alltoallv", "alltoallw")
LIBRARIES = ("MPICH", "Open MPI")


def version_line(text):
    """The first line of an MPI library's version, runs of blanks as one, without the NUL Open
    MPI ends it with: how results and parameter files record the library, and compare it."""
    return " ".join(text.replace("\0", " ").splitlines()[0].split()) if text.strip("\0 ") else ""


def library_version():
    return version_line(MPI.Get_library_version())


@functools.cache
def library():
    """The MPI library's family, as a row names it (one of LIBRARIES, else "other"): every rank
    of a job runs the same library, so every rank chooses alike."""
    version = MPI.Get_library_version()
    return next((name for name in LIBRARIES if version.startswith(name)), "other")


@dataclass(frozen=True)
class Row:
    topology: str
    algorithm: str
    measured: str                 # on what machine, with which command
    max_call: int | None = None   # bytes each process sends in the call: block x processes
    min_block: int | None = None  # bytes per peer
    max_block: int | None = None
    processes: int | None = None  # tuned rows: the shape they serve (None: any)
    nodes: int | None = None
    ppn: int | None = None        # the largest node's processes
    transport: str | None = None  # between nodes
    call: str = "alltoall"        # or "alltoallv", "alltoallw" (which take no size bounds)
    library: str | None = None    # the MPI library it was measured against (None: any)
    emulated: bool | None = None  # for emulated nodes (True) or real ones (False); None: either
    predicted: bool = False       # by the performance model (tune --model), not measured
    min_skew: float | None = None  # a band of the skew an adaptive auto agreed on (adaptive.py):
    max_skew: float | None = None  # [min, max); a row with one serves only adaptive calls

    def admits_skew(self, skew):
        if self.min_skew is None and self.max_skew is None:
            return True
        return skew is not None and (self.min_skew or 0.0) <= skew \
            and (self.max_skew is None or skew < self.max_skew)

    def admits(self, block, size):
        return ((self.max_call is None or block * size <= self.max_call)
                and (self.min_block is None or block >= self.min_block)
                and (self.max_block is None or block <= self.max_block))

    def serves(self, ctx):
        """Whether this row is for the shape of ``ctx``'s communicator (the transport is asked
        for only when the row names one: on one node, none matches)."""
        topo = ctx.topology
        return ((self.processes is None or self.processes == ctx.size)
                and (self.nodes is None or self.nodes == len(topo.nodes))
                and (self.ppn is None or self.ppn == topo.ppn)
                and (self.library is None or self.library == library())
                and (self.emulated is None or self.emulated == topo.emulated)
                and (self.transport is None
                     or (len(topo.nodes) > 1 and self.transport == transport.choose())))


def load(text, source):
    """The rows of a policy table in JSON ``text``; a ConfigError naming ``source``, the line,
    the row and the field for anything malformed (the rows decide what every rank runs)."""
    def bad(where, why, line=None):
        at = "" if line is None else f" line {line}:"
        return ConfigError(f"policy table {source}:{at} {where}: {why}")
    try:
        table = json.loads(text)
    except ValueError as e:
        raise bad("not JSON", e, getattr(e, "lineno", None)) from None
    if not isinstance(table, dict) or not isinstance(table.get("rows"), list) or not table["rows"]:
        raise bad("top level", 'wants an object with a non-empty list "rows"')
    names = {f.name: f for f in fields(Row)}
    lines = _row_lines(text)
    rows = []
    for i, entry in enumerate(table["rows"]):
        line = lines[i] if i < len(lines) else {}
        if not isinstance(entry, dict):
            raise bad(f"row {i}", "wants an object", line.get(""))
        unknown = sorted(entry.keys() - names.keys())
        if unknown:
            raise bad(f"row {i}, field {unknown[0]!r}", f"unknown (known: {', '.join(names)})",
                      line.get(unknown[0]))
        for key in ("topology", "algorithm", "measured", "call"):
            if key == "call" and key not in entry:
                continue
            if not isinstance(entry.get(key), str):
                raise bad(f"row {i}, field {key!r}", "wants a string", line.get(key, line.get("")))
        for key in ("max_call", "min_block", "max_block", "processes", "nodes", "ppn"):
            value = entry.get(key)
            if value is not None and (type(value) is not int or value < 0):
                raise bad(f"row {i}, field {key!r}", f"wants a count >= 0, not {value!r}",
                          line.get(key))
        for key in ("min_skew", "max_skew"):
            value = entry.get(key)
            if value is not None and (type(value) not in (int, float) or not 0 <= value < 1e9):
                raise bad(f"row {i}, field {key!r}", f"wants a number >= 0, not {value!r}",
                          line.get(key))
        if entry.get("call", "alltoall") != "alltoall" and \
                (entry.get("min_skew"), entry.get("max_skew")) != (None, None):
            raise bad(f"row {i}", "only alltoall rows take a skew band (adaptive.py)", line.get(""))
        if None not in (entry.get("min_skew"), entry.get("max_skew")) and \
                entry["min_skew"] >= entry["max_skew"]:
            raise bad(f"row {i}", "min_skew is not below max_skew", line.get("min_skew"))
        for key in ("emulated", "predicted"):
            if entry.get(key) is not None and type(entry[key]) is not bool:  # not 0 and 1
                raise bad(f"row {i}, field {key!r}", f"wants true or false, not "
                          f"{entry[key]!r}", line.get(key))
        if entry.get("library") not in (None, *LIBRARIES):
            raise bad(f"row {i}, field 'library'", f"{entry['library']!r} is not one of "
                      f"{LIBRARIES}", line.get("library"))
        if entry.get("transport") not in (None, *transport.TRANSPORTS):
            raise bad(f"row {i}, field 'transport'", f"{entry['transport']!r} is not one of "
                      f"{tuple(transport.TRANSPORTS)}", line.get("transport"))
        row = Row(**entry)
        if row.topology not in TOPOLOGIES:
            raise bad(f"row {i}, field 'topology'", f"{row.topology!r} is not one of {TOPOLOGIES}",
                      line.get("topology"))
        try:
            lookup(row.algorithm)
        except AlgorithmError as e:
            raise bad(f"row {i}, field 'algorithm'", e, line.get("algorithm")) from None
        if row.call not in CALLS:
            raise bad(f"row {i}, field 'call'", f"{row.call!r} is not one of {CALLS}",
                      line.get("call"))
        if row.call != "alltoall" and (row.max_call, row.min_block, row.max_block) != (None,) * 3:
            raise bad(f"row {i}", f"an {row.call} row takes no size bounds: ranks' sizes "
                      "differ, and every rank must choose alike", line.get(""))
        if row.call != "alltoall" and not lookup(row.algorithm).variable:
            raise bad(f"row {i}, field 'algorithm'", f"{row.algorithm} serves no {row.call}",
                      line.get("algorithm"))
        if None not in (row.min_block, row.max_block) and row.min_block > row.max_block:
            raise bad(f"row {i}", "min_block is above max_block", line.get("min_block"))
        rows.append(row)
    return tuple(rows)


def _row_lines(text):
    """For each row of the table's "rows" list, {field: the line it starts on, "": the row's},
    found by decoding the list's items one by one where they lie in ``text``."""
    decoder, found = json.JSONDecoder(), []
    start = text.find("[", text.find('"rows"'))
    at = start + 1
    while start >= 0:
        while at < len(text) and text[at] in " \t\r\n,":
            at += 1
        if at >= len(text) or text[at] == "]":
            break
        try:
            item, end = decoder.raw_decode(text, at)
        except ValueError:
            break
        line = text.count("\n", 0, at) + 1
        where = {"": line}
        if isinstance(item, dict):
            for key in item:
                pos = text.find(json.dumps(key), at, end)
                where[key] = text.count("\n", 0, pos) + 1 if pos >= 0 else line
        found.append(where)
        at = end
    return found


class Tuning:
    """The tuning file in force for this process: ``PAPCOLL_TUNING_FILE`` (which must exist),
    else :data:`DEFAULT_FILE` if it exists, else none. ``path`` (None: none), ``digest`` (of
    its bytes: what the ranks of a Communicator compare), ``rows``, and ``error``: the
    ConfigError's text for a file that is missing or malformed (``rows`` then empty)."""

    def __init__(self):
        named = config.tuning_file()
        self.path = named or (str(DEFAULT_FILE) if DEFAULT_FILE.is_file() else None)
        self.digest, self.rows, self.error = None, (), None
        if self.path is None:
            return
        try:
            data = Path(self.path).read_bytes()
        except OSError as err:
            self.error = (f"PAPCOLL_TUNING_FILE={named!r}: {err.strerror}" if named else
                          f"tuning file {self.path}: {err.strerror}")
            return
        import hashlib        # here: only a tuning file needs it (3 of the 27 ms of import)
        self.digest = hashlib.sha256(data).hexdigest()
        try:
            self.rows = load(data.decode("utf-8", "replace"), self.path)
        except ConfigError as err:
            self.error = str(err)

    def said(self):
        """What the creation meeting compares: (path, digest, error)."""
        return self.path, self.digest, self.error


def disagreement(said):
    """``said``: each rank's :meth:`Tuning.said` (a dict by rank). The ConfigError for a rank
    whose tuning file is missing or malformed, or for ranks whose files differ, naming them;
    or None."""
    for rank in sorted(said):
        path, _, error = said[rank]
        if error:
            return ConfigError(f"rank {rank}: {error}")
    seen = {}
    for rank in sorted(said):
        path, digest, _ = said[rank]
        seen.setdefault(digest, []).append((rank, path))
    if len(seen) < 2:
        return None
    return ConfigError("the tuning file differs between ranks: " + "; ".join(
        f"rank{'s' if len(who) > 1 else ''} {', '.join(str(r) for r, _ in who)}: "
        + ("none" if digest is None else f"{who[0][1]} (sha256 {digest[:12]})")
        for digest, who in seen.items()) + " (every rank must choose alike: give them the "
        "same file, PAPCOLL_TUNING_FILE)")


SOURCE = Path(__file__).with_name("policy.json")
TABLE = load(SOURCE.read_text(), SOURCE.name)


def variable():
    """The algorithms that serve Alltoallv and Alltoallw."""
    return sorted(name for name, cls in REGISTRY.items() if cls.variable)


def nonblocking(variable=False):
    """The algorithms that serve nonblocking and persistent calls (of Alltoallv too)."""
    return sorted(name for name, cls in REGISTRY.items()
                  if cls.nonblocking and (cls.variable or not variable))


def kinds(topology):
    """The TABLE topologies that ``topology`` matches (the same on every rank)."""
    if len(topology.nodes) == 1:
        return {"single-node", "any"}
    return {"multi-node", "any"} | (set() if topology.crowded_anywhere else {"multi-node spare"})


def resolve(ctx, given, call="alltoall", block=None):
    """The algorithm a blocking call of ``ctx`` runs: ``given`` (its ``algorithm=``), else
    PAPCOLL_ALGORITHM where it serves the call (any for an Alltoall: one that cannot is its
    error), else the policy's choice (:func:`choose`). Requests resolve their own way
    (requests.py), and share a call object with blocking calls only where both agree."""
    name = given or ctx.forced or AUTO
    if call != "alltoall" and name not in (AUTO, given) and not lookup(name).variable:
        name = AUTO
    return choose(ctx, block, call) if name == AUTO else name


def in_force(rows, ctx):
    """The rows ``ctx`` tries, in order: ``rows`` without the predicted ones where a measured
    row names ``ctx``'s shape (a measured row always wins over a predicted one)."""
    if not any(row.predicted for row in rows):
        return rows
    measured = any(not row.predicted and row.serves(ctx)
                   and (row.processes, row.nodes, row.ppn) != (None,) * 3 for row in rows)
    return tuple(row for row in rows if not (measured and row.predicted))


def _serving(ctx, block, call):
    """The rows of ``ctx``'s table that serve a ``call`` of ``block`` bytes per peer, skew
    bands aside, in order."""
    matching = kinds(ctx.topology)
    for row in ctx.table:
        if row.topology in matching and row.call == call \
                and (call != "alltoall" or row.admits(block, ctx.size)) \
                and row.serves(ctx) \
                and lookup(row.algorithm).unsupported(ctx) is None:
            yield row


def choose(ctx, block, call="alltoall", skew=None):
    """The algorithm for a call of ``block`` bytes per peer on ``ctx`` (``call``
    "alltoallv" or "alltoallw": one of those, whose block is not asked), by its table (the
    tuned rows, then the shipped ones); ``skew``: what an adaptive auto's ranks agreed its call
    site saw (adaptive.py), which rows with a skew band ask for (None: they do not serve)."""
    return next((row.algorithm for row in _serving(ctx, block, call) if row.admits_skew(skew)),
                "mpi")


def by_skew(ctx, block):
    """:func:`choose` for every skew of an adaptive site's ``block``-byte calls, worked out once
    from the serving rows up to the first without a band, whose first that admits a skew is
    the one ``choose`` finds. Returns (unagreed, steps, banded): the choice before any skew is
    agreed; the choice by skew as steps ((from, algorithm), ...), ascending from 0 -- bands are
    [min, max), so the choice changes only at a band's edge and each step's holds up to the
    next's --; ``banded`` False where no such row has a band, so that every skew gets what no
    skew gets. A window's end looks its skew up in the steps, in C (adaptive.py)."""
    rows = []
    for row in _serving(ctx, block, "alltoall"):
        rows.append(row)
        if row.admits_skew(None):
            break

    def first(skew):
        return next((r.algorithm for r in rows if r.admits_skew(skew)), "mpi")
    edges = sorted({0.0} | {b for r in rows for b in (r.min_skew, r.max_skew) if b is not None})
    return (first(None), tuple((edge, first(edge)) for edge in edges),
            any(not r.admits_skew(None) for r in rows))
