"""Alltoall algorithms: one module each, registered by name (see registry.py, policy.py)."""
from . import direct, mpi, pap_direct  # noqa: F401  (importing a module registers it)
from .registry import REGISTRY, Algorithm, lookup, register

__all__ = ["REGISTRY", "Algorithm", "lookup", "register"]
