"""Settings read from the environment, in one place (names are PAPCOLL_*).

Each is checked against its allowed range here; a bad value is a :class:`ConfigError` naming
the variable, its value and the range, never a failure somewhere later.

**Settings that change the wire** (``WIRE``) must be the same on every rank of a Communicator:
ranks that disagree on them would lay out, address or choose their exchanges differently, and
copy wrong bytes without any error. A Communicator's creation meeting agrees them (context.py),
and from then on papcoll reads them from that agreement, never from the environment again:
while papcoll works on a Communicator (:func:`adopt`), these functions return the
agreed values for those names, whatever the environment says now.
"""
import contextvars
import json
import math
import os

from .errors import ConfigError

DEFAULT_TIMEOUT = 60.0
MAX_TIMEOUT = 1e6                 # seconds (11.6 days): beyond it a wait is a hang by another name
MAX_COPY_THRESHOLD = 64 << 20     # bytes: an inbox holds 2 banks of N slots of this size
MAX_THROTTLE = 1024


# The settings whose values decide what goes on the wire: the forced algorithm, the emulated
# node size (topology: who gathers for whom, slot and piece sizes), the transport (its set-up
# steps and its default copy threshold), the copy threshold (pap_direct's slots and scheme),
# the adaptive auto's window (which calls carry its agreement: adaptive.py).
# Not agreed: PAPCOLL_TIMEOUT, PAPCOLL_TRACE, PAPCOLL_SUMMARY and PAPCOLL_RUN_REQUESTS (the
# runner checks they are the same everywhere) and PAPCOLL_CMA_MODEL (local waits, local records,
# how many peers read one process at a time: the same bytes either way), nor PAPCOLL_IB_*
# (which local device, port and GID this process uses: ranks on different machines may
# rightly differ, and the verbs set-up exchanges every process's address anyway). Nor
# PAPCOLL_TUNING_FILE: ranks may name the same table by different paths; the creation meeting
# compares the files' contents instead (algorithms/policy.py).
WIRE = ("PAPCOLL_ALGORITHM", "PAPCOLL_NODE_SIZE", "PAPCOLL_TRANSPORT", "PAPCOLL_COPY_THRESHOLD",
        "PAPCOLL_ADAPT")
MAX_ADAPT = 1 << 16
_agreed = contextvars.ContextVar("papcoll_agreed", default=None)   # {name: raw value}


def _raw(name):
    value = os.environ.get(name, "").strip()
    return value or None


def _env(name):
    agreed = _agreed.get()
    if agreed is not None and name in agreed:
        return agreed[name]
    return _raw(name)


def wire():
    """This process's raw values (stripped strings, None when unset) of the ``WIRE`` settings,
    from the environment: what a Communicator's creation meeting compares."""
    return {name: _raw(name) for name in WIRE}


def disagreement(values):
    """``values``: each rank's :func:`wire` (a dict by rank). The ConfigError naming every WIRE
    setting that differs between ranks, with the ranks and their values, or None."""
    lines = []
    for name in WIRE:
        seen = {}
        for rank in sorted(values):
            seen.setdefault(values[rank].get(name), []).append(rank)
        if len(seen) > 1:
            lines.append(f"{name} differs between ranks: " + ", ".join(
                f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}: "
                f"{'unset' if value is None else repr(value)}" for value, ranks in seen.items()))
    if not lines:
        return None
    return ConfigError("; ".join(lines) + " (settings that change what goes on the wire must "
                       "be the same on every rank of a Communicator)")


def adopt(values):
    """From now until :func:`restore` (given what this returns), in this thread: the WIRE
    settings read as ``values`` (a :func:`wire` dict that every rank agreed on), not as the
    environment says. (A bare ContextVar: this runs on every full-path call.)"""
    return _agreed.set(values)


def restore(token):
    _agreed.reset(token)


def _integer(name, raw, low, high):
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise ConfigError(f"{name}={raw!r}: must be an integer from {low} to {high}")
    return int(raw)


def timeout():
    """PAPCOLL_TIMEOUT: seconds any papcoll wait may last before it raises."""
    raw = _env("PAPCOLL_TIMEOUT")
    if raw is None:
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0 < value <= MAX_TIMEOUT:      # also refuses nan and inf
        raise ConfigError(f"PAPCOLL_TIMEOUT={raw!r}: must be a number of seconds > 0 and "
                          f"<= {MAX_TIMEOUT:g}")
    return value


def node_size():
    """PAPCOLL_NODE_SIZE: emulate nodes of k consecutive MPI.COMM_WORLD ranks, in every
    communicator of these processes (None: real nodes); see topology.py."""
    raw = _env("PAPCOLL_NODE_SIZE")
    return None if raw is None else _integer("PAPCOLL_NODE_SIZE", raw, 1, 2 ** 31 - 1)


def copy_threshold():
    """PAPCOLL_COPY_THRESHOLD: largest block (bytes) pap_direct copies through the inbox."""
    raw = _env("PAPCOLL_COPY_THRESHOLD")
    return None if raw is None else _integer("PAPCOLL_COPY_THRESHOLD", raw, 0, MAX_COPY_THRESHOLD)


