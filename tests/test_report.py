"""The report (bench/report.py, report_driver.py, report_render.py): rendering from hand-made
results in the format arrival and ft write, the settings, the time limit on launched runs, and one
--quick end-to-end run."""
import importlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from launcher import launch as mpi_launch
from papcoll.bench import arrival, arrival_measure, report, report_driver, report_render

bench_main = importlib.import_module("papcoll.bench.__main__")

NAMES = ["mpi", "direct", "pap_direct"]
SECTIONS = ["# papcoll alltoall report", "## Algorithms", "## Time in call vs message size",
            "## Late processes", "## Scalability over N", "## NAS FT"]


def fake_arrival(nprocs, sizes=(8, 1024), mifs=(1, 32), late=None, iterations=2):
    """A result as arrival.run writes it: rows from arrival.block_rows, times growing with the
    size and with the algorithm's position in NAMES."""
    rows = []
    for size in sizes:
        for mif in mifs:
            delays = np.zeros((iterations, nprocs))
            arrivals = [np.zeros((len(NAMES), iterations))] * nprocs
            per_algorithm = 1e-6 * size ** 0.5 * np.arange(1, len(NAMES) + 1)
            in_calls = [np.repeat(per_algorithm[:, None], iterations, axis=1)] * nprocs
            rows += arrival.block_rows(size, mif, NAMES, 1e-6, mif * 1e-6, delays, arrivals,
                                       in_calls)
    return {
        "benchmark": "papcoll random-arrival", "command": "python -m papcoll.bench arrival",
        "options": {}, "date": "2026-11-21T06:00:00", "host": "test", "nprocs": nprocs,
        "nodes": 1, "ppn": nprocs, "nodes_emulated": False, "mpi_library": "Fake MPI 1.0",
        "mpi4py": "4.1.2", "papcoll": "0.1.0", "mode": "late" if late else "random",
        "late_fraction": late, "late_processes": late and arrival_measure.late_count(nprocs, late),
        "delay_wait": "sleep", "seed": 1, "iterations": iterations, "warmup": 1,
        "sizes": list(sizes), "mifs": list(mifs),
        "algorithms": {name: f"{name} described" for name in NAMES},
        "skipped": {"cma_pap": "needs a kernel with CMA"},
        "t_msg": {"method": arrival_measure.T_MSG_METHOD.format(peer=1),
                  "per_size": [{"size": s, "t_msg_us": 1.0, "median_us": 1.5} for s in sizes]},
        "clock": {"method": arrival_measure.CLOCK_METHOD,
                  "per_rank": [{"offset_us": 0.0, "round_trip_us": 2.0}] * nprocs},
        "results": rows,
    }


def fake_ft(cls, nprocs, algorithm, seconds, alltoall):
    """A result as ft.run_ft returns it (and ft --json writes it)."""
    ref = report.ft.CLASSES[cls]
    nx, ny, nz, niter = ref["nx"], ref["ny"], ref["nz"], ref["niter"]
    return {
        "benchmark": "FT", "class": cls, "nx": nx, "ny": ny, "nz": nz, "niter": niter,
        "nprocs": nprocs, "algorithm": algorithm, "alltoall_calls": niter + 1,
        "block_bytes": nx * ny * nz * 16 // nprocs ** 2, "imbalance": 0.0, "imbalance_seed": 1,
        "imbalance_injected_max": 0.0, "time": seconds,
        "mops": report.ft.mops(nx * ny * nz, niter, seconds),
        "alltoall_time_mean": alltoall, "alltoall_time_max": alltoall,
        "alltoall_time_per_rank": [alltoall] * nprocs, "alltoall_fraction": alltoall / seconds,
        "checksums": ref["checksums"], "reference": ref["checksums"], "reference_source": "NPB",
        "rel_errors": [0.0] * niter, "epsilon": ref["epsilon"], "verified": True,
    }


def write(folder, name, result):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")


