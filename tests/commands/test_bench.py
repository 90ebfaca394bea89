"""`andrea bench` from the command line: a tiny CPU run's JSON (forward and backward rows, each with
its spread and threads, the bf16 CPU build apart), and bad sizes and options refused in one line
before anything is allocated. (Its modules' tests: tests/bench/.)"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
from typer.testing import CliRunner

from andrea_cli.bench.roofline import attention_flops
from andrea_cli.cli import app

os.environ.setdefault("COLUMNS", "120")


def test_tiny_cpu_bench_json():
    result = CliRunner().invoke(app, ["bench", "--side", "cpu", "--T", "16", "--T", "33", "--d-k", "8",
                                      "--repeats", "2", "--warmup", "0", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["side"] == "cpu" and doc["baseline"] == "numpy" and doc["peak"] is None
    numpy_rows = [m for m in doc["measurements"] if m["impl"] == "numpy"]
    assert len(numpy_rows) == 4  # 2 T × 1 d_k × causal and not
    for m in numpy_rows:
        assert m["ratio"] == 1.0 and m["median_ms"] > 0 and m["max_abs_err"] < 1e-5
        assert m["tflops"] == pytest.approx(attention_flops(1, m["T"], 8, m["causal"]) / (m["median_ms"] / 1e3) / 1e12)
    # A C++ compiler is all the CPU build needs: where one exists it must have run at every point.
    cpu_build_rows = [m for m in doc["measurements"] if m["impl"] == "cpu_build_fused"]
    if any(shutil.which(c) for c in ("g++", "c++", "clang++")):
        assert len(cpu_build_rows) == 4 and all(m["median_ms"] is not None for m in cpu_build_rows), cpu_build_rows
        assert all(m["speed_path"] is False and m["max_abs_err"] < 1e-5 for m in cpu_build_rows)
        assert any(n.startswith("cpu_build_fused") and "not a speed path" in n for n in doc["notes"])
    else:
        assert not any(m["median_ms"] for m in cpu_build_rows)
        assert any("CPU build of the kernels not measured" in n for n in doc["notes"])
    assert "bench:" in result.stderr  # progress lines go to stderr, JSON alone on stdout


def test_bench_refuses_a_gpu_it_does_not_have():
    from andrea_cli.backends.cuda import cuda_availability

    if cuda_availability().ok:
        pytest.skip("a GPU answers here")
    result = CliRunner().invoke(app, ["bench", "--side", "gpu"])
    assert result.exit_code == 2 and "--side gpu" in result.output


# ------------------------------------------------------------------------------------------------
# Sizes that cannot run: refused or skipped before anything is allocated.

def _no_allocation(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("the sweep allocated its inputs before refusing the size")

    monkeypatch.setattr(np.random, "default_rng", fail)


def test_a_size_the_baseline_cannot_hold_is_one_line_exit_2_before_allocating(monkeypatch):
    monkeypatch.setattr("andrea_cli.inputs.available_memory_bytes", lambda: 8 * 2**30)
    _no_allocation(monkeypatch)
    result = CliRunner().invoke(app, ["bench", "--side", "cpu", "--T", "16", "--T", "200000", "--mask", "none",
                                      "--no-cpu-build"])
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and result.output.startswith("error: numpy (the baseline)")
    assert "T=200000" in result.output and "GiB" in result.output and "--T" in result.output
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit)


@pytest.mark.parametrize("flag, value", [("--T", "0"), ("--T", "-3"), ("--d-k", "0"), ("--heads", "0"),
                                         ("--repeats", "0"), ("--warmup", "-1")])
def test_bad_option_values_are_one_line_exit_2(monkeypatch, flag, value):
    _no_allocation(monkeypatch)
    args = ["bench", "--side", "cpu", flag, value] + (["--T", "8"] if flag != "--T" else [])
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.output == f"error: {flag} must be >= {0 if flag == '--warmup' else 1} (got {value})\n"


def test_tiny_cpu_bench_times_the_backward():
    from andrea_cli.bench.roofline import backward_flops

    result = CliRunner().invoke(app, ["bench", "--side", "cpu", "--T", "33", "--d-k", "8", "--mask", "causal",
                                      "--repeats", "2", "--warmup", "0", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    rows = {m["impl"]: m for m in doc["measurements"]}
    numpy_bwd = rows["numpy_backward"]
    assert numpy_bwd["direction"] == "backward" and numpy_bwd["max_abs_err"] < 1e-5
    assert numpy_bwd["tflops"] == pytest.approx(backward_flops(1, 33, 8, True) / (numpy_bwd["median_ms"] / 1e3) / 1e12)
    if any(shutil.which(c) for c in ("g++", "c++", "clang++")):
        cpu_bwd = rows["cpu_build_fused_backward"]
        assert cpu_bwd["speed_path"] is False and cpu_bwd["max_abs_err"] < 1e-5


def test_every_cpu_bench_row_runs_with_its_spread_and_threads():
    """Every implementation of the CPU side is measured at every point (none skipped for a kernel
    the file lacks), each with min <= median <= max over its repeats, and the BLAS/OpenMP threads
    it ran with are in the JSON."""
    result = CliRunner().invoke(app, ["bench", "--side", "cpu", "--T", "16", "--d-k", "64", "--repeats", "3",
                                      "--warmup", "0", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    impls = {m["impl"] for m in doc["measurements"]}
    expected = {"numpy", "numpy_backward"}
    if any(shutil.which(c) for c in ("g++", "c++", "clang++")):
        expected |= {"cpu_build_fused", "cpu_build_fused_bf16", "cpu_build_fused_backward"}
    assert impls >= expected
    for m in doc["measurements"]:
        assert m["median_ms"] is not None, f"{m['impl']} skipped: {m['skipped']}"
        assert m["min_ms"] <= m["median_ms"] <= m["max_ms"]
        assert m["repeats"] == (1 if m["impl"].startswith("cpu_build") else 3)
    assert doc["threads"]["limit"] == 1
    assert all(n == 1 for n in doc["threads"]["libraries"].values()), doc["threads"]


def test_bad_blas_threads_is_one_line_exit_2(run_main):
    code, _, err = run_main("bench", "--side", "cpu", "--blas-threads", "0")
    assert code == 2 and err.strip() == "error: --blas-threads must be >= 1 (got 0)"


def test_cpu_bench_reports_the_bf16_cpu_build_apart(cli):
    doc = cli.json("bench", "--side", "cpu", "--T", "64", "--d-k", "64", "--mask", "causal", "--repeats", "1")
    rows = [m for m in doc["measurements"] if m["impl"] == "cpu_build_fused_bf16"]
    assert rows and all(m["precision"] == "bf16" and m["speed_path"] is False for m in rows)
    assert all(m["max_abs_err"] < 2e-2 for m in rows if m["median_ms"] is not None)


def test_bench_names_the_kernels_each_kernel_file_row_launched():
    """Every run names what ran: a kernel-file row its kernels (JSON and screen), NumPy none."""
    args = ["bench", "--side", "cpu", "--T", "16", "--d-k", "8", "--mask", "causal", "--repeats", "1",
            "--warmup", "0", "--impl", "cpu_build_fused"]
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    rows = {m["impl"]: m for m in json.loads(result.stdout)["measurements"]}
    assert rows["numpy"]["kernels"] is None
    if rows["cpu_build_fused"]["median_ms"] is None:
        pytest.skip(f"the CPU build did not run: {rows['cpu_build_fused']['skipped']}")
    kernels = rows["cpu_build_fused"]["kernels"]
    assert len(kernels) == 1 and kernels[0].startswith("attention_fused_kernel")
    screen = CliRunner().invoke(app, args).output
    assert f"cpu_build_fused ran {kernels[0]}" in screen
