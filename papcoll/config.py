"""Settings read from the environment, in one place (names are PAPCOLL_*)."""
import json
import os

from .errors import PapcollError

DEFAULT_TIMEOUT = 60.0


def _env(name):
    value = os.environ.get(name, "").strip()
    return value or None


def timeout():
    """PAPCOLL_TIMEOUT: seconds any papcoll wait may last before it raises."""
    raw = _env("PAPCOLL_TIMEOUT")
    if raw is None:
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise PapcollError(f"PAPCOLL_TIMEOUT must be a positive number of seconds, not {raw!r}")
    return value


def node_size():
    """PAPCOLL_NODE_SIZE: emulate nodes of k consecutive ranks (None: real nodes)."""
    raw = _env("PAPCOLL_NODE_SIZE")
    if raw is None:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise PapcollError(f"PAPCOLL_NODE_SIZE must be a positive integer, not {raw!r}")
    return int(raw)


def copy_threshold():
    """PAPCOLL_COPY_THRESHOLD: largest block (bytes) pap_direct copies through the inbox."""
    raw = _env("PAPCOLL_COPY_THRESHOLD")
    if raw is None:
        return None
    if not raw.isdigit():
        raise PapcollError(f"PAPCOLL_COPY_THRESHOLD must be a number of bytes, not {raw!r}")
    return int(raw)


def algorithm():
    """PAPCOLL_ALGORITHM: force one registered algorithm (None: the selection policy)."""
    return _env("PAPCOLL_ALGORITHM")


def transport():
    """PAPCOLL_TRANSPORT: force one inter-node transport (None: best available)."""
    return _env("PAPCOLL_TRANSPORT")


def trace():
    """PAPCOLL_TRACE=1 records, per call, the order in which peers were served."""
    return _env("PAPCOLL_TRACE") not in (None, "0")


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
        raise PapcollError(f"PAPCOLL_CMA_MODEL={path!r}: not a papcoll.bench cma-model result "
                           f"({err})") from None
    if not isinstance(k, int) or k < 1:
        raise PapcollError(f"PAPCOLL_CMA_MODEL={path!r}: throttle must be a positive integer, "
                           f"not {k!r}")
    return k
