"""MPI worker for tests/test_shapes.py: ``shapes.py ALGORITHM CALLS``.

A program that alternates shapes, as real ones do: SHAPES shapes of each call kind (Alltoall,
Alltoallv, Alltoallw), more in all than a Communicator's CallCache holds, called interleaved in
a random order (the same on every rank) with random arrival delays, each against MPI's own call
on the same inputs; every element names its source, destination and index. Each call is
blocking, nonblocking (Tested until complete) or persistent (started twice, then freed), at
random: one call object serves all three. Beside the data, a model of the cache (least recently
used, callcache.CAPACITY plans) says which calls must enter C once (a hit; a request's: by the
plan its shape has, a persistent one's at its init) and which take the full path: the worker
asserts that, call by call. Two shapes differ only in the dtype the same bytes are viewed
with; one Alltoallv and one Alltoallw are in place (planned too: ``pap_direct``'s send side a
staged copy), and one Alltoallv's datatype takes every other int64 (a side MPI packs);
halfway, an Alltoallw datatype is freed and made again (a freed datatype's object must never find a plan: the cache drops them
all, and every shape's next call takes the full path).
Prints SHAPES ok <hits> <misses>.
"""
import random
import sys
import time
from collections import OrderedDict

import numpy as np
from mpi4py import MPI

import papcoll
from papcoll.callcache import CAPACITY

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
algorithm, calls = sys.argv[1], int(sys.argv[2])
SHAPES = 6
FORMS = ("blocking", "blocking", "nonblocking", "persistent")
form = "blocking"
rng = random.Random(2024)          # the same draws on every rank
EVERY = MPI.INT64_T.Create_resized(0, 16).Commit()     # an int64 every 16 bytes


def values(src, dst, n, dtype, k):
    """Source, destination, index and call number (narrow dtypes wrap)."""
    return (src * 1_000_000 + dst * 10_000 + np.arange(n) % 10_000 + 7 * k).astype(dtype)


def call(pc, name, sendbuf, recvbuf):
    """papcoll's call ``name`` in this call's form: blocking; nonblocking, Tested until
    complete; or persistent, started twice on the same data (in place: restored), then
    freed."""
    if form == "blocking":
        getattr(pc, name)(sendbuf, recvbuf, algorithm=algorithm)
        return
    if form == "nonblocking":
        request = getattr(pc, "I" + name.lower())(sendbuf, recvbuf, algorithm=algorithm)
        while not request.Test():
            pass
        return
    request = getattr(pc, name + "_init")(sendbuf, recvbuf, algorithm=algorithm)
    data = recvbuf[0] if isinstance(recvbuf, list) else recvbuf
    saved = data.copy()
    for _ in range(2):
        data[:] = saved
        request.Start()
        request.Wait()
    request.Free()


def alltoall(pc, shape, k):
    n, dtype, view = shape
    send = np.concatenate([values(rank, q, n, dtype, k) for q in range(size)])
    got, want = np.zeros(n * size, dtype), np.zeros(n * size, dtype)
    if view is not None:        # the same bytes, another dtype: another shape
        send, got, want = send.view(view), got.view(view), want.view(view)
    world.Alltoall(send, want)
    call(pc, "Alltoall", send, got)
    assert np.array_equal(got, want), ("Alltoall", shape, got[:4], want[:4])
    assert np.array_equal(want.view(dtype), np.concatenate(
        [values(q, rank, n, dtype, k) for q in range(size)]))


def alltoallv(pc, spec, k):
    counts, in_place, strided = spec   # in place: counts symmetric, as MPI requires
    out, into = counts[rank], [counts[q][rank] for q in range(size)]
    sd = np.concatenate(([0], np.cumsum(out)[:-1])).tolist()
    rd = np.concatenate(([0], np.cumsum(into)[:-1])).tolist()
    send = np.concatenate([values(rank, q, out[q], np.int64, k) for q in range(size)])
    got, want = np.full((2, sum(into)), -1, np.int64)
    kind = []
    if strided:          # every other int64 of the buffers: a side MPI packs (staged)
        kind, send, got, want = [EVERY], np.repeat(send, 2), np.repeat(got, 2), np.repeat(want, 2)
    if in_place:
        got[:], want[:] = send, send
        world.Alltoallv(MPI.IN_PLACE, [want, (into, rd), *kind])
        call(pc, "Alltoallv", MPI.IN_PLACE, [got, (into, rd), *kind])
    else:
        world.Alltoallv([send, (out, sd), *kind], [want, (into, rd), *kind])
        call(pc, "Alltoallv", [send, (out, sd), *kind], [got, (into, rd), *kind])
    assert np.array_equal(got, want), ("Alltoallv", spec)
    if strided:
        assert np.all(want[1::2] == -1) or in_place, "MPI wrote between the elements"
        want = want[::2]
    assert np.array_equal(want, np.concatenate(
        [values(q, rank, into[q], np.int64, k) for q in range(size)]))


