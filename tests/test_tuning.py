"""The tuning file (python -m papcoll tune; papcoll/algorithms/policy.py): what it may say, how a
bad one is reported (the file, the line, the field), that every rank of a Communicator must
read the same one, that its rows serve only the shape they name, and the tuner's own steps."""
import json
import os
import subprocess
import sys

import pytest
from launcher import launch

from papcoll.algorithms import policy
from papcoll.bench import tune
from papcoll.errors import ConfigError

ROW = {"topology": "any", "processes": 2, "nodes": 1, "ppn": 2, "min_block": 0,
       "max_block": 64, "algorithm": "pap_direct", "measured": "a test"}


def table(*rows):
    """A tuning file's text, one row per line as tune writes them."""
    return json.dumps({"rows": list(rows)}, indent=1)


def test_a_well_formed_table_loads():
    rows = policy.load(table(ROW, {**ROW, "transport": "verbs", "nodes": 2}), "t.json")
    assert rows[0].algorithm == "pap_direct" and rows[1].transport == "verbs"


@pytest.mark.parametrize("row,field,why", [
    ({**ROW, "colour": "blue"}, "colour", "unknown"),
    ({**ROW, "ppn": -1}, "ppn", "count >= 0"),
    ({**ROW, "processes": "4"}, "processes", "count >= 0"),
    ({**ROW, "transport": "pigeon"}, "transport", "is not one of"),
    ({**ROW, "algorithm": "fastest"}, "algorithm", "unknown algorithm"),
    ({**ROW, "topology": "cloud"}, "topology", "is not one of"),
])
def test_a_malformed_row_names_the_file_the_line_and_the_field(row, field, why):
    text = table(ROW, row)
    line = next(i for i, l in enumerate(text.splitlines(), 1)
                if l.strip().startswith(json.dumps(field)) and i > 12)
    with pytest.raises(ConfigError) as err:
        policy.load(text, "tuned.json")
    message = str(err.value)
    assert "tuned.json" in message and f"line {line}:" in message, message
    assert f"row 1, field {field!r}" in message and why in message, message


def test_a_file_that_is_not_json_names_its_line():
    with pytest.raises(ConfigError, match=r"tuned.json: line 3: not JSON"):
        policy.load('{"rows": [\n {"topology": "any",\n  "algorithm" "mpi"}]}', "tuned.json")


def test_a_named_file_must_exist_and_none_is_the_shipped_table(monkeypatch, tmp_path):
    monkeypatch.setattr(policy, "DEFAULT_FILE", tmp_path / "absent.json")
    monkeypatch.delenv("PAPCOLL_TUNING_FILE", raising=False)
    assert policy.Tuning().said() == (None, None, None)
    monkeypatch.setenv("PAPCOLL_TUNING_FILE", str(tmp_path / "missing.json"))
    tuning = policy.Tuning()
    assert "PAPCOLL_TUNING_FILE=" in tuning.error and "missing.json" in tuning.error
    assert "No such file" in tuning.error and tuning.rows == ()


def test_the_default_location_is_read_when_nothing_is_named(monkeypatch, tmp_path):
    default = tmp_path / "papcoll" / "tuning.json"
    default.parent.mkdir()
    default.write_text(table(ROW))
    monkeypatch.setattr(policy, "DEFAULT_FILE", default)
    monkeypatch.delenv("PAPCOLL_TUNING_FILE", raising=False)
    tuning = policy.Tuning()
    assert tuning.path == str(default) and tuning.rows[0].algorithm == "pap_direct"
    assert tuning.digest and tuning.error is None


def test_ranks_that_read_different_files_are_named():
    assert policy.disagreement({0: ("a", "d1", None), 1: ("b", "d1", None)}) is None
    error = policy.disagreement({0: ("a.json", "d1" * 8, None), 1: (None, None, None),
                                 2: ("a.json", "d1" * 8, None)})
    assert "ranks 0, 2: a.json" in str(error) and "rank 1: none" in str(error)
    error = policy.disagreement({0: (None, None, None), 1: ("x", None, "it is broken")})
    assert str(error) == "rank 1: it is broken"


