"""How the arrival benchmark measures (its docstring in arrival.py describes the method): the
delays and statistics (pure), and the collective parts -- t_msg, clock offsets, the calls and
their timed loop. cost.py calls the algorithms the same way."""
import math
import time

import numpy as np

from papcoll.errors import AlgorithmError
from papcoll.progress import idle_barrier
from papcoll.trace import phase_times

PINGPONGS = 40          # measured repetitions for t_msg, after PINGPONG_WARMUP unmeasured ones
PINGPONG_WARMUP = 5
CLOCK_PINGPONGS = 50    # per rank, for its clock offset
ORDER_STREAM = 1        # call_schedule's generator: the delays' key with this appended
SPIN_TAIL = 50e-6       # sleep() overshoots by up to the timer slack (50 us): spin that part
T_MSG_METHOD = (f"min over {PINGPONGS} ping-pongs of one block between rank 0 and rank {{peer}} of "
                f"half the round trip (local copy when N=1), broadcast from rank 0")
CLOCK_METHOD = (f"offset to rank 0 from {CLOCK_PINGPONGS} ping-pongs per rank: the one with the "
                f"smallest round trip, offset = rank 0's time - midpoint")


# ---- arrival delays and statistics (pure) --------------------------------------------------

def block_rng(seed, size, mif):
    """The generator of one (size, MIF) block's delays: seeded alike on every rank, so all ranks
    draw the same table, and independent of which other sizes and MIFs run."""
    return np.random.default_rng([seed, size, mif])


def late_count(nprocs, fraction):
    """How many of nprocs processes are late: fraction x nprocs rounded half up."""
    return min(nprocs, math.floor(fraction * nprocs + 0.5))


def delay_table(rng, rounds, nprocs, bound, late_fraction=None):
    """Seconds every rank waits before every call, shape (rounds, nprocs)."""
    if late_fraction is None:
        return rng.uniform(0.0, bound, (rounds, nprocs))
    table = np.zeros((rounds, nprocs))
    late = late_count(nprocs, late_fraction)
    for row in table:
        row[rng.choice(nprocs, late, replace=False)] = bound
    return table


def unavoidable_wait(arrivals):
    """Mean over processes (last axis) of (last arrival - own arrival)."""
    arrivals = np.asarray(arrivals, dtype=float)
    return (arrivals.max(axis=-1, keepdims=True) - arrivals).mean(axis=-1)


def clock_offset(sent, remote, received):
    """(offset, round trip) from ping-pongs (local send time, remote reply time, local receive
    time): local time + offset = remote time. The fastest round trip bounds the error best."""
    sent, remote, received = (np.asarray(x, dtype=float) for x in (sent, remote, received))
    best = np.argmin(received - sent)
    return remote[best] - (sent[best] + received[best]) / 2, received[best] - sent[best]


def summarize(in_call, arrivals):
    """One algorithm in one block, from (iterations, processes) arrays in seconds: time in call
    averaged over processes, then avg/min/max over iterations; unavoidable wait; excess (us)."""
    per_call = np.asarray(in_call, dtype=float).mean(axis=1) * 1e6
    wait = unavoidable_wait(arrivals) * 1e6
    return {"avg_us": per_call.mean(), "min_us": per_call.min(), "max_us": per_call.max(),
            "unavoidable_us": wait.mean(), "excess_us": per_call.mean() - wait.mean(),
            "per_iteration": {"in_call_us": np.round(per_call, 3).tolist(),
                              "unavoidable_us": np.round(wait, 3).tolist()}}


def call_schedule(seed, size, label, rounds, nalgorithms, apart=False):
    """The order of one block's calls: (iteration, algorithm) pairs, drawn alike on every rank
    from a stream apart from the delays' (block_rng's draws stay as they were).

    Interleaved (the default), every iteration calls every algorithm, in a fresh order each:
    a slow spell of the machine falls on all of them alike, and each follows each other about
    equally often, where a rotation in a fixed order handed each the same neighbour -- where
    processes share cores a call carries part of the cost of the call before it (at N = 4 on
    2 cores MPI's 8 B call took 39 us after ``direct``'s, 17 after its own). ``apart``: each
    algorithm's iterations in a run of their own, the algorithms in a drawn order, as a
    program that calls one algorithm has them; a slow spell then falls on one."""
    return stretch_schedule(seed, size, label, [rounds] if apart else [1] * rounds, nalgorithms)


def stretch_schedule(seed, size, label, stretches, nalgorithms):
    """The calls of iterations cut into stretches of the given lengths, in order: in each,
    every algorithm runs through the whole stretch in turn, in a fresh drawn order each stretch
    (call_schedule's two orders are its stretches of one iteration and of all)."""
    rng = np.random.default_rng([seed, size, label, ORDER_STREAM])
    schedule, start = [], 0
    for length in stretches:
        schedule += [(it, j) for j in rng.permutation(nalgorithms).tolist()
                     for it in range(start, start + length)]
        start += length
    return schedule


# ---- measuring (collective) ----------------------------------------------------------------

def wait(seconds, spin):
    """Wait ``seconds`` from now: asleep (spinning only the tail sleep could overshoot) or busy."""
    deadline = time.perf_counter() + seconds
    if not spin and seconds > SPIN_TAIL:
        time.sleep(seconds - SPIN_TAIL)
    while time.perf_counter() < deadline:
        pass


