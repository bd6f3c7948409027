"""MPI worker for tests/test_settings_and_derived.py: ``derived.py MODE``; every rank prints
``<MODE> rank R OK`` at the end. Every mode is valid at the N its test uses.

settings    N=3 (PAPCOLL_NODE_SIZE=1 for all): a wire setting set differently on one rank
            (copy threshold, algorithm, transport, node size; also at a Split) is a ConfigError
            on every rank at creation, naming it and the ranks; a bad value set alike is one
            too; nothing is left open or in /dev/shm; then equal settings work.
read_once   N=3 (PAPCOLL_NODE_SIZE=1): settings changed on rank 0 after creation (copy
            threshold, transport) do not reach that Communicator's algorithms.
derived     N=3: Dup, Clone, Split (rank 2 UNDEFINED), Split_type, Create, Create_group,
            Idup, Create_cart; properties read on one rank only; Alltoall matches MPI; close.
finalize    N=2: after an explicit MPI.Finalize(), Communicators are closed and every use
            raises CommunicatorStateError saying MPI is finalized.
hier_setup  N=4 as 2 nodes of 2: shm_direct on rank 0, pap_shm_direct elsewhere, on first use:
            the set-up's own error on every rank (it was an AttributeError from close()).
bad_comm    N=2: COMM_NULL and an inter-communicator are CommunicatorErrors.
"""
import copy
import os
import sys
import time

import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.dirname(__file__))
import pattern  # noqa: E402

import papcoll  # noqa: E402
from papcoll import context  # noqa: E402
from papcoll.node import segment  # noqa: E402

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
TIMEOUT = float(os.environ.get("PAPCOLL_TIMEOUT", "60"))
BLOCK = 4096


def expect(error, fn, *words):
    """fn() must raise ``error`` holding every one of ``words`` within TIMEOUT (+ margin)."""
    start = time.monotonic()
    try:
        fn()
    except error as err:
        assert time.monotonic() - start < TIMEOUT + 3, f"rank {rank}: too late: {err}"
        for word in words:
            assert word in str(err), f"rank {rank}: {word!r} not in {err}"
        return err
    raise AssertionError(f"rank {rank}: no {error.__name__}")


def leftovers():
    pids = world.allgather(os.getpid())
    return [n for n in os.listdir(segment.SHM_DIR)
            if n.startswith(tuple(f"{segment.PREFIX}{p}-" for p in pids))]


def check(comm, algorithm=None, nbytes=BLOCK, call=1):
    """papcoll's Alltoall on ``comm`` gives MPI's result."""
    n, me = comm.Get_size(), comm.Get_rank()
    send = pattern.send_bytes(me, n, call, nbytes)
    want = np.empty_like(send)
    MPI.Intracomm.Alltoall(comm, send, want)           # MPI's own, on the same communicator
    recv = np.empty_like(send)
    comm.Alltoall(send, recv, algorithm=algorithm)
    assert np.array_equal(recv, want), (rank, algorithm, pattern.explain(recv, want, nbytes))


def setenv(name, value):
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def settings():
    base = os.environ.get("PAPCOLL_NODE_SIZE")
    cases = [("PAPCOLL_COPY_THRESHOLD", {0: "65536"}, "rank 0: '65536', ranks 1, 2: unset"),
             ("PAPCOLL_ALGORITHM", {0: "pap_direct"}, "rank 0: 'pap_direct', ranks 1, 2: unset"),
             ("PAPCOLL_TRANSPORT", {0: "mpi-rma"}, "rank 0: 'mpi-rma', ranks 1, 2: unset"),
             ("PAPCOLL_NODE_SIZE", {2: "2"}, f"ranks 0, 1: {base!r}, rank 2: '2'")]
    opened = dict(context._open)
    for name, values, said in cases:
        old = os.environ.get(name)
        setenv(name, values.get(rank, old))
        expect(papcoll.ConfigError, lambda: papcoll.Communicator(world),
               f"{name} differs between ranks: {said}")
        setenv(name, old)
        assert context._open == opened and leftovers() == [], (rank, name)
    # The case, at a derived Communicator's creation: every rank, not just rank 0.
    with papcoll.Communicator(world) as pc:
        setenv("PAPCOLL_COPY_THRESHOLD", "65536" if rank == 0 else None)
        expect(papcoll.ConfigError, lambda: pc.Split(0, rank),
               "PAPCOLL_COPY_THRESHOLD differs between ranks: rank 0: '65536', ranks 1, 2: unset")
        setenv("PAPCOLL_COPY_THRESHOLD", "lots")        # the same bad value everywhere: at once
        expect(papcoll.ConfigError, lambda: pc.Dup(), "PAPCOLL_COPY_THRESHOLD='lots'")
        setenv("PAPCOLL_COPY_THRESHOLD", "65536")       # the same everywhere: fine
        with pc.Dup() as dup:
            check(dup, "pap_direct")
            assert dup._context().algorithms["pap_direct"].slot == 65536
        dup.Free()
    world.Barrier()
    assert context._open == opened and leftovers() == []


def read_once():
    with papcoll.Communicator(world) as pc:
        world.Barrier()
        if rank == 0:     # too late for pc: its settings were agreed when it was made
            os.environ["PAPCOLL_COPY_THRESHOLD"] = "65536"
        for call in range(1, 4):
            check(pc, "pap_direct", call=call)
        if rank == 0:
            os.environ["PAPCOLL_TRANSPORT"] = "verbs"      # no RDMA device here: would raise
        for call in range(1, 4):
            check(pc, "direct", call=call)
        slot = pc._context().algorithms["pap_direct"].slot
        assert slot == world.bcast(slot) and slot > 65536, (rank, slot)
        assert pc._context().settings["PAPCOLL_COPY_THRESHOLD"] is None


