"""Builds the native core (native/) as papcoll._native: plain C loaded with ctypes by the
papcoll.native package (papcoll/native/lib.py), plus one Python-level entry point
(native/papcoll_lane.c)."""
from setuptools import Extension, setup

setup(ext_modules=[Extension(
    "papcoll._native",
    sources=["native/papcoll_native.c", "native/papcoll_cma.c", "native/papcoll_lane.c",
             "native/papcoll_xport.c", "native/papcoll_verbs.c", "native/papcoll_mpi_rma.c",
             "native/papcoll_exchange.c"],
    depends=["native/papcoll_native.h", "native/papcoll_xport.h"],
    extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra"],
)])