def clock_offsets(comm):
    """This rank's (offset, round trip) to rank 0's perf_counter; rank 0 gets (0, 0)."""
    rank = comm.Get_rank()
    stamp = np.zeros(1)
    result = (0.0, 0.0)
    for peer in range(1, comm.Get_size()):
        if rank == 0:
            for _ in range(CLOCK_PINGPONGS):
                comm.Recv(stamp, source=peer)
                stamp[0] = time.perf_counter()
                comm.Send(stamp, dest=peer)
        elif rank == peer:
            samples = []
            for _ in range(CLOCK_PINGPONGS):
                sent = time.perf_counter()
                comm.Send(stamp, dest=0)
                comm.Recv(stamp, source=0)
                samples.append((sent, stamp[0], time.perf_counter()))
            result = clock_offset(*zip(*samples))
        idle_barrier(comm)
    return tuple(map(float, result))


def t_msg_peer(topology, across):
    """Rank 0's partner in the t_msg ping-pong: rank 1, or with ``across`` the lowest rank on
    another node, node 1's master (nodes are numbered by their lowest rank: rank 0 is node 0's)."""
    if across and len(topology.nodes) > 1:
        return topology.nodes[1][0]
    return min(1, topology.size - 1)


def message_time(comm, nbytes, peer=1):
    """t_msg in seconds for one block of ``nbytes`` (see arrival.py's docstring) between rank 0
    and ``peer``, and the samples' median, the same on every rank."""
    rank = comm.Get_rank()
    block, other = np.zeros(nbytes, np.uint8), np.zeros(nbytes, np.uint8)
    samples = []
    if rank in (0, peer):
        for _ in range(PINGPONG_WARMUP + PINGPONGS):
            start = time.perf_counter()
            if comm.Get_size() == 1:
                np.copyto(other, block)
            elif rank == 0:
                comm.Send(block, dest=peer)
                comm.Recv(other, source=peer)
            else:
                comm.Recv(other, source=0)
                comm.Send(block, dest=0)
            samples.append(time.perf_counter() - start)
    idle_barrier(comm)
    stats = None
    if rank == 0:
        times = np.array(samples[PINGPONG_WARMUP:]) / (1 if comm.Get_size() == 1 else 2)
        stats = (float(times.min()), float(np.median(times)))
    return comm.bcast(stats, root=0)


def block_value(source, dest):
    """The byte every element of the block from ``source`` to ``dest`` holds."""
    return (source * 31 + dest * 7 + 1) % 251


def buffers(rank, nprocs, nbytes):
    """Send buffer, receive buffer and the expected received data for blocks of ``nbytes``."""
    send = np.repeat(np.array([block_value(rank, q) for q in range(nprocs)], np.uint8), nbytes)
    want = np.repeat(np.array([block_value(q, rank) for q in range(nprocs)], np.uint8), nbytes)
    return send, np.zeros_like(send), want


def usable_algorithms(pc, names):
    """(names that run here, {name: why not}), the same on every rank: one tiny call each.
    An algorithm's ``unsupported`` check must agree on all ranks (those that pass would otherwise
    wait in the call for those that raised)."""
    send, recv, _ = buffers(pc.Get_rank(), pc.Get_size(), 1)
    usable, skipped = [], {}
    for name in names:
        try:
            pc.Alltoall(send, recv, algorithm=name)
            reason = None
        except AlgorithmError as err:     # refused before anything moved: pc stays usable
            reason = str(err)
        reason = next((r for r in pc.allgather(reason) if r), None)
        if reason:
            skipped[name] = reason
        else:
            usable.append(name)
    return usable, skipped


def run_block(pc, names, case, calls, delays, schedule, offset, spin, warmup, tick):
    """Every algorithm (``calls[j]`` calls ``names[j]``) through every iteration of one (size,
    MIF) block of ``case`` (variants.Case), in the order of ``schedule`` (call_schedule's),
    waiting ``delays`` (this rank's, one per iteration) after the barrier; ``tick()`` after
    every len(names) calls. Returns (arrival on rank 0's clock, time in call), each of shape
    (algorithms, timed iterations), in seconds, and this rank's mean phase times {algorithm:
    {phase: seconds}} of the timed calls that recorded phases. Warm-up results are checked."""
    send, recv = case.send, case.recv
    arrival = np.zeros((len(names), len(delays)))
    in_call = np.zeros_like(arrival)
    phases = {}
    traces = pc.traces
    for k, (it, j) in enumerate(schedule):
        if it < warmup:
            case.clear()
        pc.Barrier()
        wait(delays[it], spin)
        if traces is not None:
            traces.clear()
        start = time.perf_counter()
        calls[j](send, recv)
        in_call[j, it] = time.perf_counter() - start
        arrival[j, it] = start + offset
        if it < warmup and not case.ok():
            raise AssertionError(f"algorithm {names[j]!r} delivered wrong data "
                                 f"({case.bytes} bytes received)")
        if traces and it >= warmup and traces[-1]["phases"]:
            for phase, seconds in phase_times(traces[-1]).items():
                phases.setdefault(names[j], {}).setdefault(phase, []).append(seconds)
        if k % len(names) == len(names) - 1:
            tick()
    means = {name: {phase: float(np.mean(t)) for phase, t in times.items()}
             for name, times in phases.items()}
    return arrival[:, warmup:], in_call[:, warmup:], means
