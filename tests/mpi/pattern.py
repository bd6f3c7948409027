"""Test data that names itself: every 8-byte word of a block encodes (call, source, destination,
word index), so a misrouted, stale or shifted block cannot pass. The index bytes are also mixed
with a byte of those fields, so even a 1-byte block differs between sources, calls and peers."""
import numpy as np


def _mix(src, dst, call):
    return ((src * 37 + dst * 11 + call * 101) & 0xFF) * 0x01010101


def block(src, dst, call, nbytes):
    words = np.arange((nbytes + 7) // 8, dtype="<u8") ^ np.uint64(_mix(src, dst, call))
    words |= np.uint64(((call & 0xFFFF) << 48) | ((src & 0xFF) << 40) | ((dst & 0xFF) << 32))
    return words.view(np.uint8)[:nbytes]


def send_bytes(rank, size, call, nbytes):
    return np.concatenate([block(rank, d, call, nbytes) for d in range(size)])


def recv_bytes(rank, size, call, nbytes):
    return np.concatenate([block(s, rank, call, nbytes) for s in range(size)])


def explain(got, want, nbytes):
    """Where ``got`` first differs from ``want``, decoded: which block, and what it holds."""
    bad = int(np.flatnonzero(got != want)[0])
    src, offset = divmod(bad, nbytes) if nbytes else (0, bad)
    word = offset // 8
    start = src * nbytes + word * 8
    raw = np.zeros(8, np.uint8)
    chunk = got[start:start + 8]
    raw[:len(chunk)] = chunk
    v = int(raw.view("<u8")[0])
    call, s, d = v >> 48, (v >> 40) & 0xFF, (v >> 32) & 0xFF
    index = (v & 0xFFFFFFFF) ^ _mix(s, d, call)
    return (f"first wrong byte {bad}: block from rank {src}, word {word}; it holds "
            f"call {call}, src {s}, dst {d}, word {index}")
