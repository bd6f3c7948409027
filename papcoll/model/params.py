"""The machine parameters the model works on, and their file.

Every parameter is a measured quantity with the measurement that gave it (``source``); none is
fitted to the times the model predicts. Times are in seconds, sizes in bytes. A link is LogGP's
(Alexandrov et al.): ``L`` latency, ``o`` the poster's CPU per message, ``g`` the least time a
message takes its node's NIC (its message rate), ``G`` seconds per byte; MPI's point-to-point adds its
``eager`` limit (larger messages wait for the receiver: rendezvous).

The file is JSON: ``{"papcoll_model": 5, "machine": text, "params": {name: {"value": v,
"source": text}}}``, names as in :data:`NAMES` (a link's with its prefix, ``net_L``).
"""
import json
import math
import statistics
from dataclasses import dataclass, field

FORMAT = 5
LINK = ("L", "o", "g", "G")
LINKS = {"net": "papcoll's transport between processes (verbs or MPI RMA), per message, into "
                "its own inbox",
         "net_given": "the same into an inbox the caller gives (the hierarchical masters')",
         "net_exposed": "the same into a receive buffer the receiver exposed (zero-copy)",
         "mpi_inter": "MPI's point-to-point between nodes",
         "mpi_intra": "MPI's point-to-point inside a node"}
SCALARS = {
    "cores": "cores per node, a fraction where emulated nodes share one (processes beyond them "
             "share a core: their CPU time stretches); bound unevenly, as the busiest CPU "
             "shares",
    "entry": "papcoll's own part of a call: entry, checks and plan, before its first write",
    "mpi_entry": "MPI_Alltoall's entry through mpi4py, before its first message",
    "poll": "one poll of the transport that finds nothing",
    "flag": "a store on one core until another core's poll sees it",
    "extra": "by algorithm: what a balanced 8 B call between two processes, cores free, takes "
             "beyond the model's play of it (papcoll's own work the protocols leave out, such "
             "as Python's path where no plan serves a call; MPI's own under ``mpi``)",
    "tail": "a call's mean over its usual time (every other time here is the usual): what "
            "its slowest calls, a preemption or a scheduler's slice, add; 1 for none",
    "wake": "where processes outnumber cores: what a wait that has to wait adds before it sees "
            "its flag or message (the waiter is often off its core), and what a process that "
            "shares its CPU takes to get its turn to take or answer a write (``*_answered``)",
    "copy_o": "a memcpy's fixed cost",
    "copy_G": "a memcpy's seconds per byte (the node's copy bandwidth, one core): one figure, or "
              "[footprint bytes, seconds per byte] pairs by the memory a process's call touches "
              "(caches)",
    "cma_alpha": "CMA: syscall and access check",
    "cma_beta": "CMA: seconds per byte copied",
    "cma_l": "CMA: lock and pin one page",
    "cma_page": "CMA: page size",
    "net_shared": "1 where papcoll's writes are copies by the writer's CPU (MPI RMA between "
                  "processes of one machine, as MPICH makes them), 0 where a NIC moves them",
    "copy_threshold": "pap_direct's largest copy-based block on this transport (papcoll caps it "
                      "by the inbox's size)",
    "net_copied": "papcoll's transport: the largest write whose source it copies at the post "
                  "(verbs: inline, or into a staging ring); a call waits for larger ones to "
                  "complete before it ends (over MPI RMA every write: its notice goes once its "
                  "data is complete, which L holds)",
    "net_local_L": "papcoll's transport's latency between two processes of one node (over "
                   "verbs the NIC's loopback); writes inside a node take each link's latency "
                   "by as much less than net_L",
    "net_ack": "papcoll's transport: from a write's landing until its poster sees it complete "
               "(the responder's acknowledgement on its way back), for a write above "
               "net_copied",
    "placement": "the CPU each process of rank 0's machine is bound to, by rank (empty where "
                 "any may run on more than one)",
    "net_answered": "1 where papcoll's writes into its own inbox complete, and their notice "
                    "goes, only once the target's own progress has taken them (an active "
                    "message: MPI RMA into memory MPI did not allocate), 0 where they land by "
                    "themselves",
    "net_given_answered": "the same, into an inbox the caller gives",
    "net_exposed_answered": "the same, into a receive buffer the receiver exposed",
    "mpi_inter_shared": "1 where MPI's messages between nodes go through memory both share "
                        "(emulated nodes on one machine), 0 where a NIC moves them",
    "mpi_inter_eager": "MPI between nodes: the largest message sent eagerly",
    "mpi_intra_eager": "MPI inside a node: the largest message sent eagerly",
}
NAMES = tuple(SCALARS) + tuple(f"{k}_{p}" for k in LINKS for p in LINK) + ("cma_gamma",)


class ParamsError(ValueError):
    pass


@dataclass(frozen=True)
class Link:
    L: float
    o: float
    g: float
    G: float
    eager: float = float("inf")
    shared: bool = False     # inside a node: a copy by the poster's CPU, no NIC
    copied: float = float("inf")    # larger writes complete ``ack`` after they land, and
    ack: float = 0.0                # their poster's call waits for that (papcoll's, verbs)
    answered: bool = False          # a write lands once the target's own progress takes it

    def wire(self, nbytes):
        """Seconds from a message's injection until its last byte is in: L + n G."""
        return self.L + nbytes * self.G


