"""What one alltoall costs the processor when it need not wait: papcoll's software per call.

    mpiexec -n 4 python -m mpi4py -m papcoll.bench cost --sizes 8,8K

Time in the call mixes waiting for peers with the library's own work. To see the work alone,
every iteration makes one process late by ``--delay`` (the others call at once, so by the time
it arrives every peer's data or advertisement is already there), and measures the late
process's call: its thread CPU time (``time.thread_time``: the library's work in this process,
its spinning included, not the time it slept) and its wall time. The late role rotates over the
ranks. The same for ``mpi`` (the MPI library's own alltoall, whose late process also finds
everything there) gives the baseline. What remains in the late call is the library: scanning
for arrivals, copying out, posting the writes, reaping their completions -- plus what the
protocol itself makes it wait for: one round trip for the zero-copy schemes (peers write only
once they see its advertisement), its peers' reads for cma_pap (its buffer must stay put until
they are done). Over verbs one more row, ``bare verbs loop``, measures the same way the bare
verbs operations a call needs (verbs_loop.py): the floor papcoll's verbs calls stand on.
"""
import time

import numpy as np
from mpi4py import MPI

import papcoll
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
    parser.add_argument("--delay", type=float, default=3e-3,
                        help="seconds the late process waits before its call (default 0.003)")


def measure(pc, call, bufs, iterations, delay, check=True):
    """Mean (CPU, wall) seconds of the late process's call, over the iterations (collective);
    ``check``: the warm-up call's result is checked."""
    rank, size = pc.Get_rank(), pc.Get_size()
    send, recv, want = bufs
    cpu = wall = 0.0
    for it in range(iterations + 1):                 # the first: a warm-up, checked
        late = it % size
        pc.Barrier()
        if rank == late:
            time.sleep(delay)
            c0, w0 = time.thread_time(), time.perf_counter()
        call(send, recv)
        if rank == late and it:
            cpu += time.thread_time() - c0
            wall += time.perf_counter() - w0
        if check and not it and not np.array_equal(recv, want):
            raise AssertionError("wrong data in a checked call")
    cpu, wall = (pc.allreduce(x) / (iterations or 1) for x in (cpu, wall))
    return cpu, wall


def run(args):
    world = MPI.COMM_WORLD
    with papcoll.Communicator(world) as pc:
        rank, size = pc.Get_rank(), pc.Get_size()
        names = args.algorithms or list(dict.fromkeys(["mpi", *papcoll.algorithms, AUTO]))
        names, skipped = usable_algorithms(pc, names)
        if rank == 0:
            print(f"# papcoll cost ({args.variant}): N={size}, transport {chosen_transport()}, "
                  f"{args.iterations} late calls per cell, late by {args.delay * 1e3:g} ms")
            for name, why in skipped.items():
                print(f"# skipped {name}: {why}")
            print(f"{'Size':8} {'Algorithm':18} {'CPU(us)':>9} {'Wall(us)':>9} {'CPU vs mpi':>10}")
        for nbytes in args.sizes:
            bufs = buffers(rank, size, nbytes)
            base = None
            for name in names:
                call = caller(pc, name, args.variant)
                cpu, wall = measure(pc, call, bufs, args.iterations, args.delay)
                getattr(call, "free", lambda: None)()
                base = cpu if name == "mpi" else base
                report(rank, nbytes, name, cpu, wall, base)
            if chosen_transport() == "verbs":
                cpu, wall = bare_verbs(world, nbytes, bufs, args)
                report(rank, nbytes, "bare verbs loop", cpu, wall, base)
    return 0


def report(rank, nbytes, name, cpu, wall, base):
    ratio = f"{cpu / base:10.2f}" if base else f"{'':10}"
    if rank == 0:
        print(f"{format_size(nbytes):8} {name:18} {cpu * 1e6:9.2f} {wall * 1e6:9.2f} {ratio}",
              flush=True)


def bare_verbs(world, nbytes, bufs, args):
    """(CPU, wall) of the bare verbs operations a call of ``nbytes`` per peer needs
    (verbs_loop.py), measured the same way."""
    comm = world.Dup()
    loop = BareLoop(comm, nbytes)
    try:
        return measure(comm, loop, bufs, args.iterations, args.delay, check=False)
    finally:
        loop.close()
        comm.Free()