@pytest.fixture
def results(tmp_path):
    """A report folder holding hand-made results of every kind, as a sweep leaves them."""
    runs = tmp_path / "runs"
    for n in (2, 4):
        write(runs, f"random-n{n}", fake_arrival(n))
    for late in (0.25, 0.75):
        write(runs, f"late{round(late * 100)}-n4", fake_arrival(4, mifs=(128,), late=late))
    for name, seconds, alltoall in (("mpi", 10.0, 4.0), ("direct", 12.0, 6.0),
                                    ("pap_direct", 8.0, 2.0)):
        write(runs, f"ft-S-n2-{name}-r1", fake_ft("S", 2, name, seconds, alltoall))
        write(runs, f"ft-S-n2-{name}-r2", fake_ft("S", 2, name, 1.5 * seconds, alltoall))
    return tmp_path


def test_fake_results_are_in_the_writers_format():
    assert "MIF" in arrival.format_table(fake_arrival(2, late=0.25))
    assert "VERIFICATION SUCCESSFUL" in report.ft.report(fake_ft("S", 2, "mpi", 1.0, 0.5))


def test_render_writes_every_section_and_figure(results):
    text = report_render.render(results).read_text()
    for section in SECTIONS:
        assert section in text
    assert "Fake MPI 1.0" in text and "shared with other jobs" in text
    assert "cma_pap (N=2): needs a kernel with CMA" in text
    figures = ["time-vs-size-n2.png", "time-vs-size-n4.png", "late-n4.png", "scaling.png"]
    for png in figures:
        assert f"]({png})" in text
        assert (results / png).read_bytes()[:4] == b"\x89PNG"


def test_ratio_table_shows_time_and_ratio_to_mpi(results):
    text = report_render.render(results).read_text()
    # fake_arrival: direct takes twice and pap_direct three times mpi's time
    assert "| 1K | 32 | 0 | 32 (1.00) | 64 (2.00) | 96 (3.00) |" in text


def test_ft_table_speedups(results):
    text = report_render.render(results).read_text()
    # fastest repeats: total 10 / 12 / 8 s, alltoall 4 / 6 / 2 s: speedup = baseline / own
    assert "| 2 | `pap_direct` | yes | 1M | 2 (50%) | 8 | 2 | 25% | 1.25 | 1.50 | 2.00 | 3.00 |" in text
    assert "| 2 | `mpi` | yes | 1M | 2 (50%) | 10 | 4 | 40% | 1.00 | 1.20 | 1.00 | 1.50 |" in text
    rows = [line for line in text.splitlines() if line.startswith("| 2 | `")]
    assert [row.split("`")[1] for row in rows] == ["mpi", "direct", "pap_direct"]


def test_missing_baseline_and_single_n(tmp_path):
    write(tmp_path, "a", fake_arrival(2))
    write(tmp_path, "ft", fake_ft("W", 4, "pap_direct", 3.0, 1.0))
    (tmp_path / "broken.json").write_text('{"benchmark": "FT", ')
    text = report_render.render(tmp_path).read_text()
    assert "## Scalability over N" not in text and not (tmp_path / "scaling.png").exists()
    assert "| 4 | `pap_direct` | yes | 512K | 1 (0%) | 3 | 1 | 33% | – | – | – | – |" in text
    assert "`broken.json`" in text and "no manifest.json" in text


def test_settings_quick_defaults_and_explicit_values():
    _, args = bench_main.parse(["report", "--quick", "--np", "4,1"])
    config = report.settings(args)
    assert config["np"] == [1, 4] and config["sizes"] == report.QUICK["sizes"]
    assert config["iterations"] == report.QUICK["iterations"] and config["algorithms"] is None
    _, args = bench_main.parse(["report", "--ft-classes", "B,A", "--parts", "ft"])
    config = report.settings(args)
    assert config["ft_classes"] == ["A", "B"] and config["parts"] == ["ft"]
    assert config["np"] == report.DEFAULTS["np"]
    with pytest.raises(SystemExit):
        bench_main.parse(["report", "--ft-classes", "Z"])


