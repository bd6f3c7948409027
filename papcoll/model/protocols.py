"""papcoll's algorithms as the model runs them: each a protocol of one process (sim.py's
actions), following the algorithm's module in papcoll/algorithms -- what it writes, copies,
signals and waits for, in its order. Names are the registry's.

What the model leaves out, and why it is second order at the sizes it is checked at: the
engine's slices and Python's checks between them (each a millisecond apart, under the
deadline); the staging ring's waits for room (a ring holds four of its largest writes; a call
waits for the completion of larger ones only at its end, which the model plays); the
hierarchical algorithms' rounds of pieces (one round up to the board's slot); and the PAP
order in which a process writes to peers it has not seen (successors first).
"""
from dataclasses import replace

from ..algorithms.pap_direct import capped, runs_with
from .sim import Complete, Cpu, Poll, Put, Signal, Wait

ADVERT_BYTES = 40          # an advert record (native/papcoll_xport.h: struct pc_advert)


def shape(nodes, ppn, size=None):
    """Ranks by node, as papcoll numbers them: node k holds ranks k ppn ... (k + 1) ppn - 1;
    with ``size`` processes, the last node holds what remains."""
    size = nodes * ppn if size is None else size
    return [list(range(k, min(k + ppn, size))) for k in range(0, size, ppn)]


class Call:
    """One call's shape: ``nodes`` (lists of ranks), ``block`` bytes per pair, on ``machine``;
    aggregated (aggregate.py), a message between two nodes stands for ``weight`` alike, and
    the machine modelled has ``total`` processes."""

    def __init__(self, machine, nodes, block, weight=1.0, total=None):
        self.m, self.nodes, self.block = machine, nodes, block
        self.size = sum(map(len, nodes))
        self.weight, self.total = weight, total or self.size
        self.node_of = {r: i for i, ranks in enumerate(nodes) for r in ranks}
        self.footprint = 2 * self.total * block    # a process's send and receive buffers
        self.net, self.given, self.exposed, self.mpi_intra, self.mpi_inter = (
            machine.link(k) for k in ("net", "net_given", "net_exposed", "mpi_intra", "mpi_inter"))
        # inside a node papcoll's writes take the path net_local_L measures (the NIC's loopback
        # where nodes are hosts), each link's latency by as much less as the inbox's
        closer = machine.net_local_L - machine.net_L
        self.near = {k: replace(k, L=max(0.0, k.L + closer)) for k in (self.net, self.exposed)}

    def to(self, p, q, link):
        """``link`` for a write from p to q."""
        return link if self.node_of[p] != self.node_of[q] else self.near[link]

    def w(self, p, q):
        """The messages one from p to q stands for."""
        return 1.0 if self.node_of[p] == self.node_of[q] else self.weight

    def peers(self, p):
        """Every other rank, from my successor on."""
        return [(p + k) % self.size for k in range(1, self.size)]

    def local(self, p):
        return self.nodes[self.node_of[p]]

    def copy(self, blocks=1, count=1):
        """``count`` copies of ``blocks`` blocks each."""
        return Cpu(count * self.m.copy(blocks * self.block, self.footprint))


def _data(q):
    return ("data", q)


def pap_direct_copy(c, p):
    """Copy-based PAP Direct: a write into every peer's inbox, served peers first (the ones
    whose data is in: they have arrived), then each block copied out as it lands."""
    yield Cpu(c.m.entry)
    peers = c.peers(p)
    seen = [k[1] for k in (yield Poll(tuple(map(_data, peers))))]
    for q in seen + [q for q in peers if q not in seen]:
        yield Put(q, c.block, _data(p), c.to(p, q, c.net), c.w(p, q))
    yield c.copy()                                  # my own block
    left = set(map(_data, peers))
    while left:
        k = yield Wait(tuple(left), any=True)
        left.discard(k)
        yield c.copy(count=c.w(p, k[1]))
    yield Complete()                                # my writes read my buffer until then


def pap_direct_zcopy(c, p, step_order=False):
    """Zero-copy PAP Direct: advertise my receive buffer to every peer (one write each: record
    and notice), write straight into every peer that has advertised, never waiting for one
    while another is ready; ``step_order``: ``direct``, peer p+1, p+2, ... each in turn."""
    yield Cpu(c.m.entry)
    peers = c.peers(p)
    for q in peers:
        yield Put(q, ADVERT_BYTES, ("advert", p), c.to(p, q, c.net), c.w(p, q))
    yield c.copy()
    unsent, left = list(peers), set(map(_data, peers))
    advert = {q: ("advert", q) for q in peers}.__getitem__
    while unsent:
        ready = [unsent[0]] if step_order else [k[1] for k in (
            yield Poll(tuple(map(advert, unsent))))]
        if step_order:
            yield Wait((("advert", ready[0]),))
        for q in ready:
            unsent.remove(q)
            yield Put(q, c.block, _data(p), c.to(p, q, c.exposed), c.w(p, q))
        if unsent and not step_order:
            k = yield Wait((*map(advert, unsent), *left), any=True)
            left.discard(k)
    if left:
        yield Wait(tuple(left))
    yield Complete()


def direct(c, p):
    return pap_direct_zcopy(c, p, step_order=True)


