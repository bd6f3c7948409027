"""MPI's own alltoall, as the model runs it: point-to-point messages (eager, or rendezvous
above the link's eager limit: a request to send, the receiver's clear to send once it has
posted the receive, then the data; or, inside a machine from the library's single-copy
limit, a request to send, the receiver's read of the sender's buffer by CMA, and its word
that it is done), and the schedules the libraries choose by their documented selection
(SELECTION: from their sources, which docs/model.md names).

A message from p to q with tag t lands in q's mailbox as ("m", p, t); a request to send as
("rts", p, t); the clear to send in p's as ("cts", q, t), the read's end as ("done", q, t).
An eager message is copied out of MPI's buffer by the receiver; a rendezvous one lands in
place.
"""
import functools

from .sim import Cpu, Put, Sleep, Wait

NONE = float("inf")
# Inside a machine, the smallest rendezvous message the library reads across by CMA, by
# library (strace, 40 messages of a size between two processes here). MPICH 5.0.2: a
# process_vm_readv by the receiver for every message of 8 KiB and more, none at 4-8000 B (its
# MPIR_CVAR_CH4_IPC_CMA_P2P_THRESHOLD). Open MPI 5.0.11 (ob1, btl sm, smsc cma): one for every
# message past its eager limit, 4024 B to 1 MiB, none to 4016 B (btl_sm_eager_limit 4096 with
# the header). MVAPICH 1.0's: not known, so its rendezvous as above.
SINGLE_COPY = {"mpich": 8192, "openmpi": 0}


def link(c, p, q):
    return c.mpi_intra if c.node_of[p] == c.node_of[q] else c.mpi_inter


def trips(ln, n, pull):
    """The one-way trips a message of ``n`` bytes on link ``ln`` takes: 1 eager, 2 read across
    (a request to send, the read's end), 3 rendezvous (a request, a clear to send, the data)."""
    return 1 if n <= ln.eager else 2 if ln.shared and n >= pull else 3


def exchange(c, p, sends, recvs, count=None, pull=NONE):
    """MPI_Isend of each (peer, bytes, tag) in ``sends`` and MPI_Irecv of each in ``recvs``,
    then MPI_Waitall, which progresses them: answers requests to send (a clear to send, or
    from ``pull`` bytes inside a machine a CMA read and its end), sends on clears. Each message
    stands for ``count`` alike (default: as many as the call's aggregation says)."""
    todo = {}                                  # key I wait for -> what to do when it lands

    def many(q):
        return c.w(p, q) if count is None else count

    def put(q, n, key):
        return Put(q, n, key, link(c, p, q), many(q))

    def way(q, n):
        return trips(link(c, p, q), n, pull)

    for q, n, tag in sends:
        if way(q, n) == 1:
            yield put(q, n, ("m", p, tag))
        else:
            yield put(q, 0, ("rts", p, tag))
            todo[("done" if way(q, n) == 2 else "cts", q, tag)] = ("send", q, n, tag)
    for q, n, tag in recvs:
        todo[("m" if way(q, n) == 1 else "rts", q, tag)] = ("recv", q, n, tag)
    while todo:
        key = yield Wait(tuple(todo), any=True)
        what, q, n, tag = todo.pop(key)
        if key[0] == "cts":
            yield put(q, n, ("m", p, tag))
        elif key[0] == "rts" and way(q, n) == 2:
            yield Cpu(c.m.cma(n) * many(q))
            yield put(q, 0, ("done", p, tag))
        elif key[0] == "rts":
            yield put(q, 0, ("cts", p, tag))
            todo[("m", q, tag)] = ("landed", q, n, tag)
        elif what == "recv":                   # out of the eager buffer
            yield Cpu(c.m.copy(n, c.footprint) * many(q))


def _begin(c, p):
    yield Cpu(c.m.mpi_entry)
    yield Cpu(c.m.copy(c.block, c.footprint))               # my own block


def pairwise(c, p, pull=NONE, xor=True):
    """Step i: send to p + i, receive from p - i; with ``xor`` (MPICH, MVAPICH), p xor i where
    N is a power of two: the same pairs, another order."""
    yield from _begin(c, p)
    n, size = c.block, c.size
    power = xor and size & (size - 1) == 0
    for i in range(1, size):
        dst, src = ((p ^ i, p ^ i) if power else ((p + i) % size, (p - i) % size))
        yield from exchange(c, p, [(dst, n, i)], [(src, n, i)], pull=pull)
        if c.w(p, dst) > 1:                    # aggregated: the steps it stands for go one
            ln = link(c, p, dst)               # after another, each its trips' latencies
            # (their bytes are in its count)
            yield Sleep((c.w(p, dst) - 1) * trips(ln, n, pull) * (ln.o + ln.L + c.m.poll))


def scattered(c, p, pull=NONE, throttle=32):
    """Receives from p + i and sends to p - i posted in windows of ``throttle`` peers, each
    window waited for before the next (MPICH's; throttle = N: Open MPI's basic linear and
    its linear_sync with the default of no limit, MVAPICH's isend/irecv)."""
    yield from _begin(c, p)
    n, size = c.block, c.size
    for first in range(1, size, throttle):
        steps = range(first, min(first + throttle, size))
        yield from exchange(c, p, [((p - i) % size, n, 0) for i in steps],
                            [((p + i) % size, n, 0) for i in steps], pull=pull)


