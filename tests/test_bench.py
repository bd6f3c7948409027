"""The random-arrival benchmark: its pure parts, the subcommand dispatcher, small MPI runs."""
import argparse
import importlib
import json
from collections import Counter

import numpy as np
import pytest
from launcher import launch

import papcoll
from papcoll.bench import arrival, arrival_measure, fabric, options, report_driver
from papcoll.topology import Topology

bench_main = importlib.import_module("papcoll.bench.__main__")


@pytest.mark.parametrize("text,nbytes", [("8", 8), ("8B", 8), ("8K", 8192), ("8kib", 8192),
                                         ("8KB", 8192), ("1M", 1 << 20), (" 3 ", 3)])
def test_parse_size(text, nbytes):
    assert options.parse_size(text) == nbytes


@pytest.mark.parametrize("text", ["0", "", "x", "8Q", "-1", "1.5K", "8 KK"])
def test_parse_size_rejects(text):
    with pytest.raises(argparse.ArgumentTypeError, match="size"):
        options.parse_size(text)


def test_size_lists_are_sorted_without_duplicates():
    assert options.comma_list(options.parse_size)("1M,8,8K,8") == [8, 8192, 1 << 20]
    assert [options.format_size(n) for n in (8, 1000, 1024, 65536, 1 << 20)] == \
        ["8", "1000", "1K", "64K", "1M"]


def test_algorithm_list_keeps_order_and_rejects_unknown():
    names = list(papcoll.algorithms)
    assert options.comma_list(options.parse_algorithm, sort=False)(",".join(names[::-1])) == \
        names[::-1]
    with pytest.raises(argparse.ArgumentTypeError, match="no_such_algorithm"):
        options.parse_algorithm("no_such_algorithm")


def test_delays_are_deterministic_per_seed_and_bounded():
    def table(seed, size=8, mif=32):
        return arrival_measure.delay_table(arrival_measure.block_rng(seed, size, mif), 20, 4, 1e-3)
    assert np.array_equal(table(7), table(7))
    assert not np.array_equal(table(7), table(8))
    assert not np.array_equal(table(7), table(7, mif=1))
    assert table(7).shape == (20, 4) and 0 <= table(7).min() and table(7).max() <= 1e-3


@pytest.mark.parametrize("nprocs,fraction,late", [(4, 0.25, 1), (4, 0.75, 3), (16, 0.25, 4),
                                                  (2, 0.25, 1), (3, 1.0, 3), (5, 0.5, 3)])
def test_late_fraction_picks_the_right_count(nprocs, fraction, late):
    assert arrival_measure.late_count(nprocs, fraction) == late
    table = arrival_measure.delay_table(np.random.default_rng(1), 50, nprocs, 2.0, fraction)
    assert ((table == 2.0).sum(axis=1) == late).all()
    assert ((table == 0.0).sum(axis=1) == nprocs - late).all()
    if late < nprocs:       # a different set of late processes from call to call
        assert len({tuple(row) for row in table}) > 1


def test_unavoidable_wait_hand_example():
    # Arrivals 0, 1, 3, 4: the last one comes at 4, so the others wait 4, 3, 1, 0 -> mean 2.
    assert arrival_measure.unavoidable_wait([0, 1, 3, 4]) == 2
    assert arrival_measure.unavoidable_wait([[0, 1, 3, 4], [5, 5, 5, 5]]).tolist() == [2, 0]


def test_summary_excess_is_time_in_call_minus_unavoidable_wait():
    in_call = np.array([[3e-6, 5e-6], [1e-6, 1e-6]])      # 2 iterations x 2 processes
    arrivals = np.array([[0.0, 2e-6], [0.0, 0.0]])
    s = arrival_measure.summarize(in_call, arrivals)
    assert s["avg_us"] == pytest.approx(2.5) and s["min_us"] == pytest.approx(1)
    assert s["max_us"] == pytest.approx(4) and s["unavoidable_us"] == pytest.approx(0.5)
    assert s["excess_us"] == pytest.approx(2.0)