def pap_direct_runs(machine, block, total):
    """The protocol ``pap_direct`` runs for ``block`` bytes among ``total`` processes:
    copy-based up to the transport's threshold, capped as papcoll caps it by the inbox's size
    (algorithms/pap_direct.py)."""
    return runs_with(block, capped(machine.copy_threshold, total))


def pap_direct(c, p):
    return PAPCOLL[pap_direct_runs(c.m, c.block, c.total)](c, p)


def _gather(c, p):
    """Hierarchical phase 1: my blocks for my node's processes into my board region and my rows
    of the aggregates for every remote node into the outbox, then my post."""
    yield Cpu(c.m.entry)
    yield c.copy(c.total - 1)
    yield Signal(tuple(q for q in c.local(p) if q != p), ("post", p))
    yield c.copy()


def hierarchical(c, p, pap=True, staged=False):
    """``pap_shm_direct`` (``pap``) and ``shm_direct``: gather; the masters write each node's
    aggregate (ppn x ppn' blocks) straight into every other node's segment once their node's
    posts are in (in arrival order, or in step order); scatter: with ``pap``, one done flag per
    remote master, raised as its aggregate lands, each process copying its part of it then;
    without, one flag once all are in and the master's own writes complete (its call among the
    masters is over: native/papcoll_hier.c, ``done`` after ``masters``). ``staged``: the
    paper's (Sect. 4.3), whose master copies each aggregate from its receive area into the
    shared buffer before raising its flag, and hands on only after its own node's gather."""
    yield from _gather(c, p)
    node = c.node_of[p]
    local = c.local(p)
    others = [(node + k) % len(c.nodes) for k in range(1, len(c.nodes))]
    left = {("post", q) for q in local if q != p}
    if p != local[0]:                               # a process that is not its node's master
        left |= {("done", j) for j in others} if pap else ({("done",)} if others else set())
        while left:
            k = yield Wait(tuple(left), any=True)
            left.discard(k)
            if k[0] == "post":
                yield c.copy()
            elif pap:
                yield c.copy(len(c.nodes[k[1]]), c.weight)
            else:
                yield c.copy(c.total - len(local))
        return
    aggs, sent, landed = {("agg", j) for j in others}, False, []
    while left or aggs or not sent or landed:
        if not left and not sent:                   # my node's posts are in: the aggregates go
            seen = [k[1] for k in (yield Poll(tuple(sorted(aggs))))] if pap else []
            for j in seen + [j for j in others if j not in seen]:
                yield Put(c.nodes[j][0], len(local) * len(c.nodes[j]) * c.block, ("agg", node),
                          c.given, c.weight)
            sent = True
            continue
        if staged and not left and landed:          # the paper, after my writes: copy, flag
            j = landed.pop(0)
            yield c.copy(len(local) * len(c.nodes[j]), c.weight)
            yield Signal(tuple(local[1:]), ("done", j))
            yield c.copy(len(c.nodes[j]), c.weight)
            continue
        if not pap and not left:                    # shm_direct: every aggregate, then one flag
            yield Wait(tuple(aggs))                 # once the masters' call is over, my own
            yield Complete()                        # writes complete
            aggs = set()
            for j in others if staged else ():
                yield c.copy(len(local) * len(c.nodes[j]), c.weight)
            yield Signal(tuple(local[1:]), ("done",))
            yield c.copy(c.total - len(local))
            continue
        k = yield Wait(tuple(left | (aggs if pap else set())), any=True)
        if k[0] == "post":
            left.discard(k)
            yield c.copy()
        elif staged:
            aggs.discard(k)
            landed.append(k[1])
        else:
            aggs.discard(k)
            yield Signal(tuple(local[1:]), ("done", k[1]))
            yield c.copy(len(c.nodes[k[1]]), c.weight)
    yield Complete()                                # the masters' call, before the outbox's reuse


def pap_shm_direct(c, p):
    return hierarchical(c, p, pap=True)


def shm_direct(c, p):
    return hierarchical(c, p, pap=False)


def shm_pap(c, p):
    """Inside one node: my blocks for the others into my board region, my post; then each
    process's block for me copied out as its post rises."""
    yield Cpu(c.m.entry)
    yield c.copy(c.size - 1)
    yield Signal(tuple(c.peers(p)), ("post", p))
    yield c.copy()
    left = {("post", q) for q in c.peers(p)}
    while left:
        left.discard((yield Wait(tuple(left), any=True)))
        yield c.copy()


def cma_pap(c, p):
    """Inside one node: post my send buffer's address; read my block out of each process's
    buffer by CMA as its post rises, acknowledging each; return once all have read mine."""
    yield Cpu(c.m.entry)
    peers = c.peers(p)
    yield Signal(tuple(peers), ("post", p))
    yield c.copy()
    left = {("post", q) for q in peers}
    while left:
        k = yield Wait(tuple(left), any=True)
        left.discard(k)
        yield Cpu(c.m.cma(c.block))
        yield Signal((k[1],), ("ack", p))
    yield Wait(tuple(("ack", q) for q in peers))


PAPCOLL = {"pap_direct": pap_direct, "pap_direct_copy": pap_direct_copy,
           "pap_direct_zcopy": pap_direct_zcopy, "direct": direct,
           "pap_shm_direct": pap_shm_direct, "shm_direct": shm_direct,
           "shm_pap": shm_pap, "cma_pap": cma_pap}
INTRANODE = ("shm_pap", "cma_pap")
