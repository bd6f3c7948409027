"""What one alltoall costs the processor when it need not wait: papcoll's software per call.

    mpiexec -n 4 python -m mpi4py -m papcoll.bench cost --sizes 8,8K

Time in the call mixes waiting for peers with the library's own work. To see the work alone,
every iteration makes one process late by ``--delay`` (the others call at once, so by the time
it arrives every peer's data or advertisement is already there), and measures the late
process's call: its thread CPU time (``time.thread_time``: the library's work in this process,
its spinning included, not the time it slept), the part of that spent in the kernel
(``getrusage``'s system time of the thread: over SoftRoCE a post's packets are made there, in
the poster's time; a kernel may sample the split at its ticks, so it is a mean over many
calls, not a per-call figure) and its wall time. The late role rotates over the ranks. With
``--counts`` it also counts, per late call, what papcoll's verbs transport did -- work
requests posted (writes, receives re-posted), completions reaped, polls and the polls
that found nothing -- and what its native waits did: looks, yields, sleeps. With ``--posted``
it times only the part of the late call up to its writes' posts: the call made as a request
(``Ialltoall``; a persistent one's ``Start``) and tested once -- one pass of the engine, which
writes to every peer, all of them there already -- and its counts are those of that part; the
wait that follows is untimed. The same for
``mpi`` (the MPI library's own alltoall, whose late process also finds
everything there) gives the baseline. What remains in the late call is the library: scanning
for arrivals, copying out, posting the writes, reaping their completions -- plus what the
protocol itself makes it wait for: one round trip for the zero-copy schemes (peers write only
once they see its advertisement), its peers' reads for cma_pap (its buffer must stay put until
they are done). Over verbs one more row, ``bare verbs loop``, measures the same way the bare
verbs operations a call needs (verbs_loop.py): the floor papcoll's verbs calls stand on (with
``--posted``, its posts alone).
"""
import resource
import time

import numpy as np
from mpi4py import MPI

import papcoll
from papcoll import _native
from papcoll.algorithms import AUTO
from papcoll.transport import choose as chosen_transport

from .arrival_measure import buffers, usable_algorithms
from .variants import caller
from .options import comma_list, format_size, integer, parse_algorithm, parse_size
from .verbs_loop import BareLoop

DEFAULT_SIZES = "8,8K"


def add_arguments(parser):
    parser.add_argument("--sizes", type=comma_list(parse_size), default=DEFAULT_SIZES,
                        help=f"bytes per peer (default {DEFAULT_SIZES})")
    parser.add_argument("--algorithms", type=comma_list(parse_algorithm, sort=False),
                        help=f"algorithms to measure (default: all that run here, and {AUTO})")
    parser.add_argument("--iterations", type=integer(1), default=200,
                        help="measured late calls per size and algorithm (default 200)")
    parser.add_argument("--variant", choices=("alltoall", "persistent"), default="alltoall",
                        help="the call: alltoall (default) or persistent (one persistent "
                             "request per algorithm, started and waited for)")
    parser.add_argument("--counts", action="store_true",
                        help="also count, per late call, the verbs transport's work requests, "
                             "completions and polls, and the native waits' yields and sleeps")
    parser.add_argument("--posted", action="store_true",
                        help="time the late call only up to its writes' posts: the request "
                             "made or started, and tested once; the wait untimed")
    parser.add_argument("--delay", type=float, default=3e-3,
                        help="seconds the late process waits before its call (default 0.003)")


def kernel_time():
    """This thread's system CPU seconds so far."""
    return resource.getrusage(resource.RUSAGE_THREAD).ru_stime


def measure(pc, call, bufs, iterations, delay, check=True, counts=None):
    """Mean (CPU, of it in the kernel, wall) seconds of the late process's call, over the
    iterations (collective); ``check``: the warm-up call's result is checked. ``counts``: a
    function returning {name: count so far}; its mean growth per late call is returned fourth
    ({} without). A ``call`` with ``finish`` (:class:`Posted`) is timed and counted up to its
    ``finish()`` only."""
    finish = getattr(call, "finish", lambda: None)
    rank, size = pc.Get_rank(), pc.Get_size()
    send, recv, want = bufs
    cpu = kernel = wall = 0.0
    grew = {}
    for it in range(iterations + 1):                 # the first: a warm-up, checked
        late = it % size
        pc.Barrier()
        if rank == late:
            time.sleep(delay)
            before = counts() if counts else {}
            c0, k0, w0 = time.thread_time(), kernel_time(), time.perf_counter()
        call(send, recv)
        if rank == late and it:
            cpu += time.thread_time() - c0
            kernel += kernel_time() - k0
            wall += time.perf_counter() - w0
            for key, n in (counts() if counts else {}).items():
                grew[key] = grew.get(key, 0) + n - before[key]
        finish()
        if check and not it and not np.array_equal(recv, want):
            raise AssertionError("wrong data in a checked call")
    cpu, kernel, wall = (pc.allreduce(x) / (iterations or 1) for x in (cpu, kernel, wall))
    total = {}
    for part in pc.allgather(grew):
        for key, n in part.items():
            total[key] = total.get(key, 0) + n
    return cpu, kernel, wall, {key: n / (iterations or 1) for key, n in total.items()}


