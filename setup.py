"""Builds the native core (native/) as papcoll._native, loaded with ctypes by papcoll/native.py."""
from setuptools import Extension, setup

setup(ext_modules=[Extension(
    "papcoll._native",
    sources=["native/papcoll_native.c"],
    depends=["native/papcoll_native.h"],
    extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra"],
)])