def test_clock_offset_uses_the_fastest_round_trip():
    # The remote clock is 100 ahead. Ping-pong A takes 10 with the reply at local 3 (asymmetric:
    # its midpoint estimate is off by 2); ping-pong B takes 2, reply at local 21 (symmetric).
    sent, received = [0.0, 20.0], [10.0, 22.0]
    remote = [103.0, 121.0]
    assert arrival_measure.clock_offset(sent, remote, received) == (100.0, 2.0)


def test_turn_order_rotates_who_goes_first():
    orders = [report_driver.turn_order(3, it) for it in range(3)]
    assert all(sorted(order) == [0, 1, 2] for order in orders)
    assert [order[0] for order in orders] == [0, 1, 2]


def test_call_schedule_interleaved_draws_each_iteration_afresh():
    schedule = arrival_measure.call_schedule(1, 8, 32, 400, 4)
    assert schedule == arrival_measure.call_schedule(1, 8, 32, 400, 4)   # alike on every rank
    assert schedule != arrival_measure.call_schedule(2, 8, 32, 400, 4)
    assert [it for it, _ in schedule] == [it for it in range(400) for _ in range(4)]
    orders = [[j for it, j in schedule if it == k] for k in range(400)]
    assert all(sorted(order) == [0, 1, 2, 3] for order in orders)
    # each algorithm follows each other about as often (a rotation: 1 never follows 2)
    calls = [j for _, j in schedule]
    follows = Counter(zip(calls, calls[1:]))
    others = [(a, b) for a in range(4) for b in range(4) if a != b]
    assert min(follows[p] for p in others) > 0.5 * max(follows[p] for p in others)
    assert {order[0] for order in orders} == {0, 1, 2, 3}


def test_call_schedule_apart_runs_each_algorithm_through_its_iterations():
    schedule = arrival_measure.call_schedule(1, 8, 32, 5, 3, apart=True)
    runs = [schedule[k:k + 5] for k in range(0, 15, 5)]
    assert sorted(run[0][1] for run in runs) == [0, 1, 2]
    assert all(run == [(it, run[0][1]) for it in range(5)] for run in runs)
    firsts = {arrival_measure.call_schedule(seed, 8, 32, 5, 3, apart=True)[0][1]
              for seed in range(20)}
    assert firsts == {0, 1, 2}                                 # the algorithms' order is drawn


def test_stretch_schedule_runs_each_algorithm_through_each_stretch_in_a_drawn_order():
    stretches = [2, 4, 4]                                      # warm-up, then two phases
    schedule = arrival_measure.stretch_schedule(1, 8, 0, stretches, 3)
    assert sorted(schedule) == [(it, j) for it in range(10) for j in range(3)]
    start = 0
    for length in stretches:                                   # each stretch's calls together
        part, schedule = schedule[:3 * length], schedule[3 * length:]
        runs = [part[k:k + length] for k in range(0, 3 * length, length)]
        assert all(run == [(start + i, run[0][1]) for i in range(length)] for run in runs)
        start += length
    orders = {tuple(c[1] for c in arrival_measure.stretch_schedule(s, 8, 0, [1, 1], 3))
              for s in range(20)}
    assert len(orders) > 3                                     # drawn afresh each stretch
    assert arrival_measure.stretch_schedule(1, 8, 32, [1] * 7, 3) == \
        arrival_measure.call_schedule(1, 8, 32, 7, 3)          # interleaved: stretches of one


def test_t_msg_partner_is_rank_1_or_the_next_nodes_master():
    def topology(node_of):
        nodes = [[r for r, n in enumerate(node_of) if n == k] for k in range(max(node_of) + 1)]
        return Topology(0, len(node_of), node_of, nodes, emulated=True, crowded=False,
                        crowded_anywhere=False)
    peer = arrival_measure.t_msg_peer
    assert [peer(topology([0, 0, 1, 1]), across) for across in (False, True)] == [1, 2]
    assert [peer(topology([0, 1, 0, 1]), across) for across in (False, True)] == [1, 1]
    assert [peer(topology([0, 0, 0]), across) for across in (False, True)] == [1, 1]
    assert [peer(topology([0]), across) for across in (False, True)] == [0, 0]