def test_launch_kills_the_whole_process_group_on_timeout(tmp_path):
    pidfile = tmp_path / "pid"
    start = time.monotonic()
    status, _ = report_driver.launch(["sh", "-c", f"sleep 60 & echo $! > {pidfile}; wait"],
                                     tmp_path / "log", timeout=1)
    assert status is None and time.monotonic() - start < 10
    assert ended(Path(f"/proc/{pidfile.read_text().strip()}/stat"), within=5)


def ended(stat, within):
    """Whether the process of /proc/PID/stat is gone or a zombie within ``within`` seconds (a
    killed process takes a moment to die)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if stat.read_text().split()[2] == "Z":
                return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.mpi
def test_a_terminated_driver_takes_its_run_down(tmp_path):
    out = tmp_path / "report"
    driver = subprocess.Popen([sys.executable, "-m", "papcoll.bench", "report", "--quick",
                               "--parts", "ft", "--out", str(out)], stdout=subprocess.DEVNULL)
    try:
        assert started(out / "runs" / "ft-S-n2-mpi-r1.log", within=20)
        driver.terminate()
        assert driver.wait(timeout=20) == 128 + signal.SIGTERM
    finally:
        driver.kill()
    assert not running(str(out), within=10)


def started(path, within):
    deadline = time.monotonic() + within
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return path.exists()


def running(text, within):
    """Whether a process whose command line holds ``text`` is still alive after ``within`` s."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        ps = subprocess.run(["ps", "-eo", "stat=,args="], check=True, capture_output=True, text=True).stdout
        if not any(text in line and not line.startswith("Z") for line in ps.splitlines()):
            return False
        time.sleep(0.1)
    return True


def test_collect_cli_rerenders_without_running(results):
    status, _ = report_driver.launch([sys.executable, "-m", "papcoll.bench", "report", "--collect",
                                      str(results)], results / "log", timeout=60)
    assert status == 0
    text = (results / "report.md").read_text()
    assert "Rendered" in text and "--collect" in text
    assert not (results / "manifest.json").exists()


def test_refuses_a_folder_with_results(results):
    status, _ = report_driver.launch([sys.executable, "-m", "papcoll.bench", "report", "--quick",
                                      "--out", str(results)], results / "log", timeout=60)
    assert status == 2 and "already holds results" in (results / "log").read_text()
    assert not (results / "manifest.json").exists()


@pytest.mark.mpi
def test_refuses_to_run_under_mpiexec(tmp_path):
    proc = mpi_launch(2, ["-m", "papcoll.bench", "report", "--collect", tmp_path], timeout=60)
    assert proc.returncode == 2 and "not under mpiexec" in proc.stdout


@pytest.mark.mpi
def test_quick_end_to_end(tmp_path):
    out = tmp_path / "report"
    argv = [sys.executable, "-m", "papcoll.bench", "report", "--quick", "--np", "2",
            "--algorithms", ",".join(NAMES), "--timeout", "60", "--out", str(out)]
    status, _ = report_driver.launch(argv, tmp_path / "log", timeout=150)
    log = (tmp_path / "log").read_text()
    assert status == 0, log
    text = (out / "report.md").read_text()
    for section in ["## Algorithms", "## Time in call vs message size", "## Late processes",
                    "## NAS FT", "## Runs"]:
        assert section in text, text
    assert "**" not in text.split("## Runs")[1], text          # no failed run
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["finished"] and len(manifest["runs"]) == 3 + len(NAMES)
    assert manifest["machine"]["nproc"] == os.cpu_count()
    for png in ["time-vs-size-n2.png", "late-n2.png"]:
        assert (out / png).read_bytes()[:4] == b"\x89PNG"
    ft_rows = [line for line in text.splitlines() if line.startswith("| 2 | `")]
    assert len(ft_rows) == len(NAMES) and all("| yes |" in row for row in ft_rows)
