"""The report's driver: launches the benchmark runs one after the other under a time limit, and
records what ran, where and how it ended in DIR/manifest.json."""
import datetime
import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import papcoll
from papcoll.algorithms import policy

from . import leftovers
from .options import format_sizes

ROOT = Path(__file__).resolve().parents[1]
MPIEXEC = ROOT / "scripts" / "mpiexec"          # adds Open MPI's flags when needed
LATE_FRACTIONS = (0.25, 0.75)


def turn_order(nalgorithms, iteration):
    """Algorithms in turn within one round of separate runs, a different one first each time
    (each run its own processes: none inherits another's state)."""
    return [(iteration + j) % nalgorithms for j in range(nalgorithms)]


def bench_command(nprocs, *options):
    """The argv of one papcoll.bench subcommand on ``nprocs`` MPI processes."""
    return [str(MPIEXEC), "-n", str(nprocs), sys.executable, "-m", "mpi4py", "-m", "papcoll.bench",
            *map(str, options)]


def launch(argv, log, timeout):
    """Run ``argv`` in its own process group, output to ``log``; kill the group after ``timeout``
    seconds. Returns (exit status or None if killed, seconds). (Hydra runs each rank in a session
    of its own, but takes the ranks down when mpiexec dies.)"""
    before = leftovers.snapshot()
    start = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            status = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            status = None
        finally:    # timed out, or the driver was interrupted: a new session misses Ctrl-C
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    if status != 0:
        leftovers.remove_new(before)
    return status, time.monotonic() - start


class Driver:
    """Launches the runs one after the other and keeps DIR/manifest.json up to date, so that a
    report can be collected even from an interrupted sweep."""

    def __init__(self, folder, config):
        self.folder, self.runs_dir, self.config = folder, folder / "runs", config
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        self.manifest = {
            "command": shlex.join(["python", "-m", "papcoll.bench", *sys.argv[1:]]),
            "started": now(), "finished": None, "machine": machine(),
            "mpi_library": policy.library_version(), "papcoll": papcoll.__version__,
            "settings": config, "runs": []}

    def run(self, label, stem, nprocs, *options):
        """One benchmark run, logged to runs/<stem>.log; prints a line of progress."""
        argv = bench_command(nprocs, *options)
        print(f"{label:<40}", end="", flush=True)
        status, seconds = launch(argv, self.runs_dir / f"{stem}.log", self.config["timeout"])
        outcome = "ok" if status == 0 else "killed (timeout)" if status is None else f"exit {status}"
        print(f"{seconds:8.1f} s  {outcome}", flush=True)
        self.manifest["runs"].append({"label": label, "command": shlex.join(argv),
                                      "log": f"runs/{stem}.log", "seconds": round(seconds, 1),
                                      "status": status, "outcome": outcome})
        self.save()

    def save(self):
        (self.folder / "manifest.json").write_text(json.dumps(self.manifest, indent=1) + "\n")

    def arrival(self, stem, nprocs, mifs, late_fraction=None):
        c = self.config
        options = ["arrival", "--mif", ",".join(map(str, mifs)), "--sizes", format_sizes(c["sizes"]),
                   "--iterations", c["iterations"], "--warmup", c["warmup"],
                   "--out", self.runs_dir, "--name", stem]
        if c["algorithms"]:
            options += ["--algorithms", ",".join(c["algorithms"])]
        if late_fraction:
            options += ["--late-fraction", late_fraction]
        mode = f"{late_fraction:.0%} late, MIF {mifs[0]}" if late_fraction else "random arrival"
        self.run(f"arrival N={nprocs} {mode}", stem, nprocs, *options)

    def ft_algorithms(self, nprocs):
        """--algorithms, else those the random-arrival run at N found usable, else all."""
        if self.config["algorithms"]:
            return self.config["algorithms"]
        measured = self.runs_dir / f"random-n{nprocs}.json"
        if measured.exists():
            return list(json.loads(measured.read_text())["algorithms"])
        return ordered(papcoll.algorithms)

    def ft(self, cls, nprocs, names):
        """Every repeat of every algorithm, a different one first each round, so that the
        machine's slow spells spread over all of them."""
        for repeat in range(self.config["ft_repeats"]):
            for name in (names[j] for j in turn_order(len(names), repeat)):
                stem = f"ft-{cls}-n{nprocs}-{name}-r{repeat + 1}"
                self.run(f"ft class {cls} N={nprocs} {name} #{repeat + 1}", stem, nprocs, "ft",
                         "--class", cls, "--algorithm", name,
                         "--json", self.runs_dir / f"{stem}.json")

    def sweep(self):
        c = self.config
        if "random" in c["parts"]:
            for n in c["np"]:
                self.arrival(f"random-n{n}", n, c["mif"])
        if "late" in c["parts"]:    # at the largest N and MIF, as the paper's Fig. 4
            for fraction in LATE_FRACTIONS:
                n = max(c["np"])
                self.arrival(f"late{round(fraction * 100)}-n{n}", n, [max(c["mif"])], fraction)
        if "ft" in c["parts"]:
            for cls in c["ft_classes"]:
                for n in filter(ft_runs_on, c["np"]):
                    self.ft(cls, n, self.ft_algorithms(n))
        self.manifest["finished"] = now()
        self.save()


def ft_runs_on(nprocs):
    """FT's slab decomposition needs a power-of-two process count."""
    return nprocs & (nprocs - 1) == 0


def ordered(names):
    """The baselines mpi and direct first, the others in their given order."""
    return sorted(names, key=lambda name: (name != "mpi", name != "direct"))


def now():
    return datetime.datetime.now().isoformat(timespec="seconds")


def machine():
    """What the reader needs to judge the numbers: cores, CPU model, memory, load at the time."""
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines()
                  if line.startswith("model name")), platform.processor() or "unknown")
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1 << 30)
    return {"host": platform.node(), "nproc": os.cpu_count(), "model": model,
            "memory_gib": round(memory, 1), "load_average": [round(x, 2) for x in os.getloadavg()],
            "os": platform.platform()}