def test_dispatcher_imports_only_the_chosen_subcommand(monkeypatch):
    monkeypatch.setitem(bench_main.SUBCOMMANDS, "broken", ("no_such_module", "cannot import"))
    module, args = bench_main.parse(["arrival", "--mif", "5,1", "--sizes", "8K"])
    assert module is arrival and args.mif == [1, 5] and args.sizes == [8192]
    with pytest.raises(ImportError):
        bench_main.parse(["broken"])


@pytest.mark.parametrize("subcommand, option", [("alternate", "--out"), ("ft", "--json")])
def test_a_json_file_it_cannot_write_is_refused_before_the_run(tmp_path, capsys, subcommand,
                                                                option):
    """The option names the JSON file: a folder is an error at parse, not after the run."""
    with pytest.raises(SystemExit):
        bench_main.parse([subcommand, option, str(tmp_path)])
    assert f"cannot write {tmp_path}: a folder, not a file" in capsys.readouterr().err
    module, args = bench_main.parse([subcommand, option, str(tmp_path / "r.json")])
    written = getattr(args, option[2:])
    assert written == tmp_path / "r.json" and not written.exists()


@pytest.mark.parametrize("subcommand", ["arrival", "cma-model"])
def test_a_results_folder_blocked_by_a_file_is_refused_before_the_run(tmp_path, capsys, subcommand):
    """--out names a folder, made if missing: a file in its way is an error at parse, not a
    FileExistsError once the results are in."""
    blocker = tmp_path / "results"
    blocker.write_text("a user's notes")
    for out in (blocker, blocker / "deeper"):
        with pytest.raises(SystemExit):
            bench_main.parse([subcommand, "--out", str(out)])
        assert f"cannot write into {out}: {blocker} is a file, not a folder" in capsys.readouterr().err
    module, args = bench_main.parse([subcommand, "--out", str(tmp_path / "new" / "runs")])
    assert args.out == tmp_path / "new" / "runs" and not (tmp_path / "new").exists()
    assert blocker.read_text() == "a user's notes"


def test_fabric_counters_and_mismatches(tmp_path, monkeypatch):
    port = tmp_path / "ib" / "rxe0" / "ports" / "1" / "hw_counters"
    port.mkdir(parents=True)
    (port / "sent_pkts").write_text("1234\n")
    snmp = tmp_path / "snmp"
    snmp.write_text("Ip: Forwarding\nIp: 1\nTcp: RtoAlgorithm OutSegs\nTcp: 1 77\n")
    monkeypatch.setattr(fabric, "SYS_RDMA", tmp_path / "ib")
    monkeypatch.setattr(fabric, "SNMP", snmp)
    assert fabric.counters() == {"rdma:rxe0": 1234, "tcp": 77}

    rxe, tcp = ("rdma:rxe0",), ("tcp",)
    assert fabric.mismatches({"pap_direct": {8: rxe}}) == []        # no mpi: nothing compared
    assert fabric.mismatches({"mpi": {8: rxe, 64: rxe}, "pap_direct": {8: rxe, 64: rxe}}) == []
    assert fabric.mismatches({"mpi": {8: tcp}, "pap_direct": {8: rxe}, "auto": {8: tcp}}) == \
        ["pap_direct at 8 B ran on rdma:rxe0, mpi on tcp"]
    assert fabric.describe(()) == "shared memory"


def run_arrival(nprocs, *options, timeout=240, flags=()):
    res = launch(nprocs, ["-m", "papcoll.bench", "arrival", *options], timeout=timeout,
                 flags=flags)
    return res.returncode, res.stdout


