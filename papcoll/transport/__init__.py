"""Transports: how bytes reach a peer's memory. base.py defines the one-sided interface;
implementations: mpi_rma.py (MPI-3 RMA, everywhere). ``open_transport`` picks one."""
from .. import config
from ..errors import TransportError
from .mpi_rma import MpiRmaTransport

TRANSPORTS = {MpiRmaTransport.name: MpiRmaTransport}


def choose():
    """The transport name to use: PAPCOLL_TRANSPORT, else the best available."""
    name = config.transport()
    if name is None:
        return "mpi-rma"
    if name not in TRANSPORTS:
        raise TransportError(
            f"PAPCOLL_TRANSPORT={name!r} is not available; known transports: {', '.join(TRANSPORTS)}")
    return name


def status():
    """One line per transport: whether it can be used here and which one is chosen."""
    try:
        chosen = choose()
    except TransportError as err:
        chosen = f"none ({err})"
    lines = [f"{name}: {cls.availability()}" for name, cls in TRANSPORTS.items()]
    return lines + [f"chosen: {chosen}"]


def transport_class():
    return TRANSPORTS[choose()]


def open_transport(comm, slot):
    """Collective: set up the chosen transport over ``comm`` with inbox slots of ``slot`` bytes."""
    return transport_class()(comm, slot)
