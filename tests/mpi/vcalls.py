"""MPI worker for tests/test_vcalls.py: ``vcalls.py v|w|bad|mismatch ALGORITHM [calls]``.

v: Alltoallv against MPI's own on the same inputs: random counts per pair (zeros, a single
    non-zero peer, counts that differ by direction, blocks around the copy slot), blocks laid
    out in a random order with gaps, dtypes, MPI.IN_PLACE, the spec forms, random arrival
    delays; every element says its source, destination and index. Prints V ok <calls>.
w: Alltoallw against MPI's: 2-D and 3-D pencil transposes of complex128 arrays with subarray
    types, vectors with stride, resized types, contiguous and strided peers mixed, IN_PLACE.
    Prints W ok.
bad: specs refused with a BufferSpecError naming the value, before any data moves (a correct
    call follows on the same Communicator). Prints BAD ok.
mismatch: rank 1 sends rank 0 one byte more than rank 0 expects: MismatchError on rank 0 naming
    ranks 1 and 0; every rank ends its call in bounded time. Prints MISMATCH <rank> <ranks>.
cached-v, cached-w: the same disagreement between two shapes every rank has called (so each
    rank's call is served by its plan: a hit on every side), through Alltoallv or Alltoallw.
    Prints MISMATCH <rank> <ranks> <whether the call hit the cache>.
"""
import random
import sys
import time

import numpy as np
from mpi4py import MPI

import papcoll
from papcoll.errors import BufferSpecError, MismatchError, PapcollError

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
mode, algorithm = sys.argv[1], sys.argv[2]
DTYPES = (np.int32, np.float64, np.uint8, np.complex128, np.int16)


def values(src, dst, n, dtype):
    """Elements that say their source, destination and index (narrow dtypes wrap)."""
    return (src * 1_000_000 + dst * 10_000 + np.arange(n) % 10_000).astype(dtype)


def layout(counts, rng, gaps=True):
    """Displacements (elements) of blocks of ``counts`` in a random order with gaps; the
    buffer's length."""
    order = list(range(size))
    rng.shuffle(order)
    displs, at = [0] * size, 0
    for q in order:
        at += rng.randrange(3) if gaps else 0
        displs[q] = at
        at += counts[q]
    return displs, at + (rng.randrange(3) if gaps else 0)


def counts_matrix(rng, slot_edge, symmetric):
    kind = rng.randrange(5)
    if kind == 0:
        c = [[0] * size for _ in range(size)]
        src, dst = rng.randrange(size), rng.randrange(size)
        c[src][dst] = rng.randrange(1, 5000)
    elif kind == 1:      # around the copy slot: some pairs copy-based, others zero-copy
        c = [[rng.choice((0, 1, slot_edge - 1, slot_edge, slot_edge + 1, 3 * slot_edge))
              for _ in range(size)] for _ in range(size)]
    else:
        top = rng.choice((1, 8, 300, 70_000))
        c = [[rng.randrange(top + 1) for _ in range(size)] for _ in range(size)]
    if symmetric:
        c = [[c[min(a, b)][max(a, b)] for b in range(size)] for a in range(size)]
    return c


def slot_of(pc):
    """pap_direct's copy slot (PAPCOLL_COPY_THRESHOLD), whichever algorithm this run tests."""
    from papcoll.algorithms.pap_direct import copy_threshold
    from papcoll.transport import transport_class
    return min(copy_threshold(transport_class(), size), 1 << 16)