WAITS = ("looks", "yields", "sleeps")


def counter(pc, name):
    """{name: count so far} of this process: its native waits, and the verbs transport of
    algorithm ``name`` if it has one (mpi and auto: the waits alone)."""
    alg = pc._context().algorithm(name) if name in papcoll.algorithms and name != "mpi" else None
    transport = getattr(getattr(alg, "exchange", None), "transport", None)
    port = transport.native if getattr(transport, "name", None) == "verbs" else None

    def now():
        found = dict(zip(WAITS, _native.wait_counts()))
        if port is not None and not port.closed:
            found.update(port.vstats)
        return found
    return now


def run(args):
    world = MPI.COMM_WORLD
    with papcoll.Communicator(world) as pc:
        rank, size = pc.Get_rank(), pc.Get_size()
        names = args.algorithms or list(dict.fromkeys(["mpi", *papcoll.algorithms, AUTO]))
        names, skipped = usable_algorithms(pc, names)
        if rank == 0:
            part = ", up to the posts" if args.posted else ""
            print(f"# papcoll cost ({args.variant}{part}): N={size}, transport "
                  f"{chosen_transport()}, {args.iterations} late calls per cell, late by "
                  f"{args.delay * 1e3:g} ms")
            for name, why in skipped.items():
                print(f"# skipped {name}: {why}")
            print(f"{'Size':8} {'Algorithm':18} {'CPU(us)':>9} {'Kernel(us)':>10} {'Wall(us)':>9} "
                  f"{'CPU vs mpi':>10}")
        for nbytes in args.sizes:
            bufs = buffers(rank, size, nbytes)
            base = None
            for name in names:
                call = Posted(pc, name, args.variant) if args.posted else \
                    caller(pc, name, args.variant)
                if args.counts:
                    call(*bufs[:2])          # the algorithm and its transport exist from here
                    getattr(call, "finish", lambda: None)()
                cpu, kernel, wall, counted = measure(
                    pc, call, bufs, args.iterations, args.delay,
                    counts=counter(pc, name) if args.counts else None)
                getattr(call, "free", lambda: None)()
                base = cpu if name == "mpi" else base
                report(rank, nbytes, name, cpu, kernel, wall, base)
                if args.counts and rank == 0:
                    print("#   per late call: " + ", ".join(
                        f"{key} {n:.1f}" for key, n in counted.items()), flush=True)
            if chosen_transport() == "verbs":
                cpu, kernel, wall, _ = bare_verbs(world, nbytes, bufs, args)
                report(rank, nbytes, "bare verbs loop", cpu, kernel, wall, base)
    return 0


class Posted:
    """A call of ``name`` (``variant`` alltoall or persistent) split where its writes are
    posted: ``self(send, recv)`` makes it as a request (``Ialltoall``; a persistent one's
    ``Start``, the request made at the first call) and tests it once; ``finish()`` waits."""

    def __init__(self, pc, name, variant):
        if variant == "persistent":
            self.kept = caller(pc, name, variant)
            self.begin = self.kept.started
        else:
            ialltoall = (lambda s, r: MPI.Intracomm.Ialltoall(pc, s, r)) if name == "mpi" else \
                (lambda s, r: pc.Ialltoall(s, r, algorithm=name))
            self.begin, self.kept = ialltoall, None
        self.request = None

    def __call__(self, send, recv):
        self.request = self.begin(send, recv)
        self.request.Test()

    def finish(self):
        self.request.Wait()

    def free(self):
        if self.kept is not None:
            self.kept.free()


def report(rank, nbytes, name, cpu, kernel, wall, base):
    ratio = f"{cpu / base:10.2f}" if base else f"{'':10}"
    if rank == 0:
        print(f"{format_size(nbytes):8} {name:18} {cpu * 1e6:9.2f} {kernel * 1e6:10.2f} "
              f"{wall * 1e6:9.2f} {ratio}", flush=True)


def bare_verbs(world, nbytes, bufs, args):
    """(CPU, kernel, wall, {}) of the bare verbs operations a call of ``nbytes`` per peer needs
    (verbs_loop.py), measured the same way."""
    comm = world.Dup()
    loop = BareLoop(comm, nbytes, posted=args.posted)
    try:
        return measure(comm, loop, bufs, args.iterations, args.delay, check=False)
    finally:
        loop.close()
        comm.Free()
