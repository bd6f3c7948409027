"""The NAS FT kernel driver (bench/ft.py): NPB's random stream, FFT conventions, and mpiexec runs
verified against NPB's published checksums."""
import json
from pathlib import Path

import numpy as np
import pytest
import launcher
from papcoll.bench import ft

ROOT = Path(__file__).resolve().parents[1]


def npb_randlc(x, a):
    """NPB's randlc as NPB computes it, in doubles split into 23-bit halves: an independent
    check of ft's integer arithmetic."""
    r23, t23 = 0.5 ** 23, 2.0 ** 23
    r46, t46 = r23 * r23, t23 * t23
    a1 = float(int(r23 * a))
    a2 = a - t23 * a1
    x1 = float(int(r23 * x))
    x2 = x - t23 * x1
    t1 = a1 * x2 + a2 * x1
    z = t1 - t23 * float(int(r23 * t1))
    t3 = t23 * z + a2 * x2
    x = t3 - t46 * float(int(r46 * t3))
    return x, r46 * x


def test_stream_matches_npb_double_precision_randlc():
    x, expected = float(ft.SEED), []
    for _ in range(2000):
        x, value = npb_randlc(x, float(ft.A))
        expected.append(value)
    assert ft.stream(0, 2000).tolist() == expected


def test_first_number():
    # 314159265 * 5^13 mod 2^46, the first number NPB's vranlc returns from the FT seed
    assert ft.stream(0, 1)[0] == 55909509111989 / 2 ** 46
    assert ft.randlc(ft.SEED) == (55909509111989, 55909509111989 / 2 ** 46)


@pytest.mark.parametrize("offset,count", [(0, 1), (1, 7), (999, 1000), (12345, 3)])
def test_jump_ahead_equals_stepping(offset, count):
    x, values = ft.SEED, []
    for _ in range(offset + count):
        x, value = ft.randlc(x)
        values.append(value)
    assert ft.stream(offset, count).tolist() == values[offset:]


def test_stream_block_is_a_slice_of_the_whole():
    whole = ft.stream(0, 3 * 2 ** 16 + 5)
    assert np.array_equal(ft.stream(2 ** 16 - 1, 2 ** 17 + 3), whole[2 ** 16 - 1:3 * 2 ** 16 + 2])


def test_initial_conditions_order_and_slabs():
    nx, ny, nz = 8, 4, 8
    full = ft.initial_conditions(nx, ny, nz, 0, nz)
    numbers = ft.stream(0, 2 * nx * ny * nz)
    # x fastest, then y, then z; real part first
    assert full[0, 0, 1] == complex(numbers[2], numbers[3])
    assert full[0, 1, 0] == complex(numbers[2 * nx], numbers[2 * nx + 1])
    assert full[1, 0, 0] == complex(numbers[2 * nx * ny], numbers[2 * nx * ny + 1])
    slabs = [ft.initial_conditions(nx, ny, nz, z0, 2) for z0 in range(0, nz, 2)]
    assert np.array_equal(np.concatenate(slabs), full)


def test_folded_frequencies():
    assert ft._folded(8, 0, 8).tolist() == [0, 1, 2, 3, -4, -3, -2, -1]
    assert ft._folded(8, 4, 2).tolist() == [-4, -3]


def test_fft_signs_on_one_rank():
    """Forward is NPB's unscaled e^{+2 pi i jk/n}, inverse the unscaled e^{-...}."""
    nx, ny, nz = 8, 4, 16
    slabs = ft.Slabs(nx, ny, nz, 0, 1, lambda send, recv: np.copyto(recv, send))
    u = ft.initial_conditions(nx, ny, nz, 0, nz)
    spec = slabs.forward(u)
    assert np.allclose(spec, np.fft.ifftn(u) * u.size, rtol=0, atol=1e-12)
    assert np.allclose(slabs.inverse(spec), u * u.size, rtol=0, atol=1e-10)


def test_mops_matches_npb_output():
    # NPB 3.3.1-OMP class S printed "Time in seconds = 3.18", "Mop/s total = 55.63".
    assert ft.mops(64 ** 3, 6, 3.18) == pytest.approx(55.63, rel=2e-3)