def test_tune_bounds_rows_between_the_sizes_measured():
    assert tune.bounds([8, 64, 1024]) == [(None, 22), (23, 256), (257, None)]
    rows = [{"size": s, "mif": m, "algorithm": a, "avg_us": t, "ratio_vs_mpi": t / mpi}
            for s, m, mpi, times in [(8, 1, 10, {"mpi": 10, "shm_pap": 9}), (8, 32, 20, {"mpi": 20, "shm_pap": 21}),
                                     (64, 1, 10, {"mpi": 10, "shm_pap": 12}), (64, 32, 20, {"mpi": 20, "shm_pap": 30}),
                                     (1024, 1, 10, {"mpi": 10, "shm_pap": 5}), (1024, 32, 20, {"mpi": 20, "shm_pap": 10})]
            for a, t in times.items()]
    chosen = tune.winners(rows, [8, 64, 1024], [1, 32])
    assert {s: c[0] for s, c in chosen.items()} == {8: "shm_pap", 64: "mpi", 1024: "shm_pap"}
    out = tune.table_rows(chosen, [8, 64, 1024], (4, 2, 2, "mpi-rma", "Open MPI", True), "here")
    assert [(r["algorithm"], r.get("min_block"), r.get("max_block")) for r in out] == [
        ("shm_pap", None, 22), ("mpi", 23, 256), ("shm_pap", 257, None)]
    assert out[0]["processes"] == 4 and out[0]["transport"] == "mpi-rma"
    assert out[0]["library"] == "Open MPI"           # serves under that MPI only
    assert out[0]["emulated"] is True                # and on emulated nodes only
    assert out[0]["measured"] == "here; 0.90-1.05 x MPI"
    assert policy.load(table(*out), "t")


def test_tune_bands_a_size_whose_balanced_and_skewed_winners_differ():
    """Two ranks, three calls a cell: at 8 B `direct` wins balanced calls (time in call 1-2)
    and `pap_direct` skewed ones (spread 90) by far; at 64 B one algorithm wins both."""
    def cell(size, mif, name, avg, times):
        return {"size": size, "mif": mif, "algorithm": name, "avg_us": avg, "ratio_vs_mpi": 1.0,
                "per_rank": {"in_call_us": times}}
    balanced, skewed = [[1, 2], [1, 2], [1, 3]], [[1, 91], [2, 92], [1, 91]]
    rows = [cell(8, 1, "direct", 2, balanced), cell(8, 1, "pap_direct", 3, balanced),
            cell(8, 128, "direct", 100, skewed), cell(8, 128, "pap_direct", 50, skewed),
            cell(64, 1, "direct", 2, balanced), cell(64, 1, "pap_direct", 3, balanced),
            cell(64, 128, "direct", 50, skewed), cell(64, 128, "pap_direct", 100, skewed)]
    bands = tune.banded(rows, [8, 64], [1, 128])
    assert list(bands) == [8]
    a, b, edge = bands[8]
    assert (a, b) == ("direct", "pap_direct") and edge == pytest.approx((1 * 90) ** 0.5 / 1)
    out = tune.banded_rows(bands, [8, 64], (2, 1, 2, None, "MPICH", None), "here")
    assert [(r["algorithm"], r.get("min_skew"), r.get("max_skew"), r["max_block"]) for r in out] \
        == [("direct", None, round(edge, 3), 22), ("pap_direct", round(edge, 3), None, 22)]
    rows = policy.load(table(*out), "t")
    assert rows[0].admits_skew(edge - 0.1) and not rows[0].admits_skew(None)


def test_tune_keeps_the_rows_of_other_shapes(tmp_path):
    path = tmp_path / "tuning.json"
    other = {**ROW, "processes": 8}
    path.write_text(table(ROW, other))
    tune.write(path, [{**ROW, "algorithm": "mpi"}])
    rows = policy.load(path.read_text(), path)
    assert [(r.processes, r.algorithm) for r in rows] == [(2, "mpi"), (8, "pap_direct")]


@pytest.mark.mpi
def test_ranks_with_other_files_or_a_bad_one_are_refused_and_rows_serve_their_shape(run_mpi,
                                                                                        tmp_path):
    res = run_mpi(2, "tuning.py", str(tmp_path), timeout=120)
    assert res.returncode == 0 and "TUNING OK" in res.stdout, res.stdout[-4000:]