@dataclass(frozen=True)
class Machine:
    values: dict
    sources: dict = field(default_factory=dict)
    about: str = ""

    def __getattr__(self, name):
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None

    def link(self, kind):
        v, net = self.values, kind.startswith("net")
        return Link(*(v[f"{kind}_{p}"] for p in LINK),
                    eager=v.get(f"{kind}_eager", float("inf")),
                    shared=bool({"mpi_intra": True, "mpi_inter": v["mpi_inter_shared"]}.get(
                        kind, v["net_shared"])),
                    copied=v["net_copied"] if net else float("inf"),
                    ack=v["net_ack"] if net else 0.0,
                    answered=bool(v[f"{kind}_answered"]) if net else False)

    def copy(self, nbytes, footprint=0):
        """A memcpy of ``nbytes`` in a call whose process touches ``footprint`` bytes."""
        return self.copy_o + nbytes * self.copy_g(footprint) if nbytes else 0.0

    def copy_g(self, footprint):
        """copy_G where a process touches ``footprint`` bytes: between two measured
        footprints, log-linear; outside them, the nearest."""
        table = self.copy_G
        if not isinstance(table, list):
            return table
        if footprint <= table[0][0]:
            return table[0][1]
        for (f0, g0), (f1, g1) in zip(table, table[1:]):
            if footprint <= f1:
                return g0 + (g1 - g0) * math.log(footprint / f0) / math.log(f1 / f0)
        return table[-1][1]

    def cma(self, nbytes, readers=1):
        """One CMA read of ``nbytes`` while ``readers`` read the same process: the CMA model
        t = alpha + n beta + l gamma_c ceil(n / s) (DESIGN.md)."""
        gamma = self.cma_gamma
        g = gamma[min(readers, len(gamma)) - 1]
        return self.cma_alpha + nbytes * self.cma_beta + self.cma_l * g * -(-nbytes // self.cma_page)

    def extra_of(self, algorithm):
        """Seconds of ``algorithm``'s ``extra`` (0 where it was not measured)."""
        return self.extra.get(algorithm, 0.0)

    def share(self, ppn):
        """Processes per core when ``ppn`` run on a node."""
        return max(1.0, ppn / self.cores)

    def to_json(self):
        return {"papcoll_model": FORMAT, "machine": self.about,
                "params": {k: {"value": self.values[k], "source": self.sources.get(k, "")}
                           for k in NAMES}}


def make(about="", sources=None, **values):
    missing = [k for k in NAMES if k not in values]
    if missing:
        raise ParamsError(f"parameters missing: {', '.join(missing)}")
    unknown = [k for k in values if k not in NAMES]
    if unknown:
        raise ParamsError(f"unknown parameters: {', '.join(unknown)}")
    for k, v in values.items():
        ok = (isinstance(v, list) and v and all(isinstance(x, (int, float)) and x > 0 for x in v)
              if k == "cma_gamma" else _cpus(v) if k == "placement" else _by_algorithm(v)
              if k == "extra" else _footprints(v) if k == "copy_G" and isinstance(v, list) else
              isinstance(v, (int, float)) and not isinstance(v, bool)
              and v >= 0 and (k not in ("cma_page", "tail") or v >= 1)
              and (k != "cores" or v > 0))
        if not ok:
            raise ParamsError(f"parameter {k}: {v!r} is not a valid value")
    return Machine(dict(values), dict(sources or {}), about)


def median(runs):
    """Several calibrations' (values, sources, about) as one: each parameter, and each entry of
    a table, the lower median of the calibrations' (so a value one of them measured, which a
    transient in one cannot move). One calibration is itself."""
    values, sources, about = runs[0]
    if len(runs) == 1:
        return dict(values), dict(sources), about

    def lower(got):
        if isinstance(got[0], dict):              # extra: an algorithm not in a table is 0
            return {k: lower([g.get(k, 0.0) for g in got]) for k in sorted(set().union(*got))}
        if isinstance(got[0], list):              # cma_gamma, placement; copy_G's rows
            return [lower(list(column)) for column in zip(*got)]
        return statistics.median_low(got)

    return ({k: lower([run[0][k] for run in runs]) for k in values},
            {k: f"the lower median of {len(runs)} calibrations, each: {v}"
             for k, v in sources.items()},
            f"{about}; the lower median of {len(runs)} calibrations in one launch")


def _by_algorithm(table):
    """An ``extra`` table: {algorithm: seconds >= 0} (an algorithm not in it: 0)."""
    return isinstance(table, dict) and all(
        isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
        for k, v in table.items())


def _cpus(placement):
    """A placement: a CPU number >= 0 for each process, or none."""
    return isinstance(placement, list) and all(
        isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in placement)


def _footprints(table):
    """A copy_G table: [footprint, seconds per byte] pairs, footprints rising from 1."""
    return bool(table) and all(
        isinstance(x, list) and len(x) == 2 and all(isinstance(y, (int, float)) for y in x)
        and x[0] >= 1 and x[1] >= 0 for x in table) and all(
        a[0] < b[0] for a, b in zip(table, table[1:]))


def load(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise ParamsError(f"{path}: {e}") from None
    if not isinstance(doc, dict) or doc.get("papcoll_model") != FORMAT:
        raise ParamsError(f"{path}: not a papcoll model file of format {FORMAT}")
    params = doc.get("params")
    if not isinstance(params, dict) or not all(isinstance(p, dict) and "value" in p
                                               for p in params.values()):
        raise ParamsError(f"{path}: 'params' must map names to {{value, source}}")
    try:
        return make(doc.get("machine", ""), {k: p.get("source", "") for k, p in params.items()},
                    **{k: p["value"] for k, p in params.items()})
    except ParamsError as e:
        raise ParamsError(f"{path}: {e}") from None


def save(machine, path):
    with open(path, "w") as f:
        json.dump(machine.to_json(), f, indent=1)
        f.write("\n")
