"""Alltoall algorithms: one module each, registered by name (see registry.py, policy.py)."""
# Importing a module registers its algorithms.
from . import cma_pap, direct, mpi, pap_direct, shm_direct, shm_pap  # noqa: F401
from .registry import AUTO, REGISTRY, Algorithm, lookup, register

__all__ = ["AUTO", "REGISTRY", "Algorithm", "lookup", "register"]
