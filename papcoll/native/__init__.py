"""Python bindings of the native core (native/papcoll_native.h), by what they bind:

- ``lib``: loading the library (papcoll._native), the argument checks Python's side shares,
  and the counters C advances too;
- ``flags``: shared 64-bit flags and the bounded waits on them;
- ``cma``: Cross Memory Attach copies;
- ``xport``: the one-sided transports and the engine's calls;
- ``loops``: the intra-node PAP loops;
- ``plan``: cached plans, run by Communicator.Alltoall's one entry into C.
"""
from .cma import allow_ptrace_any, cma_probe, drop_ptrace_any, cma_read, cma_readv, cma_write, cma_writev
from .flags import Flags, flag_load, flag_store, ready_ge, wait_any_ge, wait_ge, wait_ready_ge
from .lib import EMSGSIZE, EPROTO, ETIMEDOUT, IOV_MAX, SLICE, counter, now_ns
from .loops import (CopyList, ListLoops, PeerLoops, SegmentLoops, SignatureMismatch,
                    buffer_address, post, post_address, post_sig)
from .plan import Plan

__all__ = ["EMSGSIZE", "EPROTO", "ETIMEDOUT", "IOV_MAX", "CopyList",
           "Flags", "ListLoops", "PeerLoops", "Plan", "SLICE", "SegmentLoops", "SignatureMismatch",
           "allow_ptrace_any", "buffer_address", "cma_probe", "cma_read", "cma_readv",
           "cma_write", "cma_writev", "counter", "drop_ptrace_any", "flag_load", "flag_store",
           "now_ns", "post", "post_address", "post_sig", "ready_ge", "wait_any_ge", "wait_ge",
           "wait_ready_ge"]
