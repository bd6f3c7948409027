"""MPI worker: several workers, one after another, in one job.

``chain.py STEP [-- STEP...]``, each STEP ``[NAME=VALUE...] SCRIPT ARGS...`` (a worker of
tests/mpi) or ``[NAME=VALUE...] -m MODULE ARGS...``. Each step runs as its own ``__main__``
with its ``sys.argv`` and with its variables set in the environment, restored after it; papcoll
reads its settings when a Communicator is made, so a step's settings are its own. Every rank
meets at a barrier after each step, then rank 0 prints ``CHAIN <k> done in <seconds> s: <step>``
(the seconds from the previous barrier: where a slow job's time went).

Why: in the emulated SoftRoCE guests a rank's start-up (the interpreter, numpy, libmpi) is
about 27 s of CPU, more than most workers' own work, so the RDMA tests put the workers of one
process count in one job. A step that raises aborts the job (``python -m mpi4py``), and one
that exits with a non-zero status ends it with that status: a failure is never passed over.
"""
import os
import runpy
import sys
import time

from mpi4py import MPI

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def steps(argv):
    """Split ``argv`` at ``--`` into (variables, target, args) per step."""
    step = []
    for word in [*argv, "--"]:
        if word != "--":
            step.append(word)
            continue
        env = {}
        while step and "=" in step[0] and not step[0].startswith("-"):
            name, value = step.pop(0).split("=", 1)
            env[name] = value
        if not step:
            sys.exit(f"chain.py: a step with nothing to run in {argv}")
        yield env, step[0], step[1:]
        step = []


def run(env, target, args):
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        if target == "-m":
            sys.argv = list(args)
            runpy.run_module(args[0], run_name="__main__", alter_sys=True)
        else:
            path = os.path.join(HERE, target)
            sys.argv = [path, *args]
            runpy.run_path(path, run_name="__main__")
    except SystemExit as stop:
        if stop.code not in (None, 0):
            raise
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


started = time.monotonic()
for k, (env, target, args) in enumerate(steps(sys.argv[1:]), 1):
    run(env, target, args)
    MPI.COMM_WORLD.Barrier()
    if MPI.COMM_WORLD.Get_rank() == 0:
        words = [f"{n}={v}" for n, v in env.items()] + [target, *args]
        now = time.monotonic()
        print(f"CHAIN {k} done in {now - started:.1f} s: {' '.join(words)}", flush=True)
        started = now
