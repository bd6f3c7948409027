"""Who shares a node with whom: nodes, local ranks, masters.

Nodes come from ``comm.Split_type(MPI.COMM_TYPE_SHARED)``; ``PAPCOLL_NODE_SIZE=k`` instead puts
each process on emulated node ``MPI.COMM_WORLD`` rank // k (world ranks 0..k-1, k..2k-1, ...; the
last one may be smaller), so one machine can run the multi-node algorithms. Like a real node, an
emulated node belongs to the process, not to the communicator: a communicator of some of the
processes (a row of a Cartesian grid, say) sees the world's nodes, which may hold non-consecutive
ranks of it, as real nodes may. Nodes are numbered by their lowest rank in the communicator, their
master (local rank 0).

Discovery is collective and bounded (rendezvous.py): one meeting, then the one blocking MPI call
it needs (``Split_type``), then a second meeting that carries what every rank found. No
communicator outlives it: the processes of a node meet over papcoll's private communicator.

A machine is *crowded* when it runs more processes than it has cores: this communicator's
processes there against the cores they may use, or the whole job's processes there (as the
launcher says: MPICH's hydra ``MPI_LOCALNRANKS``, Open MPI's ``OMPI_COMM_WORLD_LOCAL_SIZE``)
against the machine's cores -- a row of a Cartesian grid of 4 processes on 2 cores has a core
per process only on paper: the other row's processes take their turns on the same cores.
"""
import os
from dataclasses import dataclass

from mpi4py import MPI

from . import config, rendezvous


@dataclass
class Topology:
    rank: int
    size: int
    node_of: list        # node index of every rank
    nodes: list          # ranks of every node, ascending
    emulated: bool
    crowded: bool        # my machine runs more processes than it has cores (see above)
    crowded_anywhere: bool   # some machine does: the same on every rank, for the policy

    @property
    def node(self):
        return self.node_of[self.rank]

    @property
    def local(self):
        """The ranks of my node, ascending: local rank i is ``local[i]``."""
        return self.nodes[self.node]

    @property
    def masters(self):
        """The master (lowest rank) of every node."""
        return [ranks[0] for ranks in self.nodes]

    @property
    def ppn(self):
        """Processes per node: the largest node's size (nodes may differ)."""
        return max(len(n) for n in self.nodes)


FROM_ENV = "PAPCOLL_NODE_SIZE"


def discover(comm, deadline, node_size=FROM_ENV):
    """Collective over ``comm``, bounded by ``deadline``: its Topology, with emulated nodes of
    ``node_size`` world ranks (None: real nodes; by default PAPCOLL_NODE_SIZE's)."""
    if node_size == FROM_ENV:
        node_size = config.node_size()
    rank, size = comm.Get_rank(), comm.Get_size()
    rendezvous.agree(comm, "topology", deadline)
    machine = comm.Split_type(MPI.COMM_TYPE_SHARED, rank)     # everyone is here: see rendezvous
    try:
        mates = _ranks_in(machine, comm)
    finally:
        machine.Free()
    found = rendezvous.exchange(comm, "topology found", (mates, sorted(os.sched_getaffinity(0)),
                                                         MPI.COMM_WORLD.Get_rank(),
                                                         _job_crowded()), deadline)
    if node_size is None:
        leaders = [min(found[r][0]) for r in range(size)]
    else:                   # the emulated node of world rank w is w // k, in every communicator
        emulated = {}
        for r in range(size):
            emulated.setdefault(found[r][2] // node_size, []).append(r)
        leaders = [min(emulated[found[r][2] // node_size]) for r in range(size)]
    node_ids = sorted(set(leaders))
    node_of = [node_ids.index(leader) for leader in leaders]
    nodes = [[r for r in range(size) if node_of[r] == n] for n in range(len(node_ids))]
    def crowded(machine):
        return (len(machine) > len(set().union(*(found[r][1] for r in machine)))
                or any(found[r][3] for r in machine))

    return Topology(rank, size, node_of, nodes, emulated=node_size is not None,
                    crowded=crowded(mates),
                    crowded_anywhere=any(crowded(found[r][0]) for r in range(size)))


def _job_crowded():
    """Whether the launcher says the job runs more processes on this machine than it has
    cores (False where it says nothing)."""
    for name in ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE"):
        try:
            return int(os.environ[name]) > (os.cpu_count() or 1)
        except (KeyError, ValueError):
            continue
    return False


def _ranks_in(sub, comm):
    """The ranks in ``comm`` of the processes of ``sub`` (a communicator of some of them)."""
    mine, theirs = sub.Get_group(), comm.Get_group()
    try:
        return MPI.Group.Translate_ranks(mine, None, theirs)
    finally:
        mine.Free()
        theirs.Free()