def derived():
    pc = papcoll.Communicator(world, trace=True)
    made = []

    def use(comm, what, n, reader=0):
        """A derived Communicator: set up already (properties read on ``reader`` alone never
        wait for the others), traced as its parent is, Alltoall as MPI's, close."""
        assert type(comm) is papcoll.Communicator, (what, type(comm))
        assert comm.Get_size() == n, (what, comm.Get_size())
        if comm.Get_rank() == reader:
            assert not comm.closed and len(comm.traces) == 0, what
        comm.Barrier()
        check(comm)
        check(comm, "pap_direct")
        assert comm.traces[-1]["algorithm"] == "pap_direct", what
        made.append(comm)

    use(pc.Dup(), "Dup", size)
    use(pc.Clone(), "Clone", size, reader=1)
    half = pc.Split(MPI.UNDEFINED if rank == 2 else 0, rank)
    if rank == 2:
        assert half is MPI.COMM_NULL, half
    else:
        use(half, "Split", 2, reader=1)
    use(pc.Split_type(MPI.COMM_TYPE_SHARED, rank), "Split_type", size, reader=2)
    group = world.Get_group()
    ends = group.Incl([0, 2])
    created = pc.Create(ends)
    if rank == 1:
        assert created is MPI.COMM_NULL, created
    else:
        use(created, "Create", 2)
    if rank != 0:                      # collective over the group's members only
        use(pc.Create_group(group.Incl([1, 2])), "Create_group", 2)
    ends.Free()
    group.Free()
    # Idup: MPI's (nonblocking: no set-up inside); wrap it once complete.
    new, request = pc.Idup()
    assert type(new) is MPI.Intracomm, type(new)
    request.Wait()
    use(papcoll.Communicator(new, trace=True), "Idup", size)
    # Create_cart: MPI's own Cartcomm, topology methods and all; papcoll's Alltoall by wrapping.
    cart = pc.Create_cart([size], periods=[True])
    assert type(cart) is MPI.Cartcomm and cart.Get_coords(rank) == [rank]
    use(papcoll.Communicator(cart, trace=True), "Create_cart", size)
    # A copy shares the handle but is no Communicator of its own: it says so, never blocks.
    twin = copy.copy(pc)
    assert twin.closed and twin.traces is None
    expect(papcoll.CommunicatorStateError, lambda: twin.Alltoall(np.zeros(size), np.zeros(size)),
           "never set up")
    for comm in made:
        comm.close()
        assert comm.closed and comm.traces is None
        expect(papcoll.CommunicatorStateError, lambda: check(comm), "closed")
        comm.Free()          # the wrapped Idup and Create_cart ones too: the same handle
    pc.close()
    assert context._open == {}
    world.Barrier()
    assert leftovers() == []


def finalize():
    pc = papcoll.Communicator(world)
    check(pc)
    dup = pc.Dup()
    check(dup, "pap_direct")
    dup.Free()              # its Context stays open: MPI_Finalize closes it
    MPI.Finalize()
    assert pc.closed and dup.closed
    for comm in (pc, dup):
        def call():
            with comm:       # leaving it by the error sends nothing (MPI would abort)
                comm.Alltoall(np.zeros(size), np.zeros(size))
        expect(papcoll.CommunicatorStateError, call, "MPI is finalized")
        comm.close()         # nothing left to do: no error
    expect(papcoll.CommunicatorStateError, lambda: pc.Dup(), "MPI is finalized")
    expect(papcoll.CommunicatorStateError, lambda: papcoll.Communicator(world),
           "MPI is finalized")
    expect(papcoll.CommunicatorStateError,
           lambda: papcoll.Alltoall(world, np.zeros(size), np.zeros(size)), "MPI is finalized")


def hier_setup():
    pc = papcoll.Communicator(world)
    name = "shm_direct" if rank == 0 else "pap_shm_direct"
    send = np.zeros(size * 8, np.uint8)
    try:
        pc.Alltoall(send, np.empty_like(send), algorithm=name)
        raise AssertionError(f"rank {rank}: no error")
    except (papcoll.MismatchError, papcoll.PapcollTimeoutError) as err:
        named = err.ranks if isinstance(err, papcoll.MismatchError) else err.missing
        assert named, (rank, err)
        print(f"HIER_SETUP rank {rank}: {type(err).__name__}: {err}", flush=True)
    pc.close()
    world.Barrier()
    assert leftovers() == []


def bad_comm():
    err = expect(papcoll.CommunicatorError, lambda: papcoll.Communicator(MPI.COMM_NULL),
                 "got MPI.COMM_NULL")
    assert isinstance(err, papcoll.PapcollError) and isinstance(err, TypeError)
    half = world.Split(rank % 2, rank)
    inter = half.Create_intercomm(0, world, 1 - rank % 2, tag=7)
    expect(papcoll.CommunicatorError, lambda: papcoll.Communicator(inter),
           "got an inter-communicator")
    inter.Free()
    half.Free()


mode = sys.argv[1]
globals()[mode]()
print(f"{mode.upper()} rank {rank} OK", flush=True)
