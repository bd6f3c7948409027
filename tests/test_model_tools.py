"""The model's parameter file and command line (papcoll/model): the file round trip, `model
predict`'s JSON, `model calibrate` under mpiexec, `model validate` (recorded and drawn
arrivals, a second run in the model's place), `model scale` and `model paper`. Its engine:
test_model.py."""
import json
import subprocess
import sys

import numpy as np
import pytest

from papcoll.model import params, predict, protocols

from launcher import launch
from model_values import M, VALUES


def test_the_parameter_file_round_trips_and_names_what_is_wrong(tmp_path):
    path = tmp_path / "m.json"
    params.save(params.make(about="here", sources={"poll": "a loop"}, **VALUES), path)
    back = params.load(path)
    assert back.values == VALUES and back.sources["poll"] == "a loop"
    doc = json.loads(path.read_text())
    del doc["params"]["net_G"]
    doc["params"]["poll"]["value"] = -1
    path.write_text(json.dumps(doc))
    with pytest.raises(params.ParamsError, match="missing: net_G"):
        params.load(path)
    doc["params"]["net_G"] = {"value": 0.01}
    path.write_text(json.dumps(doc))
    with pytest.raises(params.ParamsError, match="poll: -1"):
        params.load(path)


def test_predict_prints_the_interfaces_json(tmp_path):
    path = tmp_path / "m.json"
    params.save(M, path)
    out = subprocess.run([sys.executable, "-m", "papcoll", "model", "predict", "--params",
                          str(path), "--nodes", "2", "--ppn", "2", "--sizes", "8,8K",
                          "--mif", "32", "--calls", "3", "--json"],
                         capture_output=True, text=True, check=True).stdout
    rows = json.loads(out)
    assert {(r["size"], r["mif"]) for r in rows} == {(8, 32), (8192, 32)}
    assert {r["algorithm"] for r in rows} == set(predict.runnable(protocols.shape(2, 2)))
    assert all(set(r) == {"size", "mif", "algorithm", "us"} and r["us"] > 0 for r in rows)


def test_calibrate_measures_every_parameter_and_says_how(tmp_path):
    """Under mpiexec, 2 emulated nodes of 2: a file with every parameter, each with the
    measurement that gave it, that predict takes."""
    path = tmp_path / "here.json"
    out = launch(4, ["-m", "papcoll", "model", "calibrate", "--out", path, "--repeat", "2"],
                 env={"PAPCOLL_NODE_SIZE": "2"}, timeout=120)
    assert out.returncode == 0, out.stdout
    machine = params.load(path)
    assert set(machine.values) == set(params.NAMES)
    assert all(machine.sources.get(k, "").startswith("the lower median of 2 calibrations, each: ")
               for k in params.NAMES), machine.sources
    assert "lower median of 2 calibrations in one launch" in machine.about
    assert machine.cma_gamma[0] == pytest.approx(1.0) and machine.net_G > 0
    assert machine.tail >= 1.0 and "whole job" in machine.sources["tail"]
    assert "2 x 2 (emulated)" in machine.about
    # MPI RMA: every write's notice goes once its data is complete, so no call waits after
    assert machine.net_copied >= 1 << 62 and machine.net_ack == 0.0
    assert "unused" in machine.sources["net_ack"]
    # every node on this one machine: a write inside a node takes the same path as between
    assert machine.net_local_L == machine.net_L and "one path" in machine.sources["net_local_L"]
    assert machine.mpi_inter_shared == 1 and machine.link("mpi_inter").shared
    if "MPICH" in machine.about:     # its RMA into memory it did not allocate: active messages
        assert (machine.net_answered, machine.net_given_answered,
                machine.net_exposed_answered) == (0, 1, 1)
    rows = predict.predict(machine, protocols.shape(2, 2), [8, 65536], [1, 32], calls=3)
    assert len(rows) == 2 * 2 * len(predict.runnable(protocols.shape(2, 2)))
    one = launch(2, ["-m", "papcoll", "model", "calibrate", "--out", tmp_path / "no.json"],
                 timeout=60)
    assert one.returncode != 0 and "needs at least 2 nodes" in one.stdout
    assert not (tmp_path / "no.json").exists()