def v_call(pc, rng, dtype, in_place, form):
    itemsize = np.dtype(dtype).itemsize
    c = counts_matrix(rng, max(1, slot_of(pc) // itemsize), in_place)
    send_counts, recv_counts = c[rank], [c[q][rank] for q in range(size)]
    sdispl, slen = layout(send_counts, rng)
    rdispl, rlen = layout(recv_counts, rng)
    send = np.full(slen, 77, dtype)
    for q in range(size):
        send[sdispl[q]:sdispl[q] + send_counts[q]] = values(rank, q, send_counts[q], dtype)
    recv = np.full(rlen, 99, dtype)
    if in_place:             # the send blocks sit in the receive buffer (symmetric counts)
        recv_in = recv.copy()
        for q in range(size):
            recv_in[rdispl[q]:rdispl[q] + recv_counts[q]] = values(rank, q, recv_counts[q],
                                                                     dtype)
    expected = recv_in.copy() if in_place else recv.copy()
    world.Alltoallv(MPI.IN_PLACE if in_place else [send, (send_counts, sdispl)],
                    [expected, (recv_counts, rdispl)])
    if in_place:
        recv[:] = recv_in
    time.sleep(rng.random() * 0.003 * ((rank + rng.randrange(size)) % size))
    rspec = [recv, (recv_counts, rdispl)]
    sspec = [send, (send_counts, sdispl)]
    if form == 1:
        mpitype = MPI._typedict[np.dtype(dtype).char]
        rspec, sspec = [recv, recv_counts, rdispl, mpitype], [send, send_counts, sdispl, mpitype]
    pc.Alltoallv(MPI.IN_PLACE if in_place else sspec, rspec, algorithm=algorithm)
    for q in range(size):       # every element from its source, for its destination, in order
        got = recv[rdispl[q]:rdispl[q] + recv_counts[q]]
        want = values(q, rank, recv_counts[q], dtype)
        assert np.array_equal(got, want), (q, recv_counts[q], got[:8], want[:8])
    assert np.array_equal(recv.view(np.uint8), expected.view(np.uint8)), "differs from MPI"


def run_v(calls):
    rng = random.Random(1234)            # the same draws on every rank
    with papcoll.Communicator(world) as pc:
        for k in range(calls):
            v_call(pc, rng, DTYPES[k % len(DTYPES)], in_place=k % 4 == 3, form=k % 2)
        # one shape repeated (the plan's path, native/papcoll_call.c), data changed each time;
        # every 7th call another shape, then the first again
        rng2 = random.Random(77)
        shapes = [counts_matrix(rng2, max(1, slot_of(pc) // 8), False) for _ in range(2)]
        for k in range(50):
            c = shapes[k % 7 == 6]
            out, into = c[rank], [c[q][rank] for q in range(size)]
            sdispl, slen = layout(out, random.Random(k % 7 == 6), gaps=True)
            rdispl, rlen = layout(into, random.Random(3), gaps=True)
            send = np.zeros(slen, np.float64)
            for q in range(size):
                send[sdispl[q]:sdispl[q] + out[q]] = values(rank, q, out[q], np.float64) + k
            got, expected = np.full((2, rlen), -1.0)
            world.Alltoallv([send, (out, sdispl), MPI.DOUBLE], [expected, (into, rdispl), MPI.DOUBLE])
            time.sleep(rng.random() * 0.001 * ((rank + k) % size))
            pc.Alltoallv([send, (out, sdispl), MPI.DOUBLE], [got, (into, rdispl), MPI.DOUBLE],
                         algorithm=algorithm)
            assert np.array_equal(got, expected), k
        # the forms without displacements (packed), with one count, and a plain buffer
        counts = [q + 1 for q in range(size)]
        send = np.arange(sum(counts), dtype=np.int64) + 100 * rank
        got, expected = np.full((2, size * (rank + 1)), -1, np.int64)
        world.Alltoallv([send, counts], [expected, rank + 1])
        pc.Alltoallv([send, counts], [got, rank + 1], algorithm=algorithm)
        assert np.array_equal(got, expected), (got, expected)
        send = np.arange(3 * size, dtype=np.float32) + rank
        got, expected = np.full((2, 3 * size), -1, np.float32)
        world.Alltoallv(send, expected)
        pc.Alltoallv(send, got, algorithm=algorithm)
        assert np.array_equal(got, expected), (got, expected)
    print(f"V ok {calls}", flush=True)


def pencil(pc, n, dims, repeat=1):
    """A pencil FFT's transpose of a complex128 array of n^dims elements, by subarray types on
    both sides: dims 2, rows to columns, (n/size, n) to (n, n/size); dims 3, slabs to pencils,
    (n/size, n, n) to (n, n/size, n). Every element differs (rank and index). ``repeat``: the
    same call again (the same datatype objects: a plan's path), the data changed each time."""
    p = n // size
    rest = [n] * (dims - 2)
    a = (np.arange(p * n ** (dims - 1), dtype=np.complex128) + 1j * rank).reshape(p, n, *rest)
    out = np.zeros((n, p, *rest), np.complex128)
    cplx = MPI.C_DOUBLE_COMPLEX
    stypes = [cplx.Create_subarray([p, n, *rest], [p, p, *rest], [0, q * p] + [0] * (dims - 2))
              .Commit() for q in range(size)]
    rtypes = [cplx.Create_subarray([n, p, *rest], [p, p, *rest], [q * p, 0] + [0] * (dims - 2))
              .Commit() for q in range(size)]
    ones, zeros = [1] * size, [0] * size
    for k in range(repeat):
        a += k
        expected = np.zeros_like(out)
        world.Alltoallw([a, (ones, zeros), stypes], [expected, (ones, zeros), rtypes])
        pc.Alltoallw([a, (ones, zeros), stypes], [out, (ones, zeros), rtypes],
                     algorithm=algorithm)
        assert np.array_equal(out, expected), k
    for t in stypes + rtypes:
        t.Free()


def mixed(pc, rng, in_place):
    """Per peer: contiguous ints, a strided vector, or a resized type, byte displacements."""
    vec = MPI.INT.Create_vector(3, 2, 5).Commit()               # 6 ints over 13
    resized = MPI.INT.Create_resized(0, 12).Commit()            # 1 int every 12 bytes
    kinds = [(MPI.INT, 6, 24), (vec, 1, 13 * 4), (resized, 6, 6 * 12)]   # (type, count, span)
    choice = [[rng.randrange(3) for _ in range(size)] for _ in range(size)]
    choice = [[choice[min(a, b)][max(a, b)] for b in range(size)] for a in range(size)]

    def spec(buf, mine):
        types, counts, displs, at = [], [], [], 0
        for q in range(size):
            t, count, span = kinds[mine[q]]
            types.append(t), counts.append(count), displs.append(at)
            at += span + 4
        return [buf, (counts, displs), types], at

    sides = [choice[rank][q] for q in range(size)]
    _, nbytes = spec(None, sides)
    send = np.arange(nbytes // 4 + 1, dtype=np.int32) + 1000 * rank
    recv = np.full(nbytes // 4 + 1, -1, np.int32)
    expected = recv.copy()
    if in_place:
        recv[:] = send
        expected[:] = send
    world.Alltoallw(MPI.IN_PLACE if in_place else spec(send, sides)[0], spec(expected, sides)[0])
    pc.Alltoallw(MPI.IN_PLACE if in_place else spec(send, sides)[0], spec(recv, sides)[0],
                 algorithm=algorithm)
    assert np.array_equal(recv, expected), (recv, expected)
    vec.Free(), resized.Free()


def run_w():
    rng = random.Random(99)
    with papcoll.Communicator(world) as pc:
        for n in (size * 4, size * 16):
            pencil(pc, n, 2)
            pencil(pc, n, 3)
        pencil(pc, size * 4, 3, repeat=20)
        for k in range(12):
            time.sleep(rng.random() * 0.002 * ((rank + k) % size))
            mixed(pc, rng, in_place=k % 3 == 2)
    print("W ok", flush=True)


def refused(pc, sendspec, recvspec, words, w=False):
    try:
        (pc.Alltoallw if w else pc.Alltoallv)(sendspec, recvspec, algorithm=algorithm)
    except BufferSpecError as err:
        assert all(word in str(err) for word in words), (str(err), words)
        return
    raise AssertionError(f"not refused: {words}")


def run_bad():
    with papcoll.Communicator(world) as pc:
        buf = np.zeros(4 * size, np.int32)
        out = np.zeros(4 * size, np.int32)
        ok = ([1] * size, list(range(size)))
        refused(pc, [buf, ([1] * (size + 1), None)], [out, ok], ["sendbuf counts", str(size + 1)])
        refused(pc, [buf, ok], [out, ([1] * size, [0] * (size - 1))], ["recvbuf displs"])
        refused(pc, [buf, ([-1] + [1] * (size - 1), ok[1])], [out, ok], ["counts[0]", "-1"])
        huge = [1 << 62] + [1] * (size - 1)          # bytes past any integer type of numpy
        refused(pc, [buf, (huge, ok[1])], [out, ok], ["sendbuf", str(1 << 62), "outside"])
        refused(pc, [buf, ok], [out, (huge, ok[1])], ["recvbuf", str(1 << 62), "outside"])
        refused(pc, [buf, (huge, ok[1]), [MPI.INT] * size],
                [out, (ok[0], [4 * q for q in range(size)]), [MPI.INT] * size],
                ["sendbuf", str(1 << 62), "outside"], w=True)
        refused(pc, [buf, 1 << 62], [out, ok], [str(1 << 62), "outside"])
        refused(pc, [buf, ([1] * size, [4 * size] * size)], [out, ok], ["outside the buffer"])
        refused(pc, [buf, ok], [out, ([2] * size, [0] * size)], ["overlap"]) if size > 1 else None
        vec = MPI.INT.Create_vector(2, 1, 3).Commit()
        refused(pc, [buf, ([1] * size, [0] * size), [vec] * size],
                [out, ([1] * size, [4 * 4 * size - 4] * size), [vec] * size],
                ["outside the buffer"], w=True)
        refused(pc, [buf, ([1] * size, [0] * size), [MPI.INT] * (size + 2)],
                [out, ([1] * size, [4 * q for q in range(size)]), [MPI.INT] * size],
                ["sendbuf datatypes", str(size + 2)], w=True)
        if size > 1:    # interleaved strided receive blocks that share a byte
            refused(pc, [buf, ([1] * size, [0] * size), [vec] * size],
                    [out, ([1] * size, [12 * q for q in range(size)]), [vec] * size],
                    ["overlap"], w=True)
        vec.Free()
        refused(pc, [buf, ok], [out, ([1] * size, [4 * size] * size)], ["recvbuf", "outside"])
        refused(pc, MPI.IN_PLACE, MPI.IN_PLACE, ["IN_PLACE"])
        refused(pc, [buf, ([2] * size, [0] * size)], [out, ok], ["itself"])
        recv = np.full(size, -1, np.int32)
        pc.Alltoallv([np.full(size, rank, np.int32), ok], [recv, ok], algorithm=algorithm)
        assert list(recv) == list(range(size)), recv
    print("BAD ok", flush=True)


def run_mismatch():
    pc = papcoll.Communicator(world)
    counts = [4] * size
    send_counts = list(counts)
    if rank == 1:
        send_counts[0] = 5
    send = np.zeros(4 * size + 1, np.uint8)
    recv = np.zeros(4 * size, np.uint8)
    outcome = disagreement(lambda: pc.Alltoallv(
        [send, (send_counts, [4 * q for q in range(size)])],
        [recv, (counts, [4 * q for q in range(size)])], algorithm=algorithm))
    print(f"MISMATCH {rank} {outcome}", flush=True)


def disagreement(call):
    """What ``call`` (rank 1 sends rank 0 5 bytes where it expects 4) ended in, in bounded
    time: "none", the ranks of the MismatchError, or another papcoll error's name."""
    start = time.monotonic()
    try:
        call()
        outcome = "none"
    except MismatchError as err:
        assert "rank 1 sends 5 bytes to rank 0, which expects 4" in str(err), str(err)
        outcome = f"{err.ranks}"
    except PapcollError as err:
        outcome = type(err).__name__
    assert time.monotonic() - start < 40
    return outcome


def run_cached_mismatch(w):
    pc = papcoll.Communicator(world)
    send, recv = np.zeros(5 * size, np.uint8), np.zeros(5 * size, np.uint8)
    displs = [5 * q for q in range(size)]

    def call(one_more):            # one_more: rank 1 sends rank 0 five bytes, not four
        sends, recvs = [4] * size, [4] * size
        if one_more and rank == 1:
            sends[0] = 5
        if one_more and rank == 0:
            recvs[1] = 5
        if w:
            pc.Alltoallw([send, (sends, displs), [MPI.BYTE] * size],
                         [recv, (recvs, displs), [MPI.BYTE] * size], algorithm=algorithm)
        else:
            pc.Alltoallv([send, (sends, displs)], [recv, (recvs, displs)], algorithm=algorithm)

    call(False)
    call(True)                   # both shapes agreed once: each rank keeps a plan of each
    hits = pc._ctx.cache.hits
    outcome = disagreement(lambda: call(rank == 1))   # rank 1 repeats the longer shape
    print(f"MISMATCH {rank} {outcome} hit={pc._ctx.cache.hits == hits + 1}", flush=True)


{"v": lambda: run_v(int(sys.argv[3]) if len(sys.argv) > 3 else 60), "w": run_w,
 "bad": run_bad, "mismatch": run_mismatch, "cached-v": lambda: run_cached_mismatch(False),
 "cached-w": lambda: run_cached_mismatch(True)}[mode]()