def test_reference_is_npb():
    ref = json.loads((ROOT / "bench" / "npb_ft_reference.json").read_text())
    assert "ft.f" in ref["source"]
    assert ref["classes"]["S"]["checksums"][0] == [554.6087004964, 484.5363331978]
    assert ref["classes"]["B"]["checksums"][19] == [512.4146770029, 511.5744692211]


def mpirun(nprocs, *args, timeout=180):
    """tests/mpi/ft_worker.py on ``nprocs`` ranks; stdout and stderr together in ``.stdout``."""
    return launcher.mpirun(nprocs, "ft_worker.py", *args, timeout=timeout)


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs", [1, 2, 4])
def test_class_s_verifies(nprocs):
    proc = mpirun(nprocs, "--class", "S", "--algorithm", "mpi")
    assert proc.returncode == 0, proc.stdout
    assert "VERIFICATION SUCCESSFUL" in proc.stdout
    assert f"Number of processes : {nprocs:12d}" in proc.stdout


@pytest.mark.mpi
def test_perturbed_input_fails_verification():
    proc = mpirun(2, "--perturb", "--class", "S", "--algorithm", "mpi")
    assert proc.returncode == 1, proc.stdout
    assert "VERIFICATION UNSUCCESSFUL" in proc.stdout


@pytest.mark.mpi
def test_json_and_imbalance(tmp_path):
    out = tmp_path / "ft.json"
    proc = mpirun(2, "--class", "S", "--algorithm", "mpi", "--imbalance", "0.005", "--seed", "7",
                  "--json", str(out))
    assert proc.returncode == 0, proc.stdout
    result = json.loads(out.read_text())
    assert result["verified"] and result["nprocs"] == 2 and result["algorithm"] == "mpi"
    assert len(result["checksums"]) == 6 and result["alltoall_calls"] == 7
    assert result["block_bytes"] == 64 ** 3 * 16 // 4
    assert result["imbalance"] == 0.005 and result["imbalance_seed"] == 7
    assert 0 < result["imbalance_injected_max"] <= 7 * 0.005
    assert len(result["alltoall_time_per_rank"]) == 2
    assert "sleep uniform in [0, 0.005] s" in proc.stdout


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs,args,message", [
    (3, [], "power-of-two number of processes"),
    (1, ["--algorithm", "no-such-algorithm"], "unknown algorithm 'no-such-algorithm'"),
])
def test_refuses_cleanly(nprocs, args, message):
    proc = mpirun(nprocs, "--class", "S", *args)
    assert proc.returncode == 2, proc.stdout
    assert message in proc.stdout and "Traceback" not in proc.stdout


@pytest.mark.mpi
def test_auto_names_papcolls_own_choice(tmp_path):
    out = tmp_path / "ft.json"
    proc = mpirun(2, "--class", "S", "--algorithm", "auto", "--json", str(out))
    assert proc.returncode == 0, proc.stdout
    assert json.loads(out.read_text())["algorithm"] == "auto"
    assert "VERIFICATION SUCCESSFUL" in proc.stdout


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs", [2, 4])
def test_every_papcoll_algorithm_verifies(nprocs):
    proc = mpirun(nprocs, "--every-algorithm", "S")
    assert proc.returncode == 0, proc.stdout
    assert "mpi: VERIFICATION SUCCESSFUL" in proc.stdout


@pytest.mark.mpi
@pytest.mark.parametrize("cls", ["W", pytest.param("A", marks=pytest.mark.slow)])
@pytest.mark.parametrize("nprocs", [1, 2, 4])
def test_larger_classes_verify(cls, nprocs):
    proc = mpirun(nprocs, "--class", cls, "--algorithm", "mpi", timeout=900)
    assert proc.returncode == 0, proc.stdout
    assert "VERIFICATION SUCCESSFUL" in proc.stdout


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs,algorithm", [(1, "auto"), (2, "mpi"), (4, "pap_direct"),
                                              (4, "auto")])
def test_persistent_transposes_verify(tmp_path, nprocs, algorithm):
    out = tmp_path / "ft.json"
    proc = mpirun(nprocs, "--class", "S", "--algorithm", algorithm, "--persistent",
                  "--json", str(out))
    assert proc.returncode == 0, proc.stdout
    assert "VERIFICATION SUCCESSFUL" in proc.stdout and "(one persistent request)" in proc.stdout
    assert json.loads(out.read_text())["persistent"] is True