def adapt():
    """PAPCOLL_ADAPT=K: ``auto`` follows the arrival pattern, agreeing every K calls of a call
    site on the skew they saw (adaptive.py); None or 0: off (the default)."""
    raw = _env("PAPCOLL_ADAPT")
    k = 0 if raw is None else _integer("PAPCOLL_ADAPT", raw, 0, MAX_ADAPT)
    if k in (1, 2, 3):
        raise ConfigError(f"PAPCOLL_ADAPT={raw!r}: 0 (off) or a window of 4 to {MAX_ADAPT} calls "
                          f"(a median of fewer calls says little)")
    return k or None


def tuning_file():
    """PAPCOLL_TUNING_FILE: the tuning file (``python -m papcoll tune``) to read; None: the
    default location, if a file is there (algorithms/policy.py)."""
    return _env("PAPCOLL_TUNING_FILE")


def algorithm():
    """PAPCOLL_ALGORITHM: force one registered algorithm, or ``auto`` (None: the policy).
    The name is checked against the registry where it is used."""
    return _env("PAPCOLL_ALGORITHM")


def transport():
    """PAPCOLL_TRANSPORT: force one inter-node transport (None: best available); the name is
    checked against the transports where it is used."""
    return _env("PAPCOLL_TRANSPORT")


def trace():
    """PAPCOLL_TRACE=1 records, per call, the order in which peers were served."""
    raw = _env("PAPCOLL_TRACE")
    if raw not in (None, "0", "1"):
        raise ConfigError(f"PAPCOLL_TRACE={raw!r}: must be 0 or 1")
    return raw == "1"


def summary():
    """PAPCOLL_SUMMARY=1: ``python -m papcoll run`` prints its summary at the program's end."""
    return _switch("PAPCOLL_SUMMARY")


def run_requests():
    """PAPCOLL_RUN_REQUESTS=1: ``python -m papcoll run`` serves the nonblocking and persistent
    alltoalls too (runner.py says for which programs)."""
    return _switch("PAPCOLL_RUN_REQUESTS")


def _switch(name):
    raw = _env(name)
    if raw not in (None, "0", "1"):
        raise ConfigError(f"{name}={raw!r}: must be 0 or 1")
    return raw == "1"


def ib_device():
    """PAPCOLL_IB_DEVICE: the RDMA device's name (None: the first with an ACTIVE port)."""
    return _env("PAPCOLL_IB_DEVICE")


def ib_port():
    """PAPCOLL_IB_PORT: the device's port (None: its first ACTIVE port)."""
    raw = _env("PAPCOLL_IB_PORT")
    return None if raw is None else _integer("PAPCOLL_IB_PORT", raw, 1, 255)


def ib_gid_index():
    """PAPCOLL_IB_GID_INDEX: the GID table entry (None: the RoCE v2 GID of an IPv4 address)."""
    raw = _env("PAPCOLL_IB_GID_INDEX")
    return None if raw is None else _integer("PAPCOLL_IB_GID_INDEX", raw, 0, 65535)


def cma_throttle():
    """PAPCOLL_CMA_MODEL: a JSON file written by ``papcoll.bench cma-model``; its measured
    throttle factor (None: no model given)."""
    path = _env("PAPCOLL_CMA_MODEL")
    if path is None:
        return None
    try:
        with open(path) as f:
            k = json.load(f)["throttle"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ConfigError(f"PAPCOLL_CMA_MODEL={path!r}: not a papcoll.bench cma-model result "
                          f"({err})") from None
    if not isinstance(k, int) or not 1 <= k <= MAX_THROTTLE:
        raise ConfigError(f"PAPCOLL_CMA_MODEL={path!r}: throttle must be an integer from 1 to "
                          f"{MAX_THROTTLE}, not {k!r}")
    return k


# Every setting papcoll reads, each by the function that reads and checks it (the algorithm's
# and the transport's names are checked against their registries where those are used).
READERS = {"PAPCOLL_ALGORITHM": algorithm, "PAPCOLL_TIMEOUT": timeout,
           "PAPCOLL_NODE_SIZE": node_size, "PAPCOLL_COPY_THRESHOLD": copy_threshold,
           "PAPCOLL_ADAPT": adapt, "PAPCOLL_TUNING_FILE": tuning_file,
           "PAPCOLL_TRANSPORT": transport, "PAPCOLL_TRACE": trace, "PAPCOLL_SUMMARY": summary,
           "PAPCOLL_RUN_REQUESTS": run_requests, "PAPCOLL_IB_DEVICE": ib_device,
           "PAPCOLL_IB_PORT": ib_port, "PAPCOLL_IB_GID_INDEX": ib_gid_index,
           "PAPCOLL_CMA_MODEL": cma_throttle}


def set_here():
    """Each PAPCOLL_* variable set in this process's environment: (name, raw value, what papcoll
    makes of it: the value it reads, a ConfigError, or None where papcoll reads no such
    setting)."""
    found = []
    for name in sorted(k for k in os.environ if k.startswith("PAPCOLL_")):
        try:
            found.append((name, os.environ[name], READERS[name]() if name in READERS else None))
        except ConfigError as err:
            found.append((name, os.environ[name], err))
    return found
