"""MPI's own alltoall, as the model runs it: point-to-point messages (eager, or rendezvous
above the link's eager limit: a request to send, the receiver's clear to send once it has
posted the receive, then the data), and the schedules the libraries choose by their documented
selection (SELECTION; docs/model.md gives the sources).

A message from p to q with tag t lands in q's mailbox as ("m", p, t); a request to send as
("rts", p, t); the clear to send in p's as ("cts", q, t). An eager message is copied out of
MPI's buffer by the receiver; a rendezvous one lands in place.
"""
from .sim import Cpu, Put, Wait


def link(c, p, q):
    return c.m.link("mpi_intra" if c.node_of[p] == c.node_of[q] else "mpi_inter")


def exchange(c, p, sends, recvs):
    """MPI_Isend of each (peer, bytes, tag) in ``sends`` and MPI_Irecv of each in ``recvs``,
    then MPI_Waitall, which progresses them: answers requests to send, sends on clears."""
    todo = {}                                  # key I wait for -> what to do when it lands
    for q, n, tag in sends:
        if n <= link(c, p, q).eager:
            yield Put(q, n, ("m", p, tag), link(c, p, q))
        else:
            yield Put(q, 0, ("rts", p, tag), link(c, p, q))
            todo[("cts", q, tag)] = ("send", q, n, tag)
    for q, n, tag in recvs:
        todo[("m" if n <= link(c, p, q).eager else "rts", q, tag)] = ("recv", q, n, tag)
    while todo:
        key = yield Wait(tuple(todo), any=True)
        what, q, n, tag = todo.pop(key)
        if what == "send":
            yield Put(q, n, ("m", p, tag), link(c, p, q))
        elif key[0] == "rts":
            yield Put(q, 0, ("cts", p, tag), link(c, p, q))
            todo[("m", q, tag)] = ("landed", q, n, tag)
        elif what == "recv":
            yield Cpu(c.m.copy(n))             # out of the eager buffer


def _begin(c, p):
    yield Cpu(c.m.mpi_entry)
    yield Cpu(c.m.copy(c.block))               # my own block


def pairwise(c, p):
    """Step i: send to p + i, receive from p - i (MPICH uses p xor i where N is a power of
    two: the same pairs, another order)."""
    yield from _begin(c, p)
    n, size = c.block, c.size
    power = size & (size - 1) == 0
    for i in range(1, size):
        dst, src = ((p ^ i, p ^ i) if power else ((p + i) % size, (p - i) % size))
        yield from exchange(c, p, [(dst, n, i)], [(src, n, i)])


def scattered(c, p, throttle=32):
    """Receives and sends posted to every peer in windows of ``throttle``, each window waited
    for before the next (MPICH's isend/irecv; throttle = N: Open MPI's basic linear)."""
    yield from _begin(c, p)
    n, size = c.block, c.size
    for first in range(1, size, throttle):
        steps = range(first, min(first + throttle, size))
        yield from exchange(c, p, [((p + i) % size, n, 0) for i in steps],
                            [((p - i) % size, n, 0) for i in steps])


def linear(c, p):
    return scattered(c, p, throttle=c.size)


def bruck(c, p):
    """Bruck's: a rotation, then at step k (1, 2, 4, ...) the blocks whose index has bit k set
    go to p + k, packed, and come from p - k; an inverse rotation."""
    yield from _begin(c, p)
    n, size = c.block, c.size
    yield Cpu(c.m.copy(size * n))
    k = 1
    while k < size:
        count = sum(1 for i in range(size) if i & k)
        yield Cpu(c.m.copy(count * n))                       # pack
        yield from exchange(c, p, [((p + k) % size, count * n, k)],
                            [((p - k) % size, count * n, k)])
        yield Cpu(c.m.copy(count * n))                       # unpack
        k <<= 1
    yield Cpu(c.m.copy(size * n))


SCHEDULES = {"pairwise": pairwise, "scattered": scattered, "linear": linear, "bruck": bruck}


def mpich(c):
    """MPICH's default for an intracommunicator: Bruck for blocks up to 256 B when N >= 8,
    isend/irecv up to 32 KiB, pairwise above."""
    if c.block <= 256 and c.size >= 8:
        return "bruck"
    return "scattered" if c.block <= 32768 else "pairwise"


SELECTION = {"mpich": mpich}


def protocol(c, library):
    return SCHEDULES[SELECTION[library](c)]