def linear(c, p, pull=NONE):
    return scattered(c, p, pull, throttle=c.size)


def bruck(c, p, pull=NONE):
    """Bruck's, radix 2: a rotation (N blocks copied), then at step k = 1, 2, 4, ... the blocks
    whose index has bit k set, packed (copied), go to p + k and come from p - k, received in
    place; an inverse rotation (2 N blocks copied)."""
    yield Cpu(c.m.mpi_entry)
    n, total = c.block, c.total
    yield Cpu(c.m.copy(total * n, c.footprint))
    k = 1
    while k < total:
        count = sum(1 for i in range(total) if i & k) if total < 1 << 16 else total // 2
        yield Cpu(c.m.copy(count * n, c.footprint))
        d = _distance(c, k)
        yield from exchange(c, p, [((p + d) % c.size, count * n, k)],
                            [((p - d) % c.size, count * n, k)], count=1, pull=pull)
        k <<= 1
    yield Cpu(c.m.copy(2 * total * n, c.footprint))


def _distance(c, k):
    """Bruck's step k on the simulated ranks: k itself, or aggregated, a distance that crosses
    nodes exactly where k does in the machine modelled (onto another simulated node)."""
    if c.total == c.size:
        return k
    ppn, nodes = len(c.nodes[0]), len(c.nodes)
    return k if k < ppn else ppn * (1 + (k // ppn - 1) % (nodes - 1))


def two_proc(c, p, pull=NONE):
    yield from _begin(c, p)
    yield from exchange(c, p, [(p ^ 1, c.block, 0)], [(p ^ 1, c.block, 0)], pull=pull)


SCHEDULES = {"pairwise": pairwise,
             "pairwise_plus": lambda c, p, pull=NONE: pairwise(c, p, pull, xor=False),
             "scattered": scattered, "linear": linear, "bruck": bruck, "two_proc": two_proc}


def mpich(c):
    """MPICH 5.0 (its built-in table): Bruck up to 256 B when N >= 8, the scattered
    isend/irecv up to 32 KiB, pairwise above."""
    if c.block <= 256 and c.total >= 8:
        return "bruck"
    return "scattered" if c.block <= 32768 else "pairwise"


# Open MPI 5.0 coll/tuned's fixed decision: for N in [low, high), (bytes below which, rule)...,
# then the rule above the last bound. 1 linear, 2 pairwise, 3 modified Bruck, 4 linear_sync
# (without its default limit: linear), 5 two_proc.
OPENMPI = [((2, 3), [(2, 2), (4, 5), (16, 2), (64, 5), (256, 2), (4096, 5), (32768, 2),
                     (262144, 4), (1048576, 5)], 2),
           ((3, 8), [(8192, 4), (16384, 1), (65536, 4), (524288, 1), (1048576, 2)], 1),
           ((8, 16), [(262144, 4)], 1),
           ((16, 32), [(4, 4), (512, 3), (8192, 4), (32768, 1), (262144, 4), (524288, 1)], 4),
           ((32, 64), [(512, 3), (524288, 1)], 4),
           ((64, 128), [(1024, 3), (2048, 1), (4096, 4), (262144, 1)], 2),
           ((128, 256), [(1024, 3), (2048, 4), (262144, 1)], 2),
           ((256, 512), [(1024, 3), (8192, 4), (32768, 1)], 2),
           ((512, 1024), [(512, 3), (8192, 4), (16384, 1), (131072, 4), (262144, 1)], 2),
           ((1024, 2048), [(512, 3), (1024, 4), (2048, 1), (16384, 4), (262144, 1)], 4),
           ((2048, 4096), [(1024, 3), (4096, 4), (8192, 1), (131072, 4)], 1),
           ((4096, 1 << 62), [(2048, 3), (8192, 4), (16384, 1), (32768, 4), (65536, 1)], 4)]
OPENMPI_RULES = {1: "linear", 2: "pairwise_plus", 3: "bruck", 4: "linear", 5: "two_proc"}


def openmpi(c):
    for (low, high), bounds, above in OPENMPI:
        if low <= c.total < high:
            rule = next((r for bound, r in bounds if c.block < bound), above)
            return OPENMPI_RULES[rule]
    return "linear"                            # N = 1: a copy


def mvapich1(c):
    """MVAPICH 1.x over verbs (the defaults of its 1.2RC1 source; 1.0's are not public):
    Bruck up to 8 KiB when N >= 8, isend/irecv all at once up to 8 KiB, pairwise above."""
    if c.block <= 8192:
        return "bruck" if c.total >= 8 else "linear"
    return "pairwise"


SELECTION = {"mpich": mpich, "openmpi": openmpi, "mvapich1": mvapich1}


def protocol(c, library):
    return functools.partial(SCHEDULES[SELECTION[library](c)],
                             pull=SINGLE_COPY.get(library, NONE))
