"""Alltoall algorithms: one module each, registered by name (see registry.py, policy.py)."""
from . import mpi  # noqa: F401  (importing a module registers its algorithm)
from .registry import REGISTRY, Algorithm, lookup, register

__all__ = ["REGISTRY", "Algorithm", "lookup", "register"]
