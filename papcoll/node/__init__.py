"""Inside a node: the shared segment (segment.py), the per-Communicator node board every
intra-node algorithm signals through (board.py), and Cross Memory Attach (cma.py)."""
