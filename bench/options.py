"""argparse types for the benchmarks' options, shared by their subcommands, and the size labels
their tables, figures and commands print."""
import argparse
import re

import papcoll
from papcoll.algorithms import AUTO

_SIZE = re.compile(r"(\d+)\s*(?:([kmg])i?)?b?", re.IGNORECASE)
_UNITS = {None: 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def parse_size(text):
    """Bytes from '8', '8B', '8K', '8KiB', '1M' (binary multiples, as in the OSU benchmarks)."""
    match = _SIZE.fullmatch(text.strip())
    if not match or int(match.group(1)) == 0:
        raise argparse.ArgumentTypeError(f"not a size of at least 1 byte: {text!r} (e.g. 8K, 1M)")
    unit = match.group(2)
    return int(match.group(1)) * _UNITS[unit and unit.lower()]


def format_size(nbytes):
    """The shortest exact label: 8, 1000, 1K, 64K, 1M."""
    for suffix, unit in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if nbytes % unit == 0:
            return f"{nbytes // unit}{suffix}"
    return str(nbytes)


def format_sizes(sizes):
    """``sizes`` as --sizes takes them: the labels, comma-separated."""
    return ",".join(map(format_size, sizes))


def integer(minimum):
    """An argparse type for integers >= ``minimum``."""
    def parse(text):
        if not text.strip().isdigit() or int(text) < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, not {text!r}")
        return int(text)
    return parse


def parse_algorithm(text):
    if text != AUTO and text not in papcoll.algorithms:
        raise argparse.ArgumentTypeError(
            f"unknown algorithm {text!r}; registered: {', '.join(papcoll.algorithms)}, or "
            f"{AUTO} (papcoll as shipped: the selection policy's choice)")
    return text


def comma_list(item, sort=True):
    """An argparse type for 'a,b,c' whose items are parsed by ``item``, without duplicates."""
    def parse(text):
        values = list(dict.fromkeys(item(part) for part in text.split(",") if part.strip()))
        if not values:
            raise argparse.ArgumentTypeError(f"empty list: {text!r}")
        return sorted(values) if sort else values
    return parse
