"""papcoll's performance model: each algorithm's time per call, predicted for a machine shape
(nodes x processes per node), a block size and an arrival pattern, by simulating one call
event by event -- every write, copy, flag and poll the algorithm makes (sim.py; the
algorithms' protocols in protocols.py, MPI's own in mpi_algorithms.py) -- on parameters of the
machine, each measured (params.py). ``python -m papcoll model`` is its command line (cli.py);
docs/model.md says what it covers and how well it predicts."""
