"""Call signatures: what every arrival signal carries, so that a receiver can check that the
sender's call agrees with its own before it touches the sender's data.

A signature is one 64-bit word: the code of the algorithm and scheme in the top 8 bits (codes
are given by the registry, algorithms/registry.py; 0 is the CMA primitives'), the block size in
bytes in the other 56. Signals that have room for fewer bits carry what they can and take the
rest from the data itself (transport/base.py).
"""
BLOCK_BITS = 56
BLOCK_MASK = (1 << BLOCK_BITS) - 1


def make(code, block):
    if not 0 <= code < 256 or not 0 <= block <= BLOCK_MASK:
        raise ValueError(f"no signature for code {code} and block {block}")
    return (code << BLOCK_BITS) | block


def code_of(sig):
    return sig >> BLOCK_BITS


def block_of(sig):
    return sig & BLOCK_MASK
