"""Who shares a node with whom: node, local and masters' communicators and rank maps.

Nodes come from ``comm.Split_type(MPI.COMM_TYPE_SHARED)``; ``PAPCOLL_NODE_SIZE=k`` instead groups
consecutive ranks into emulated nodes of k (the last one may be smaller), so one machine can run
the multi-node algorithms. The master of a node is its local rank 0.
"""
import os
from dataclasses import dataclass

from mpi4py import MPI

from . import config


@dataclass
class Topology:
    rank: int
    size: int
    node_of: list        # node index of every rank
    nodes: list          # ranks of every node, ascending
    local: MPI.Intracomm     # the processes of my node
    masters: MPI.Intracomm   # local rank 0 of every node; MPI.COMM_NULL elsewhere
    emulated: bool
    crowded: bool            # my machine runs more of these processes than they have cores

    @property
    def node(self):
        return self.node_of[self.rank]

    @property
    def ppn(self):
        """Processes per node: the largest node's size (nodes may differ)."""
        return max(len(n) for n in self.nodes)

    def free(self):
        for comm in (self.local, self.masters):
            if comm != MPI.COMM_NULL:
                comm.Free()
        self.local = self.masters = MPI.COMM_NULL


def discover(comm, node_size=None):
    """Collective over ``comm``: build its Topology (``node_size`` overrides PAPCOLL_NODE_SIZE)."""
    node_size = node_size or config.node_size()
    rank, size = comm.Get_rank(), comm.Get_size()
    machine = comm.Split_type(MPI.COMM_TYPE_SHARED, rank)
    local = comm.Split(rank // node_size, rank) if node_size else machine
    leader = comm.allgather(local.allreduce(rank, op=MPI.MIN))
    node_ids = sorted(set(leader))
    node_of = [node_ids.index(leader[r]) for r in range(size)]
    nodes = [[r for r in range(size) if node_of[r] == n] for n in range(len(node_ids))]
    masters = comm.Split(0 if local.Get_rank() == 0 else MPI.UNDEFINED, rank)
    many = crowded(machine)
    if machine is not local:
        machine.Free()
    return Topology(rank, size, node_of, nodes, local, masters, emulated=bool(node_size),
                    crowded=many)


def crowded(machine):
    """Collective over ``machine`` (the processes of one real node, also when nodes are
    emulated): whether they outnumber the CPUs they may run on, together."""
    cpus = set().union(*machine.allgather(os.sched_getaffinity(0)))
    return machine.Get_size() > len(cpus)