def alltoallw(pc, spec, k):
    n, types, in_place = spec           # n ints per peer, sent as types[q] (count, type)
    send = np.concatenate([values(rank, q, n, np.int32, k) for q in range(size)])
    got, want = np.full((2, n * size), -1, np.int32)
    counts = [4 * n // types[q].Get_size() for q in range(size)]
    displs = [4 * n * q for q in range(size)]
    if in_place:
        got[:], want[:] = send, send
        world.Alltoallw(MPI.IN_PLACE, [want, (counts, displs), types])
        call(pc, "Alltoallw", MPI.IN_PLACE, [got, (counts, displs), types])
    else:
        world.Alltoallw([send, (counts, displs), types], [want, (counts, displs), types])
        call(pc, "Alltoallw", [send, (counts, displs), types], [got, (counts, displs), types])
    assert np.array_equal(got, want), ("Alltoallw", n)
    for q in range(size):       # each block holds q's elements for me (a permuted type on one
        block = slice(n * q, n * (q + 1))   # side only reorders them, as MPI does)
        assert np.array_equal(np.sort(want[block]), np.sort(values(q, rank, n, np.int32, k)))


def plans_made(kind, shape):
    """Whether the algorithm leaves a plan for this call (its contract: ``mpi`` and
    ``pap_direct`` do for every shape here, in place too). A request of a shape no plan holds
    leaves the plan its full path makes, which serves blocking calls too (both resolve alike
    here)."""
    if size == 1:                       # every call is a copy: a blocking one's is MPI's,
        return form == "blocking"       # whose plan it leaves; a request's is papcoll's
    return algorithm in ("mpi", "pap_direct")


def symmetric():
    """Counts an in-place Alltoallv can take: what p sends q, q sends p."""
    counts = [[0] * size for _ in range(size)]
    for p in range(size):
        for q in range(p, size):
            counts[p][q] = counts[q][p] = rng.randrange(1, 40)
    return counts


def main():
    global form
    pair = MPI.INT.Create_contiguous(2).Commit()
    swap = MPI.INT.Create_indexed([1, 1], [1, 0]).Commit()   # permuted: staged, packed by MPI
    kinds = [MPI.INT, pair, swap]
    shapes = {
        "a": [(1, np.int32, None), (7, np.float64, None), (7, np.float64, np.int64),
              (64, np.int32, None), (3, np.uint8, None), (100, np.int16, None)],
        "v": [([[rng.randrange(1, 40) for _ in range(size)] for _ in range(size)], False,
               s == 1) for s in range(SHAPES - 1)] + [(symmetric(), True, False)],
        "w": [(2 * (s + 1), [kinds[(q + s) % 3] for q in range(size)], s == SHAPES - 1)
              for s in range(SHAPES)],
    }
    run = {"a": alltoall, "v": alltoallv, "w": alltoallw}
    model, hits, misses = OrderedDict(), 0, 0
    with papcoll.Communicator(world) as pc:
        cache = pc._ctx.cache
        for k in range(calls):
            kind, form = rng.choice("avw"), rng.choice(FORMS)
            s = rng.randrange(SHAPES)
            if kind == "w" and k == calls // 2:     # a datatype freed and made again
                old = pair
                pair = MPI.INT.Create_contiguous(2).Commit()
                shapes["w"] = [(n, [pair if t is old else t for t in types], in_place)
                               for n, types, in_place in shapes["w"]]
                old.Free()
                model.clear()               # every plan dropped before the next call
            time.sleep(rng.random() * 0.002 * ((rank + k) % size))
            before = cache.hits
            run[kind](pc, shapes[kind][s], k)
            hit = cache.hits - before
            key = (kind, s)
            expected = key in model
            assert hit == expected, (k, key, hit, expected, list(model))
            if expected:
                model.move_to_end(key)
            elif plans_made(kind, shapes[kind][s]):
                model[key] = True
                while len(model) > CAPACITY:
                    model.popitem(last=False)
            hits, misses = hits + hit, misses + 1 - hit
        assert len(cache) == len(model), (len(cache), len(model))
    pair.Free()
    swap.Free()
    EVERY.Free()
    print(f"SHAPES ok {hits} {misses}", flush=True)


main()