def test_calibrations_combine_as_each_parameters_lower_median():
    """Each parameter, and each entry of a table, takes the lower median of the calibrations:
    a value one of them measured. An algorithm missing from one's extra table counts as 0."""
    def run(k, poll, extra, copy_g):
        return ({"poll": poll, "mpi_inter_eager": k, "extra": extra, "cma_gamma": [1.0, poll],
                 "copy_G": [[1 << 20, copy_g], [4 << 20, 2 * copy_g]]}, {"poll": "a loop"}, "here")
    runs = [run(4096, 3e-6, {"mpi": 2e-6, "direct": 1e-6}, 5e-11),
            run(0, 1e-6, {"mpi": 4e-6}, 9e-11),
            run(8192, 2e-6, {"mpi": 1e-6, "direct": 3e-6}, 1e-11),
            run(4096, 9e-6, {"mpi": 3e-6, "direct": 2e-6}, 7e-11)]
    values, sources, about = params.median(runs)
    assert values == {"poll": 2e-6, "mpi_inter_eager": 4096, "extra": {"direct": 1e-6, "mpi": 2e-6},
                      "cma_gamma": [1.0, 2e-6], "copy_G": [[1 << 20, 5e-11], [4 << 20, 1e-10]]}
    assert sources == {"poll": "the lower median of 4 calibrations, each: a loop"}
    assert about == "here; the lower median of 4 calibrations in one launch"
    assert params.median(runs[:1]) == runs[0]


def test_calibrate_refuses_a_repeat_below_one(capsys):
    from papcoll.model import calibrate
    with pytest.raises(SystemExit):
        calibrate.main(["--out", "never.json", "--repeat", "0"])
    assert "--repeat 0: at least 1" in capsys.readouterr().err


def test_commands_refuse_an_output_they_cannot_write_before_any_work(tmp_path, capsys):
    """calibrate, validate's plot and scale's JSON: a folder, or a file in a missing folder, is
    an error at once naming it, not a traceback after the measurement."""
    from papcoll.model import calibrate, cli, validate
    missing = tmp_path / "no-such-folder" / "out.json"
    runs = [lambda out: calibrate.main(["--out", out]),
            lambda out: validate.main(["--params", "p.json", "--plot", out, "r.json"]),
            lambda out: cli.main(["scale", "--params", "p.json", "--error", "0.3", "--json", out])]
    for run in runs:
        for out, why in ((tmp_path, "a folder, not a file"),
                         (missing, f"its folder {missing.parent} does not exist")):
            with pytest.raises(SystemExit) as raised:
                run(str(out))
            assert raised.value.code == 2
            assert f"cannot write {out}: {why}" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_commands_refuse_bad_options_by_name_without_a_traceback(tmp_path, capsys):
    """A negative size or MIF, a late fraction outside 0-1, a parameter file that is not one:
    exit 2 with the option and the value, not numpy's error from deep inside."""
    from papcoll.model import cli, validate
    good = tmp_path / "m.json"
    params.save(params.make(about="here", sources={}, **VALUES), good)
    other = tmp_path / "other.json"
    other.write_text('{"benchmark": "papcoll alternate"}')
    predicting = ["predict", "--params", str(good), "--nodes", "2", "--ppn", "2"]
    for run, said in (
            (lambda: cli.main(predicting + ["--sizes=8,-8"]), "--sizes: not a list of sizes of 0"),
            (lambda: cli.main(predicting + ["--mif=1,-1"]), "--mif: not a list of integers of 0"),
            (lambda: cli.main(predicting + ["--late-fraction", "2"]),
             "--late-fraction: not a fraction from 0 to 1: '2'"),
            (lambda: cli.main(["scale", "--params", str(good), "--error", "0.3", "--mif=-1"]),
             "--mif: not a list of integers of 0"),
            (lambda: validate.main(["--params", str(other), "r.json"]),
             f"{other}: not a papcoll model file")):
        with pytest.raises(SystemExit) as raised:
            run()
        assert raised.value.code == 2
        assert said in capsys.readouterr().err


