"""What entering papcoll costs: back-to-back calls of one small shape, no delays.

    mpiexec -n 2 python -m mpi4py -m papcoll.bench entry --size 8

Every rank calls in a tight loop, so the time per call is the libraries' own path plus one
exchange among processes that are all there. The baseline is ``MPI.Comm.Alltoall`` on the same
communicator (mpi4py straight into the MPI library); ``mpi`` through papcoll adds papcoll's
entry to the same MPI_Alltoall, and ``auto`` is what a user gets by default. Rounds of
``--iterations`` calls alternate between the rows (``--rounds`` of them, so that a slow spell
of the machine hits every row alike) and each row reports its median round, checked once.

``--shapes K``: the calls cycle through K shapes (blocks of 1, 2, ... K x ``--size``), as
programs that alternate shapes do: what a Communicator's call cache (papcoll/callcache.py)
costs when a call hits a plan further down its site's list, and, with K above its CAPACITY,
when every call misses (each shape evicted just before it comes back). Each row says how many
of its calls took the full path.

``--adapt K``: one more row, ``auto`` on a Communicator made with PAPCOLL_ADAPT=K (the adaptive
auto, papcoll/adaptive.py; blocking calls): what following the arrival pattern costs a call
that has nothing to gain from it.

``--form nonblocking``: each call is ``Ialltoall`` then ``Wait`` (the baseline MPI's own, through
mpi4py); ``--form persistent``: a persistent request per shape, made before the rounds, each
call its ``Start`` then ``Wait``. A request whose shape a plan holds starts by it (requests.py).
"""
import contextlib
import sys
import time

import numpy as np
from mpi4py import MPI

import papcoll
from papcoll.algorithms import AUTO

from .alternate import adaptive_communicator
from .arrival_measure import buffers, usable_algorithms
from .options import comma_list, format_size, integer, parse_algorithm, parse_size

BASELINE = "MPI_Alltoall (mpi4py)"
FORMS = ("blocking", "nonblocking", "persistent")


def add_arguments(parser):
    parser.add_argument("--size", type=parse_size, default=8, help="bytes per peer (default 8)")
    parser.add_argument("--algorithms", type=comma_list(parse_algorithm, sort=False),
                        default=["mpi", AUTO], help="papcoll rows (default mpi,auto)")
    parser.add_argument("--iterations", type=integer(1), default=2000,
                        help="calls per round (default 2000)")
    parser.add_argument("--rounds", type=integer(1), default=9,
                        help="rounds per row, alternating (default 9)")
    parser.add_argument("--shapes", type=integer(1), default=1,
                        help="shapes the calls cycle through (default 1)")
    parser.add_argument("--form", choices=FORMS, default="blocking",
                        help="blocking calls, or requests: nonblocking, persistent")
    parser.add_argument("--adapt", type=integer(4),
                        help="a row for auto with PAPCOLL_ADAPT=K (blocking calls only)")


def calls(pc, names, shapes, form):
    """Each row's call of (send, recv), in ``form``, and what frees the persistent requests."""
    mpi = MPI.Intracomm
    makers = {BASELINE: (mpi.Alltoall.__get__(pc), mpi.Ialltoall.__get__(pc),
                         mpi.Alltoall_init.__get__(pc))}
    for name in names:
        makers[name] = tuple(lambda s, r, f=f, name=name: f(s, r, algorithm=name)
                             for f in (pc.Alltoall, pc.Ialltoall, pc.Alltoall_init))
    if form == "blocking":
        return {row: made[0] for row, made in makers.items()}, []
    if form == "nonblocking":
        return {row: lambda s, r, start=made[1]: start(s, r).Wait()
                for row, made in makers.items()}, []
    requests = {row: {id(send): made[2](send, recv) for send, recv, _ in shapes}
                for row, made in makers.items()}

    def persistent(held):
        def call(s, r):
            request = held[id(s)]
            request.Start()
            request.Wait()
        return call
    return ({row: persistent(held) for row, held in requests.items()},
            [request for held in requests.values() for request in held.values()])


def run(args):
    if args.adapt and args.form != "blocking":
        if MPI.COMM_WORLD.Get_rank() == 0:
            print("papcoll.bench entry: error: --adapt measures blocking calls only",
                  file=sys.stderr, flush=True)
        return 2
    with papcoll.Communicator(MPI.COMM_WORLD) as pc, contextlib.ExitStack() as more:
        rank, size = pc.Get_rank(), pc.Get_size()
        names, skipped = usable_algorithms(pc, args.algorithms)
        shapes = [buffers(rank, size, args.size * (k + 1)) for k in range(args.shapes)]
        rows, held = calls(pc, names, shapes, args.form)
        if args.adapt:
            pa = more.enter_context(adaptive_communicator(MPI.COMM_WORLD, args.adapt))
            rows[f"auto, PAPCOLL_ADAPT={args.adapt}"] = pa.Alltoall
        times = {row: [] for row in rows}
        missed = dict.fromkeys(rows, 0)
        cache = pc._ctx.cache
        for _ in range(args.rounds):
            for row, call in rows.items():
                for send, recv, want in shapes:
                    recv[:] = 0
                    call(send, recv)
                    if not np.array_equal(recv, want):
                        raise AssertionError(f"{row}: wrong data")
                pc.Barrier()
                misses = cache.misses
                t0 = time.perf_counter()
                for i in range(args.iterations):
                    send, recv, _ = shapes[i % args.shapes]
                    call(send, recv)
                times[row].append((time.perf_counter() - t0) / args.iterations)
                missed[row] += 0 if row == BASELINE or "ADAPT" in row else cache.misses - misses
        for request in held:
            request.Free()
        per_call = {row: pc.allreduce(float(np.median(t)), op=MPI.MAX) for row, t in times.items()}
        if rank == 0:
            print(f"# papcoll entry ({args.form}): N={size}, {format_size(args.size)} per peer"
                  + (f" x 1..{args.shapes} (cycled)" if args.shapes > 1 else "")
                  + f", {args.rounds} alternating rounds of {args.iterations} back-to-back "
                  f"calls, median round (slowest rank)")
            for name, why in skipped.items():
                print(f"# skipped {name}: {why}")
            print(f"{'Row':24} {'us/call':>9} {'vs MPI':>7} {'full path':>10}")
            for row, t in per_call.items():
                print(f"{row:24} {t * 1e6:9.2f} {t / per_call[BASELINE]:7.2f} "
                      f"{'' if row == BASELINE else missed[row]:>10}", flush=True)
    return 0
