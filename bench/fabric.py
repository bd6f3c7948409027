"""Which fabric each side of a comparison actually used, from the kernel's own counters.

A ratio to MPI means something only when MPI and papcoll moved their bytes over the same
network. What MPI was asked to use (``UCX_TLS``, ``UCX_NET_DEVICES``) is not what it used: UCX
falls back silently, and picks shared memory inside a host. So before timing anything the
benchmark makes a few calls of every algorithm at every size and counts, on every host, the
packets each RDMA device sent (``/sys/class/infiniband/DEV/ports/P/hw_counters/sent_pkts``,
which rxe and most HCAs keep) and the TCP segments the host sent (``OutSegs`` of
``/proc/net/snmp``). A network counts as used when it moved at least one packet per call on
some host: every inter-host alltoall sends at least one message per remote peer, while the
benchmark's own barriers add a few packets per probe, not per call. Inside one host, no fabric
counts (shared memory or a loopback device that is not RDMA).

The probe reads host-wide counters, so another job's traffic on the same host would show: the
benchmark runs alone, as its results already require.
"""
from pathlib import Path

PROBE_CALLS = 20
SYS_RDMA = Path("/sys/class/infiniband")
SNMP = Path("/proc/net/snmp")


def counters():
    """{network: packets sent so far} on this host: each RDMA device (``rdma:DEV``) and TCP."""
    found = {}
    for sent in sorted(SYS_RDMA.glob("*/ports/*/hw_counters/sent_pkts")):
        device = sent.parents[3].name
        found[f"rdma:{device}"] = found.get(f"rdma:{device}", 0) + int(sent.read_text())
    try:
        lines = [line.split() for line in SNMP.read_text().splitlines() if line.startswith("Tcp:")]
        found["tcp"] = int(lines[1][lines[0].index("OutSegs")])
    except (OSError, IndexError, ValueError):
        pass
    return found


def used(pc, call, send, recv, calls=PROBE_CALLS):
    """The networks ``call(send, recv)`` moved data over, agreed by every rank: a sorted tuple,
    empty for shared memory only."""
    pc.Barrier()
    before = counters()
    for _ in range(calls):
        call(send, recv)
    pc.Barrier()
    after = counters()
    busy = {net for net, n in after.items() if n - before.get(net, 0) >= calls}
    return tuple(sorted(set().union(*pc.allgather(busy))))


def describe(networks):
    return "+".join(networks) if networks else "shared memory"


def probe(pc, names, calls, cases):
    """{algorithm: {size: networks}} for every algorithm and every (size, case). Large blocks
    take fewer calls: each then moves many packets per peer."""
    return {name: {size: used(pc, call, case.send, case.recv,
                              PROBE_CALLS if size <= 65536 else 3) for size, case in cases}
            for name, call in zip(names, calls)}


def mismatches(fabrics):
    """Lines naming every (algorithm, size) whose networks differ from ``mpi``'s."""
    mpi = fabrics.get("mpi")
    if mpi is None:
        return []
    return [f"{name} at {size} B ran on {describe(nets)}, mpi on {describe(mpi[size])}"
            for name, per_size in fabrics.items() if name != "mpi"
            for size, nets in per_size.items() if nets != mpi[size]]