@pytest.mark.mpi
def test_tune_writes_a_file_that_info_reports(run_mpi, tmp_path):
    out = tmp_path / "tuned.json"
    res = launch(2, ["-m", "papcoll", "tune", "--sizes", "8,1K", "--iterations", "5",
                     "--out", str(out)], timeout=300)
    assert res.returncode == 0 and f"rows to {out}" in res.stdout, res.stdout[-4000:]
    rows = policy.load(out.read_text(), out)
    assert rows and {(r.processes, r.nodes, r.ppn) for r in rows} == {(2, 1, 2)}
    assert all("python -m papcoll tune" in r.measured for r in rows)
    info = subprocess.run([sys.executable, "-m", "papcoll", "info"], capture_output=True,
                          text=True, env={**os.environ, "PAPCOLL_TUNING_FILE": str(out)})
    assert f"tuning file {out} ({len(rows)} rows)" in info.stdout, info.stdout
    assert "only N=2 nodes=1 ppn=2 library=" + policy.library() in info.stdout, info.stdout


PAPER = os.path.join(os.path.dirname(policy.__file__), "..", "model", "machines",
                     "qian-afsahi-2009.json")


def tune_model(out, *more):
    return subprocess.run([sys.executable, "-m", "papcoll", "tune", "--model", PAPER, "--nodes",
                           "4", "--ppn", "2", "--sizes", "8,64K", "--calls", "2", "--out",
                           str(out), *more], capture_output=True, text=True, timeout=300)


def test_tune_model_writes_the_models_winners_as_predicted_rows_and_measured_ones_win(tmp_path):
    from papcoll.model import params, scale
    out = tmp_path / "tuning.json"
    res = tune_model(out)
    assert res.returncode == 0 and "predicted rows" in res.stdout, res
    rows = policy.load(out.read_text(), out)
    assert rows and all(r.predicted and "predicted by the model" in r.measured for r in rows)
    assert {(r.processes, r.nodes, r.ppn, r.transport, r.library, r.emulated) for r in rows} \
        == {(8, 4, 2, "verbs", "MPICH", False)}
    # each size's row names the model's fastest algorithm at both MIFs (where they agree)
    cells = scale.shape_rows(params.load(PAPER), 4, 2, [8, 65536], [1, 32], calls=2)
    for size in (8, 65536):
        fastest = {min((c for c in cells if (c["size"], c["mif"]) == (size, mif)),
                       key=lambda c: c["us"])["algorithm"] for mif in (1, 32)}
        row = next(r for r in rows if r.admits(size, 8))
        assert len(fastest) > 1 or row.algorithm in fastest, (size, fastest, row)
    # a measured run of the shape replaces its predicted rows ...
    measured = {"topology": "any", "processes": 8, "nodes": 4, "ppn": 2, "transport": "verbs",
                "library": "MPICH", "emulated": False, "algorithm": "mpi", "measured": "here"}
    tune.write(out, [measured])
    assert [r.predicted for r in policy.load(out.read_text(), out)] == [False]
    # ... and the model does not overwrite them
    res = tune_model(out)
    assert res.returncode == 0 and "has measured rows" in res.stderr, res
    assert [(r.algorithm, r.predicted) for r in policy.load(out.read_text(), out)] == [
        ("mpi", False)]


def test_tune_model_needs_its_shapes():
    res = subprocess.run([sys.executable, "-m", "papcoll", "tune", "--model", PAPER],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "needs --nodes and --ppn" in res.stderr, res


# What may lie where tune is told to write: a user's notes, another program's JSON.
NOT_TUNING = {"notes.txt": "tuning ideas:\n- try pap_direct at 64K\n",
              "settings.json": '{"editor.fontSize": 12}\n',
              "sheet.json": '{"rows": [{"name": "a", "qty": 1}]}\n'}


@pytest.mark.parametrize("name", NOT_TUNING)
def test_tune_refuses_a_file_that_is_not_a_tuning_file_unless_told_to_replace_it(tmp_path, name):
    path = tmp_path / name
    path.write_text(NOT_TUNING[name])
    with pytest.raises(ConfigError) as err:
        tune.write(path, [ROW])
    assert str(path) in str(err.value) and "--replace" in str(err.value), err.value
    assert path.read_text() == NOT_TUNING[name] and os.listdir(tmp_path) == [name]
    tune.write(path, [ROW], replace=True)
    assert [r.algorithm for r in policy.load(path.read_text(), path)] == ["pap_direct"]


def test_tune_refuses_before_measuring(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text(NOT_TUNING["notes.txt"])
    res = subprocess.run([sys.executable, "-m", "papcoll", "tune", "--out", str(path)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and f"tune: {path} is not a tuning file" in res.stderr, res
    assert "--replace" in res.stderr and "tune: N=" not in res.stdout, res
    assert path.read_text() == NOT_TUNING["notes.txt"]
