"""``python -m papcoll info``: what papcoll found here -- algorithms, the selection table in
force and where it came from, transports, devices, MPI. ``python -m papcoll tune``: measure this
machine and write a tuning file (under mpiexec; papcoll.bench's tune, whose --help lists its
options). ``python -m papcoll run PROGRAM [ARG...]``: run an unmodified mpi4py program with its
alltoalls through papcoll (under mpiexec; papcoll/runner.py). ``python -m papcoll model ...``:
the performance model (papcoll/model/cli.py)."""
import argparse
import sys

import papcoll
from papcoll import config, context, transport
from papcoll.algorithms import policy
from papcoll.errors import ConfigError, TransportError
from papcoll.node.cma import THROTTLE, cma_status


def _bytes(bound):
    return "any" if bound is None else str(bound)


def _shape(row):
    """A row's shape: the only communicators (and MPI library) it serves."""
    said = [f"{label}={value}" for label, value in (
        ("N", row.processes), ("nodes", row.nodes), ("ppn", row.ppn),
        ("transport", row.transport), ("library", row.library),
        ("emulated", row.emulated)) if value is not None]
    return (f"  only {' '.join(said)}" if said else "") + ("  (predicted)" if row.predicted else "")


def settings():
    """A line for each PAPCOLL_* variable set here: the value papcoll reads, or why it refuses
    it, or that papcoll reads no such setting (a misspelt name is otherwise silently ignored)."""
    checks = {"PAPCOLL_ALGORITHM": context.forced_algorithm, "PAPCOLL_TRANSPORT": transport.choose}
    lines = []
    for name, raw, value in config.set_here():
        try:
            value = checks[name]() if name in checks else value
        except (ConfigError, TransportError) as err:
            value = err
        lines.append(f"  {name}={raw!r}: " + (
            f"refused: {str(value).removeprefix(f'{name}={raw!r}: ')}"
            if isinstance(value, Exception) else
            "papcoll reads no such setting" if value is None and name not in config.READERS else
            f"read as {value!r}"))
    return lines or ["  none set: every default"]


def info():
    lines = [f"papcoll {papcoll.__version__}",
             f"MPI: {policy.library_version()} "
             f"(mpi4py {sys.modules['mpi4py'].__version__})",
             "", "algorithms (PAPCOLL_ALGORITHM or Alltoall(..., algorithm=NAME)):"]
    width = max(map(len, papcoll.algorithms))
    lines += [f"  {name:{width}}  {cls.description}" for name, cls in papcoll.algorithms.items()]
    tuning = policy.Tuning()
    if tuning.error:
        where = f"tuning file: unusable -- {tuning.error}; Communicators refuse to start"
    elif tuning.path:
        where = f"tuning file {tuning.path} ({len(tuning.rows)} rows), then {policy.SOURCE}"
    else:
        where = (f"{policy.SOURCE}; no tuning file (PAPCOLL_TUNING_FILE unset, none at "
                 f"{policy.DEFAULT_FILE})")
    lines += ["", f"selection policy ({where}; first matching row wins):"]
    lines += [f"  {row.topology:16}  block x N <= {_bytes(row.max_call):>7}"
              f"  block in [{_bytes(row.min_block or 0)}, {_bytes(row.max_block)}]"
              f"{_shape(row)}  -> {row.algorithm}" if row.call == "alltoall" else
              f"  {row.topology:16}  {row.call}{_shape(row)}  -> {row.algorithm}"
              for row in tuning.rows + policy.TABLE]
    lines += ["", "transports (PAPCOLL_TRANSPORT):"]
    lines += [f"  {line}" for line in transport.status()]
    try:
        measured = config.cma_throttle()
        throttle = (f"{measured} (measured: PAPCOLL_CMA_MODEL)" if measured else
                    f"{THROTTLE} (default; measure with papcoll.bench cma-model, "
                    f"PAPCOLL_CMA_MODEL)")
    except ConfigError:                   # the settings section says why
        throttle = "none: PAPCOLL_CMA_MODEL is refused (settings, below)"
    lines += ["", "inside a node:",
              "  shared memory: one POSIX shm segment per Communicator and node (shm_pap, cma_pap)",
              f"  {cma_status()}", f"  CMA throttle factor k: {throttle}"]
    lines += ["", "settings (PAPCOLL_*, docs/settings.md):", *settings()]
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["tune"]:              # the measuring lives with the benchmarks
        from papcoll.bench.__main__ import main as bench
        return bench(argv)
    if argv[:1] == ["model"]:
        from papcoll.model.cli import main as model
        return model(argv[1:])
    if argv[:1] == ["run"]:
        from papcoll.runner import main as run
        return run(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m papcoll", description=__doc__)
    parser.add_argument("command", choices=["info", "tune", "run", "model"])
    parser.parse_args(argv)
    print(info())
    return 0


if __name__ == "__main__":
    sys.exit(main())