def test_measuring_processes_run_a_cpu_each_in_turn_and_get_their_cpus_back():
    """Calibration's processes on one machine (an unbound launch: the same CPUs) measure on
    one CPU each, in turn over the machine's: two processes on two CPUs, not the same one;
    after, each has all its CPUs again. On one CPU, nothing is pinned."""
    code = ("import json, os\nfrom mpi4py import MPI\n"
            "from papcoll.model.calibrate import spread\n"
            "c = MPI.COMM_WORLD\nbefore = sorted(os.sched_getaffinity(0))\n"
            "cpus = sorted(set().union(*c.allgather(before)))\n"
            "with spread(c, cpus):\n    during = c.allgather(sorted(os.sched_getaffinity(0)))\n"
            "after = c.allgather(sorted(os.sched_getaffinity(0)) == before)\n"
            "if c.rank == 0: print(json.dumps([cpus, during, after]))\n")
    out = launch(2, ["-c", code], timeout=60)
    assert out.returncode == 0, out.stdout
    cpus, during, after = json.loads(out.stdout.strip().splitlines()[-1])
    assert after == [True, True]
    if len(cpus) > 1:
        assert during == [[cpus[0]], [cpus[1]]], during
    else:
        assert during == [cpus, cpus]


def test_cores_follow_the_busiest_cpu_where_the_launch_binds_the_processes():
    """Bound three to two CPUs (-bind-to core puts ranks 0 and 2 on one): each runs as if two
    shared a CPU, not 1.5. Even or unbound placements keep the CPUs over the nodes. The
    placement is each rank's CPU where all are bound, and rank 0's machine holds ranks 0...n-1."""
    from papcoll.model.calibrate import cores, placement
    assert cores([{0}, {1}, {0}], 3)[0] == 0.5 and "busiest" in cores([{0}, {1}, {0}], 3)[1]
    assert cores([{0}, {1}, {0}, {1}, {0}], 5)[0] == pytest.approx(1 / 3)
    assert cores([{0}, {1}, {0}, {1}], 2)[0] == cores([{0, 1}] * 4, 2)[0] == 1.0
    assert cores([{0}, {1}], 1)[0] == cores([{0, 1}] * 3, 3)[0] * 3 == 2.0
    assert placement([{0}, {1}, {0}], [0, 1, 2])[0] == [0, 1, 0]
    assert placement([{0, 1}] * 2, [0, 1])[0] == placement([{0}, {1}], [0, 2])[0] == []