@pytest.mark.mpi
@pytest.mark.parametrize("late", [None, 0.5], ids=["random", "late50"])
def test_arrival_run_writes_results(tmp_path, late):
    sizes, mifs = [8, 4096], [0, 4]
    options = ["--sizes", "8,4K", "--mif", "0,4", "--iterations", 3, "--warmup", 1,
               "--out", tmp_path, "--name", "run"]
    if late:
        options += ["--late-fraction", late, "--apart"]      # each algorithm's calls in a run
    # the late run bound to cores (both MPIs take --bind-to core), the other not
    code, out = run_arrival(2, *options, flags=("--bind-to", "core") if late else ())
    assert code == 0, out[-4000:]
    assert "# papcoll random-arrival benchmark" in out
    result = json.loads((tmp_path / "run.json").read_text())
    assert (tmp_path / "run.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "run.txt").exists()

    assert {"command", "nprocs", "mpi_library", "seed", "t_msg", "clock", "algorithms",
            "results", "late_fraction"} <= result.keys()
    assert result["nprocs"] == 2 and result["late_fraction"] == late
    assert result["calls"] == ("apart" if late else "interleaved")
    cpus = result["cpus"]["per_rank"]
    if late:
        assert result["cpus"]["placement"] == "bound" and "bound to a CPU each" in out
        assert all(len(c) == 1 for c in cpus) and cpus[0] != cpus[1], cpus
    else:
        assert result["cpus"]["placement"] == ("unbound" if len(cpus[0]) > 1 else "bound")
    # One host: every algorithm, MPI's own included, moved its data in shared memory.
    assert result["fabric"]["mpi"] == {"8": "shared memory", "4096": "shared memory"}
    assert not result["mixed_fabrics"] and "# networks used" in out
    assert "min over" in result["t_msg"]["method"]
    assert [t["size"] for t in result["t_msg"]["per_size"]] == sizes
    assert all(t["t_msg_us"] > 0 for t in result["t_msg"]["per_size"])
    assert len(result["clock"]["per_rank"]) == 2
    names = list(result["algorithms"])
    assert "mpi" in names and set(names) | set(result["skipped"]) == {*papcoll.algorithms, "auto"}
    assert all(r["chosen"] in papcoll.algorithms for r in result["results"]
               if r["algorithm"] == "auto")
    # pap_direct's scheme (mpi-rma copies up to 4 MiB), recorded for validation
    assert [r.get("runs_as") for r in result["results"] if "runs_as" in r] == \
        ["pap_direct_copy"] * (len(sizes) * len(mifs))
    assert all(r["algorithm"] == "pap_direct" for r in result["results"] if "runs_as" in r)
    rows = result["results"]
    assert [(r["size"], r["mif"], r["algorithm"]) for r in rows] == \
        [(s, m, a) for s in sizes for m in mifs for a in names]
    for row in rows:
        assert 0 < row["min_us"] <= row["avg_us"] <= row["max_us"]
        assert row["unavoidable_us"] >= 0
        assert row["excess_us"] == pytest.approx(row["avg_us"] - row["unavoidable_us"])
        assert np.array(row["per_rank"]["in_call_us"]).shape == (3, 2)
        if row["algorithm"] == "mpi":
            assert row["ratio_vs_mpi"] == pytest.approx(1.0)
        if late and row["mif"]:
            delays = np.array(row["per_rank"]["planned_delay_us"])
            assert ((delays == row["delay_bound_us"]).sum(axis=1) == 1).all()


@pytest.mark.mpi
def test_phases_and_a_t_msg_across_nodes_are_reported(tmp_path):
    """--phases (trace="phases": no event per peer) still records the phases of the
    hierarchical calls, whose rounds run as schedules in C: N=4 as 2 nodes of 2. With
    --t-msg across, t_msg is a ping-pong with node 1's master, rank 2."""
    res = launch(4, ["-m", "papcoll.bench", "arrival", "--sizes", "8,4K", "--mif", "1",
                     "--iterations", 3, "--warmup", 1, "--phases", "--t-msg", "across",
                     "--algorithms",
                     "mpi,shm_direct,pap_shm_direct", "--out", tmp_path, "--name", "run"],
                 env={"PAPCOLL_NODE_SIZE": "2"}, timeout=240)
    assert res.returncode == 0, res.stdout[-4000:]
    result = json.loads((tmp_path / "run.json").read_text())
    assert "between rank 0 and rank 2 " in result["t_msg"]["method"]
    for row in result["results"]:
        phases = row.get("phases_us", {})
        if row["algorithm"] == "mpi":
            assert not phases
        else:
            assert {"gather", "masters", "scatter"} <= phases.keys(), row["algorithm"]
            assert all(0 <= us <= row["max_us"] for us in phases.values()), phases
    assert "phases (us, mean): gather" in res.stdout


@pytest.mark.mpi
@pytest.mark.parametrize("variant,sizes,served", [
    ("v", "8,4K", {"mpi", "pap_direct", "auto"}), ("w", "4,8", {"mpi", "pap_direct", "auto"}),
    ("persistent", "8,4K", {"mpi", "pap_direct", "auto"})])
def test_arrival_variants_run_checked_calls(tmp_path, variant, sizes, served):
    common = ["--variant", variant, "--sizes", sizes, "--mif", "1", "--iterations", 3,
              "--warmup", 1, "--out", tmp_path, "--name", "run"]
    code, out = run_arrival(2, *common)           # every algorithm that serves the variant
    assert code == 0, out[-4000:]
    result = json.loads((tmp_path / "run.json").read_text())
    assert result["variant"] == variant and served <= set(result["algorithms"]), result
    assert "shm_pap serves no" in result["skipped"]["shm_pap"]
    assert len(result["results"]) == 2 * len(result["algorithms"])
    code, out = run_arrival(2, *common, "--algorithms", "mpi,shm_pap")   # named: refused
    assert code == 2 and "error: shm_pap serves no" in out, out[-4000:]


@pytest.mark.mpi
def test_cost_of_persistent_calls():
    res = launch(2, ["-m", "papcoll.bench", "cost", "--variant", "persistent", "--sizes", "8",
                     "--iterations", "4", "--algorithms", "mpi,pap_direct"], timeout=240)
    assert res.returncode == 0, res.stdout[-4000:]
    assert "# papcoll cost (persistent): N=2" in res.stdout
    assert [line.split()[1] for line in res.stdout.splitlines() if line[:1].isdigit()] == \
        ["mpi", "pap_direct"]


@pytest.mark.mpi
def test_cost_reports_every_algorithm_against_mpi():
    res = launch(3, ["-m", "papcoll.bench", "cost", "--sizes", "8,1K", "--iterations", "4",
                     "--algorithms", "mpi,pap_direct,shm_pap,auto", "--counts"], timeout=240)
    assert res.returncode == 0, res.stdout[-4000:]
    assert "# papcoll cost (alltoall): N=3, transport " in res.stdout
    counted = [line for line in res.stdout.splitlines() if line.startswith("#   per late call:")]
    assert len(counted) == 8 and all("looks" in c and "sleeps" in c for c in counted), counted
    rows = [line.split() for line in res.stdout.splitlines() if line[:1].isdigit()]
    assert [(r[0], r[1]) for r in rows] == [(s, a) for s in ("8", "1K")
                                            for a in ("mpi", "pap_direct", "shm_pap", "auto")]
    for size, name, cpu, kernel, wall, ratio in rows:
        assert float(cpu) > 0 and float(wall) > 0 and 0 <= float(kernel) <= float(cpu) + 5
        assert name != "mpi" or float(ratio) == 1.0


@pytest.mark.mpi
def test_entry_reports_every_row_against_mpi():
    res = launch(3, ["-m", "papcoll.bench", "entry", "--size", "24", "--iterations", "20",
                     "--rounds", "3", "--algorithms", "mpi,shm_pap,auto"], timeout=240)
    assert res.returncode == 0, res.stdout[-4000:]
    assert "# papcoll entry (blocking): N=3, 24 per peer, 3 alternating rounds of 20" \
        in res.stdout
    rows = {line[:24].strip(): line[24:].split() for line in res.stdout.splitlines()
            if line and not line.startswith(("#", "Row"))}
    assert list(rows) == ["MPI_Alltoall (mpi4py)", "mpi", "shm_pap", "auto"]
    assert rows["MPI_Alltoall (mpi4py)"][1] == "1.00"
    assert all(float(us) > 0 for us, *_ in rows.values())
    assert rows["mpi"][2] == "0"            # one shape: every timed call entered C once


@pytest.mark.mpi
@pytest.mark.parametrize("shapes,missed", [(3, "0"), (17, "40")])
def test_entry_cycles_shapes_and_counts_the_full_path(shapes, missed):
    """3 shapes: plans for all of them; 17 (more than the cache holds): every call misses."""
    res = launch(2, ["-m", "papcoll.bench", "entry", "--shapes", str(shapes), "--iterations",
                     "20", "--rounds", "2", "--algorithms", "mpi"], timeout=240)
    assert res.returncode == 0, res.stdout[-4000:]
    assert f"8 per peer x 1..{shapes} (cycled)" in res.stdout, res.stdout[-4000:]
    row = [line.split() for line in res.stdout.splitlines() if line.startswith("mpi ")]
    assert row and row[0][3] == missed, res.stdout[-4000:]


@pytest.mark.mpi
@pytest.mark.parametrize("form", ["nonblocking", "persistent"])
def test_entry_times_requests_by_their_call_objects(form):
    """Requests of 3 shapes: after the checked round, every timed one starts by its plan."""
    res = launch(2, ["-m", "papcoll.bench", "entry", "--form", form, "--shapes", "3",
                     "--iterations", "20", "--rounds", "2", "--algorithms", "mpi,pap_direct"],
                 timeout=240)
    assert res.returncode == 0, res.stdout[-4000:]
    assert f"# papcoll entry ({form}): N=2" in res.stdout, res.stdout[-4000:]
    rows = {line.split()[0]: line.split()[1:] for line in res.stdout.splitlines()
            if line.startswith(("mpi ", "pap_direct "))}
    assert set(rows) == {"mpi", "pap_direct"}, res.stdout[-4000:]
    assert all(row[2] == "0" for row in rows.values()), res.stdout[-4000:]


@pytest.mark.mpi
@pytest.mark.parametrize("kind", ["v", "a"])
def test_runner_loop_runs_unmodified_and_explicit(kind):
    plain = launch(2, ["-m", "papcoll", "run", "-m", "papcoll.bench.runner_loop", "plain", kind],
                   timeout=120, runner=())
    explicit = launch(2, ["-m", "papcoll.bench.runner_loop", "explicit", kind], timeout=120)
    for res, how in ((plain, "plain"), (explicit, "explicit")):
        assert res.returncode == 0, res.stdout[-4000:]
        assert f"runner_loop {how} {kind}: median" in res.stdout, res.stdout[-4000:]


@pytest.mark.mpi
def test_pencil_transposes_alternate_shapes_and_come_back():
    common = ["--grid", "8", "--rounds", "2", "--steps", "2"]
    for how, runner, extra in (("plain", ("-m", "papcoll", "run"), []),
                               ("plain", ("-m", "mpi4py"), ["--delay", "100"]),
                               ("explicit mpi", ("-m", "mpi4py"), ["--algorithm", "mpi"])):
        res = launch(4, ["-m", "papcoll.bench.pencil", how.split()[0], *common, *extra],
                     timeout=120, runner=runner)
        assert res.returncode == 0, res.stdout[-4000:]
        line = next((line for line in res.stdout.splitlines()
                     if line.startswith(f"pencil {how}: N=4 (2x2), 8^3 complex128")), None)
        assert line and line.endswith("; checked"), res.stdout[-4000:]
        if how == "explicit mpi":
            # (2 + 2 x 2 + 1 checked steps) x 4 transposes: mpi leaves a plan for each of the
            # 4 shapes, so only their first calls miss
            assert "cache hits 24 misses 4 (rank 0)" in line, line


@pytest.mark.mpi
def test_cma_model_measures_both_kinds_of_memory(tmp_path):
    res = launch(3, ["-m", "papcoll.bench", "cma-model", "--pages", "16", "--reps", "20",
                     "--out", tmp_path, "--name", "cm"], timeout=120)
    assert res.returncode == 0, res.stdout[-4000:]
    doc = json.loads((tmp_path / "cm.json").read_text())
    assert doc["nprocs"] == 3 and doc["throttle"] in (1, 2)
    for m in doc["memory"].values():              # 2 readers; the terms of the model, positive
        assert m["gamma"] == {"1": 1.0, "2": m["gamma"]["2"]} and m["alpha_us"] > 0
        assert m["T4_us"] > m["T3_us"] and m["beta_ns_per_byte"] > 0
        assert set(m["throughput_GBps"]) == {"1", "2"}


@pytest.mark.mpi
def test_entry_prices_the_adaptive_auto():
    res = launch(3, ["-m", "papcoll.bench", "entry", "--size", "24", "--iterations", "20",
                     "--rounds", "2", "--algorithms", "auto", "--adapt", "4"], timeout=240)
    assert res.returncode == 0, res.stdout[-4000:]
    rows = [line[:24].strip() for line in res.stdout.splitlines()
            if line and not line.startswith(("#", "Row"))]
    assert rows == ["MPI_Alltoall (mpi4py)", "auto", "auto, PAPCOLL_ADAPT=4"]


def test_alternate_summarizes_each_phase_against_its_best_fixed_algorithm():
    from papcoll.bench import alternate
    names = ["mpi", "direct", "auto", "adaptive"]
    # (algorithms, rounds, processes): two rounds a phase, phases MIF 1 then 64
    us = {"mpi": [10, 10, 50, 50], "direct": [20, 20, 20, 20], "auto": [10, 10, 50, 50],
          "adaptive": [11, 11, 22, 22]}
    in_call = np.array([[[t * 1e-6] * 2 for t in us[n]] for n in names])
    r = alternate.summarize(8, names, in_call, np.array([0, 0, 1, 1]), [1, 64])
    assert [(p["mif"], p["best"], p["best_us"]) for p in r["phases"]] == [(1, "mpi", 10),
                                                                           (64, "direct", 20)]
    assert r["phases"][1]["us"]["adaptive"] == pytest.approx(22)
    assert (r["best_single"], r["best_single_us"]) == ("direct", 20)   # 20 against mpi's 30
    assert r["differ"]          # mpi costs the skewed phase 2.5 x, direct the balanced one 2 x


def test_alternate_pools_each_phase_over_its_cycles():
    from papcoll.bench import alternate
    names = ["mpi", "direct", "auto", "adaptive"]
    # a warm-up round, then two cycles of MIF 1 and 64, one round a phase
    us = {"mpi": [99, 10, 50, 30, 70], "direct": [99, 20, 20, 40, 40],
          "auto": [99, 10, 50, 30, 70], "adaptive": [99, 15, 25, 35, 45]}
    in_call = np.array([[[t * 1e-6] * 2 for t in us[n]] for n in names])
    r = alternate.summarize(8, names, in_call, np.array([-1, 0, 1, 2, 3]), [1, 64])
    assert [(p["mif"], p["best"], p["best_us"]) for p in r["phases"]] == [(1, "mpi", 20),
                                                                           (64, "direct", 30)]
    assert r["phases"][0]["us"]["adaptive"] == pytest.approx(25)       # (15 + 35) / 2
    assert r["phases"][1]["us"]["adaptive"] == pytest.approx(35)       # (25 + 45) / 2
    assert r["us"]["mpi"] == pytest.approx(40)                         # the warm-up left out


@pytest.mark.mpi
@pytest.mark.parametrize("order", [[], ["--apart"]], ids=["interleaved", "apart"])
def test_alternate_runs_every_algorithm_through_the_phases(tmp_path, order):
    out = tmp_path / "alt.json"
    res = launch(4, ["-m", "papcoll.bench", "alternate", "--sizes", "8,4K", "--phase", "12",
                     "--mif", "1,64", "--adapt", "4", "--warmup", "2", "--out", str(out),
                     *order], env={"PAPCOLL_NODE_SIZE": "2"}, timeout=240)
    assert res.returncode == 0, res.stdout[-4000:]
    doc = json.loads(out.read_text())
    assert doc["options"]["apart"] == bool(order)
    assert [r["size"] for r in doc["results"]] == [8, 4096]
    for r in doc["results"]:
        assert [p["mif"] for p in r["phases"]] == [1, 64]
        for p in r["phases"]:
            fixed = {n: t for n, t in p["us"].items() if n not in ("auto", "adaptive")}
            assert "adaptive" in p["us"] and "auto" in p["us"] and len(fixed) >= 4
            assert p["best"] == min(fixed, key=fixed.get) and p["best_us"] == min(fixed.values())
    assert set(doc["adaptive_last_choice"]) == {"8", "4096"}
    assert "adaptive/best" in res.stdout
