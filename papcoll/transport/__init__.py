"""Transports: how bytes reach a peer's memory. base.py defines the one-sided interface;
implementations: verbs.py (RDMA verbs through pyverbs) and mpi_rma.py (MPI-3 RMA, everywhere).
``open_transport`` picks one."""
from functools import lru_cache

from .. import config
from ..errors import ConfigError, TransportError
from .mpi_rma import MpiRmaTransport
from .verbs import VerbsTransport, find_device

TRANSPORTS = {VerbsTransport.name: VerbsTransport, MpiRmaTransport.name: MpiRmaTransport}


@lru_cache(maxsize=None)
def _verbs_usable():
    try:
        find_device()
        return True
    except TransportError:
        return False


def choose():
    """The transport name to use: PAPCOLL_TRANSPORT (an error if it cannot be had), else verbs
    when this process finds a usable RDMA device, else mpi-rma."""
    name = config.transport()
    if name is None:
        return "verbs" if _verbs_usable() else "mpi-rma"
    if name not in TRANSPORTS:
        raise ConfigError(
            f"PAPCOLL_TRANSPORT={name!r}: unknown; transports: {', '.join(TRANSPORTS)}")
    if name == "verbs":
        find_device()      # raises, naming what is missing
    return name


def status():
    """One line per transport: whether it can be used here and which one is chosen."""
    try:
        chosen = choose()
    except (TransportError, ConfigError) as err:
        chosen = f"none ({err})"
    lines = [f"{name}: {cls.availability()}" for name, cls in TRANSPORTS.items()]
    return lines + [f"chosen: {chosen}"]


def transport_class():
    return TRANSPORTS[choose()]


def open_transport(comm, inbox, deadline, names=None, owner=""):
    """Collective, bounded by ``deadline``: set up the chosen transport over ``comm`` with an
    inbox of ``inbox`` bytes, or over the caller's memory ``inbox``, for algorithm ``owner``
    (see base.Transport)."""
    return transport_class()(comm, inbox, deadline, names, owner)