def test_validate_compares_each_measured_cell_with_its_own_prediction(tmp_path, capsys):
    """A benchmark result whose times are the model's own predictions for the same cells
    (auto: the algorithm it chose) validates at 100 % and names every best; one whose times
    are doubled is 0 % within 25 %. So the cells are matched by shape, size, MIF and seed."""
    from papcoll.model import validate
    nodes = protocols.shape(2, 2)
    rows = predict.predict(M, nodes, [8, 65536], [1, 32], calls=4, seed=5)
    auto = [dict(r, algorithm="auto", chosen="pap_direct") for r in rows
            if r["algorithm"] == "pap_direct"]
    result = {"nprocs": 4, "nodes": 2, "ppn": 2, "mpi_library": "MPICH Version: 5.0.2",
              "seed": 5, "late_fraction": None,
              "results": [dict(r, avg_us=r["us"]) for r in rows + auto]}
    params.save(M, tmp_path / "m.json")
    (tmp_path / "r.json").write_text(json.dumps(result))
    assert validate.main(["--params", str(tmp_path / "m.json"), "--calls", "4",
                          str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert f"{len(rows) + len(auto)} cells: 100% within 25%" in out
    assert "best algorithm named in 4 of 4 blocks" in out
    assert "median error of a time over MPI's in the same block: 0%" in out
    for r in result["results"]:
        r["avg_us"] *= 2
    (tmp_path / "r.json").write_text(json.dumps(result))
    validate.main(["--params", str(tmp_path / "m.json"), "--calls", "4", str(tmp_path / "r.json")])
    out = capsys.readouterr().out
    assert "cells: 0% within 25%" in out        # every time off by 2, every comparison right
    assert "median error of a time over MPI's in the same block: 0%" in out
    for r in result["results"]:
        r["avg_us"] *= 1 if r["algorithm"] == "mpi" else 2
    (tmp_path / "r.json").write_text(json.dumps(result))
    validate.main(["--params", str(tmp_path / "m.json"), "--calls", "4", str(tmp_path / "r.json")])
    assert "same block: 50%" in capsys.readouterr().out   # predicted x over MPI, measured 2x
    result["results"] = [dict(r, avg_us=r["us"]) for r in rows + auto]
    (tmp_path / "r.json").write_text(json.dumps(result))
    cells = f"{len(rows) + len(auto)} cells: 100% within"
    validate.main(["--params", str(tmp_path / "m.json"), "--calls", "4", "--cores",
                   str(M.cores), str(tmp_path / "r.json")])        # the file's own cores
    assert cells in capsys.readouterr().out
    validate.main(["--params", str(tmp_path / "m.json"), "--calls", "4", "--cores", "0.5",
                   str(tmp_path / "r.json")])           # the same cells, two processes a core
    assert cells not in capsys.readouterr().out


def test_validate_repeat_takes_a_second_run_for_the_model(tmp_path, capsys):
    """--repeat scores a second run of the benchmark as a prediction of the first, cell for
    cell by size, MIF and algorithm: itself at 100 %; a run whose MPI times at 256 B are 1.5 x
    (so pap_shm_direct is ahead there) at 10 of 12 cells and 2 of 4 bests, and --plot draws
    it; a run of another shape is refused, naming both, and so is a count of runs that does
    not match."""
    from papcoll.model import validate
    times = {"mpi": 20.0, "pap_direct": 30.0, "pap_shm_direct": 25.0}
    result = {"nprocs": 4, "nodes": 2, "ppn": 2, "mpi_library": "MPICH Version: 5.0.2",
              "seed": 1, "results": [{"size": s, "mif": f, "algorithm": a, "avg_us": t * s}
                                     for s in (8, 256) for f in (1, 32)
                                     for a, t in times.items()]}
    again = json.loads(json.dumps(result))
    for r in again["results"]:
        if r["size"] == 256 and r["algorithm"] == "mpi":
            r["avg_us"] *= 1.5               # 30 and 25 x 256 win there now: pap_shm_direct
    for name, doc in (("a.json", result), ("b.json", again)):
        (tmp_path / name).write_text(json.dumps(doc))
    a, b = str(tmp_path / "a.json"), str(tmp_path / "b.json")
    assert validate.main([a, "--repeat", a]) == 0
    assert "12 cells: 100% within 25%" in capsys.readouterr().out
    validate.main([a, "--repeat", b])
    out = capsys.readouterr().out
    assert "12 cells: 83% within 25%" in out and "named in 2 of 4 blocks" in out
    assert ["256", "1", "mpi", "5120.0", "7680.0", "+50%"] in [r.split() for r in out.splitlines()]
    png = tmp_path / "v.png"                 # --plot: predicted against measured, a PNG
    assert validate.main([a, "--repeat", b, "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    again["mpi_library"] = "MPICH Version:      5.0.2\0"   # as an older run recorded it
    (tmp_path / "b.json").write_text(json.dumps(again))
    assert validate.main([a, "--repeat", b]) == 0 and "\0" not in capsys.readouterr().out
    again["ppn"], again["nodes"] = 4, 1
    (tmp_path / "b.json").write_text(json.dumps(again))
    with pytest.raises(SystemExit):
        validate.main([a, "--repeat", b])
    assert "not a run of the same shape" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        validate.main([a, a, "--repeat", a])
    assert "1 second runs for 2 results" in capsys.readouterr().err


def test_validate_counts_two_rows_of_one_protocol_as_one_algorithm(tmp_path, capsys):
    """pap_direct runs its copy-based scheme at these sizes (the benchmark's ``runs_as``): a
    run where it is a hair ahead of pap_direct_copy names pap_direct_copy's best right in the
    other run, where the two swap, and the cells print which scheme ran; a run that did not
    record it, or records another scheme, counts them apart."""
    from papcoll.model import validate
    times = {"mpi": 20.0, "pap_direct": 10.0, "pap_direct_copy": 10.1, "pap_shm_direct": 25.0}

    def result(swap, runs_as="pap_direct_copy"):
        rows = [{"size": s, "mif": 1, "algorithm": a, "avg_us": t * s}
                for s in (8, 256) for a, t in times.items()]
        for r in rows:
            if swap and r["algorithm"].startswith("pap_direct"):
                r["avg_us"] = 20.1 * r["size"] - r["avg_us"]
            if r["algorithm"] == "pap_direct" and runs_as:
                r["runs_as"] = runs_as
        return {"nprocs": 4, "nodes": 2, "ppn": 2, "mpi_library": "MPICH", "seed": 1,
                "results": rows}
    paths = []
    for name, doc in (("a", result(False)), ("b", result(True)), ("c", result(True, None)),
                      ("d", result(True, "pap_direct_zcopy"))):
        (tmp_path / f"{name}.json").write_text(json.dumps(doc))
        paths.append(str(tmp_path / f"{name}.json"))
    a, b, c, d = paths
    validate.main([a, "--repeat", b])
    out = capsys.readouterr().out
    assert "named in 2 of 2 blocks" in out and "pap_direct=copy" in out
    validate.main([c, "--repeat", a])
    assert "named in 0 of 2 blocks" in capsys.readouterr().out
    validate.main([d, "--repeat", a])
    assert "named in 0 of 2 blocks" in capsys.readouterr().out


def test_scale_names_each_cells_best_and_how_far_ahead_of_the_other_side():
    from papcoll.model import scale
    rows = [{"size": 8, "mif": 1, "algorithm": a, "us": t}
            for a, t in (("mpi", 20.0), ("pap_direct", 12.0), ("pap_shm_direct", 10.0))]
    cell, = scale.cells(rows, 0.1)
    assert (cell["best"], cell["rival"], cell["mpi_us"]) == ("pap_shm_direct", "mpi", 20)
    assert cell["ahead"] == pytest.approx(2) and cell["hierarchical"] == pytest.approx(0.5)
    assert cell["firm"] and not scale.cells(rows, 1.5)[0]["firm"]   # 2 x ahead, 150 % error
    mpi_wins = [dict(r, us=r["us"] * (0.5 if r["algorithm"] == "mpi" else 1)) for r in rows]
    cell, = scale.cells(mpi_wins, 0.1)                 # mpi 10 against papcoll's best 10
    assert (cell["best"], cell["rival"], cell["ahead"], cell["firm"]) == ("mpi", "pap_shm_direct",
                                                                          1.0, False)
    skewed = [{"size": 8, "mif": 128, "algorithm": a, "us": t}
              for a, t in (("mpi", 100.0), ("pap_direct", 40.0), ("pap_shm_direct", 60.0))]
    both = scale.cells(rows + skewed, 0.1)
    # pap_shm_direct is best balanced, pap_direct skewed; pap_shm_direct costs 1.5 x skewed,
    # pap_direct 1.2 x balanced: the steadiest is pap_direct, 20 % off
    assert scale.steadiest(both) == ("pap_direct", pytest.approx(1.2))


def test_scale_predicts_every_shape_aggregated_above_128_processes(tmp_path):
    from papcoll.model import aggregate, scale
    params.save(M, tmp_path / "m.json")
    res = subprocess.run([sys.executable, "-m", "papcoll", "model", "scale", "--params",
                          str(tmp_path / "m.json"), "--shapes", "2x2,40x4", "--sizes", "8,8K",
                          "--mif", "1,32", "--calls", "2", "--error", "0.2", "--json",
                          str(tmp_path / "s.json")], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "# 40 x 4 (160 processes)" in res.stdout and "(papcoll or MPI) by more than 20%" \
        in res.stdout
    cells = json.loads((tmp_path / "s.json").read_text())["cells"]
    assert [(c["nodes"], c["ppn"], c["size"], c["mif"]) for c in cells] == [
        (n, q, s, m) for n, q in ((2, 2), (40, 4)) for s in (8, 8192) for m in (1, 32)]
    for c in cells:
        assert c["best"] == min(c["times"], key=c["times"].get) and "mpi" in c["times"]
    # the big shape is the aggregated simulation's, as predict gives it by default
    big = scale.shape_rows(M, 40, 4, [8], [1], calls=2)
    assert aggregate.default(40, 4) and aggregate.default(2, 2) is None
    assert {r["algorithm"]: r["us"] for r in big} == pytest.approx(cells[4]["times"])


def test_validate_predicts_for_the_arrivals_the_benchmark_recorded(tmp_path, capsys):
    """Where a cell carries its calls' recorded arrivals, the prediction is for every one of
    them (a sleep's overshoot is part of what ran), not for fresh draws of the planned pattern
    nor for the first call alone."""
    from papcoll.model import validate
    nodes = protocols.shape(2, 2)
    recorded = [[0.0, 40e6, 5e6, 90e6], [0.0] * 4]     # us per call (M: seconds)
    rows = []
    for name in ("mpi", "pap_direct"):
        t = np.mean([predict.call_time(M, nodes, 64, name, np.asarray(a) * 1e-6)
                     for a in recorded])
        rows.append({"size": 64, "mif": 1, "algorithm": name, "avg_us": t * 1e6,
                     "per_rank": {"arrival_us": recorded}})
    result = {"nprocs": 4, "nodes": 2, "ppn": 2, "mpi_library": "MPICH", "seed": 1,
              "late_fraction": None, "results": rows}
    params.save(M, tmp_path / "m.json")
    (tmp_path / "r.json").write_text(json.dumps(result))
    validate.main(["--params", str(tmp_path / "m.json"), str(tmp_path / "r.json")])
    assert "2 cells: 100% within 25%" in capsys.readouterr().out
    validate.main(["--params", str(tmp_path / "m.json"), "--drawn", str(tmp_path / "r.json")])
    assert "2 cells: 100% within 25%" not in capsys.readouterr().out
    validate.main(["--params", str(tmp_path / "m.json"), "--calls", "1", str(tmp_path / "r.json")])
    assert "2 cells: 100% within 25%" not in capsys.readouterr().out     # the first call alone
    with pytest.raises(SystemExit):
        validate.main(["--params", str(tmp_path / "m.json"), "--calls", "0",
                       str(tmp_path / "r.json")])
    assert "--calls: at least 1" in capsys.readouterr().err


def test_validate_draws_its_own_arrivals_where_the_benchmarks_clock_is_too_far_off(
        tmp_path, capsys):
    """Recorded arrivals are on rank 0's clock, each rank's offset known to half its round
    trip: where that is over a quarter of a cell's time (the two-host pair) the cell is
    predicted as with --drawn, and says so; a clock within it keeps the recorded ones."""
    from papcoll.model import validate
    nodes = protocols.shape(2, 2)
    recorded = [[0.0, 40e6, 5e6, 90e6], [0.0] * 4]
    t = np.mean([predict.call_time(M, nodes, 64, "mpi", np.asarray(a) * 1e-6) for a in recorded])
    row = {"size": 64, "mif": 1, "algorithm": "mpi", "avg_us": t * 1e6,
           "per_rank": {"arrival_us": recorded}}
    params.save(M, tmp_path / "m.json")

    def scored(round_trip, *options):
        result = {"nprocs": 4, "nodes": 2, "ppn": 2, "mpi_library": "MPICH", "seed": 1,
                  "late_fraction": None, "results": [row],
                  "clock": {"per_rank": [{"round_trip_us": 0.0}] * 3 +
                            [{"round_trip_us": round_trip}]}}
        (tmp_path / "r.json").write_text(json.dumps(result))
        validate.main(["--params", str(tmp_path / "m.json"), *options, str(tmp_path / "r.json")])
        return capsys.readouterr().out
    near = scored(0.5 * t * 1e6)                 # off by a quarter at most: recorded
    assert "1 cells: 100% within 25%" in near and "own arrivals" not in near
    far = scored(0.51 * t * 1e6)
    assert "the model's own arrivals in 1 of 1 cells" in far
    assert far.splitlines()[2].endswith("drawn")
    assert far.splitlines()[2] == scored(0.0, "--drawn").splitlines()[2]


def test_the_paper_comparison_runs_on_the_papers_machine():
    from papcoll.model import paper
    machine = params.load(paper.MACHINE)
    assert all(machine.sources[k].startswith(("public", "derived", "estimate", "not applicable"))
               for k in params.NAMES)           # every parameter says where it comes from
    out = subprocess.run([sys.executable, "-m", "papcoll", "model", "paper", "--calls", "1",
                          "--json"], capture_output=True, text=True, check=True)
    doc = json.loads(out.stdout)
    assert len(doc["cells"]) == len(paper.SIZES) * len(paper.MIFS)
    for cell in doc["cells"]:                   # no alltoall beats the wait for the last arrival
        floor = cell["us"].pop("floor")
        assert all(us > floor for us in cell["us"].values())
    assert [c["claim"] for c in doc["claims"]][:4] == [
        f"{name} over MVAPICH, {size} B, MIF {mif}" for mif, name, size, _ in paper.RATIOS]
