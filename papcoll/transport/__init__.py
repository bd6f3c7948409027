"""Transports: how bytes reach a peer (one-sided interface in base.py; verbs, mpi-rma, shm, cma)."""
