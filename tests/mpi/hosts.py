"""MPI worker: where the ranks run, as MPI and papcoll see it (for the two-host fabric).

Rank 0 prints, for the ranks in order:

    HOSTS name,name,...           socket.gethostname() of every rank
    SHARED k,k,...                the size of every rank's COMM_TYPE_SHARED communicator
    TRANSPORTS verbs:rxe0,...     the transport papcoll chooses on every rank, and its device
    TOPOLOGY nodes=[[...], ...] emulated=False     papcoll.topology.discover(COMM_WORLD)
"""
import socket

from mpi4py import MPI

from papcoll import topology, transport
from papcoll.errors import TransportError
from papcoll.progress import Deadline
from papcoll.transport.verbs import find_device

world = MPI.COMM_WORLD
shared = world.Split_type(MPI.COMM_TYPE_SHARED)
chosen = transport.choose()
try:
    device = find_device()[0]
except TransportError as err:
    device = f"none ({err})"
rows = world.gather((socket.gethostname(), shared.Get_size(), f"{chosen}:{device}"), root=0)
shared.Free()
topo = topology.discover(world, Deadline(120))
if world.Get_rank() == 0:
    names, sizes, transports = zip(*rows)
    print("HOSTS " + ",".join(names), flush=True)
    print("SHARED " + ",".join(map(str, sizes)), flush=True)
    print("TRANSPORTS " + ",".join(transports), flush=True)
    print(f"TOPOLOGY nodes={topo.nodes} emulated={topo.emulated}", flush=True)
