"""`andrea bench`: the FLOP and byte formulas, the peak from device properties, a tiny CPU run."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from typer.testing import CliRunner

from andrea_cli.bench import (DevicePeak, attention_bytes, attention_flops, fp32_lanes_per_sm,
                              peak_from_properties)
from andrea_cli.cli import app

os.environ.setdefault("COLUMNS", "120")


def test_flops_follow_the_flashattention_convention():
    # One head, T = 1024, d_k = 64: Q·K^T is 1024·1024·64 multiply-adds, P·V the same; 2 flops each.
    assert attention_flops(1, 1024, 64, causal=False) == 2 * (2 * 1024 * 1024 * 64)
    assert attention_flops(1, 1024, 64, causal=True) == 2 * 1024 * 1024 * 64
    assert attention_flops(12, 256, 128, causal=False) == 12 * 4 * 256 * 256 * 128


def test_bytes_are_q_k_v_read_and_o_written_once():
    assert attention_bytes(1, 1024, 64) == 4 * 1024 * 64 * 4  # four (T, 64) float32 arrays
    assert attention_bytes(2, 10, 3, d_v=5) == 2 * 4 * (10 * 3 * 2 + 10 * 5 * 2)


def test_peak_from_fake_h100_like_properties():
    props = {"name": b"Fake H100", "major": 9, "minor": 0, "multiProcessorCount": 132,
             "clockRate": 1_980_000, "memoryClockRate": 2_619_000, "memoryBusWidth": 5120}
    peak = peak_from_properties(props)
    assert peak.name == "Fake H100" and peak.lanes_per_sm == 128
    assert peak.peak_tflops == pytest.approx(132 * 128 * 2 * 1.98e9 / 1e12)  # 66.9
    assert peak.peak_gbs == pytest.approx(2.619e9 * 2 * 640 / 1e9)  # 3352
    assert fp32_lanes_per_sm(8, 0) == 64 and fp32_lanes_per_sm(8, 6) == 128


def test_roofline_takes_the_slower_roof():
    peak = DevicePeak("x", 1, 64, 1.0, peak_tflops=10.0, peak_gbs=1000.0)
    assert peak.roofline_ms(1e12, 1e6) == pytest.approx(100.0) and peak.bound(1e12, 1e6) == "compute"
    assert peak.roofline_ms(1e6, 1e9) == pytest.approx(1.0) and peak.bound(1e6, 1e9) == "memory"


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
    for m in doc["measurements"]:
        if m["impl"] == "cpu_build_fused" and m["median_ms"] is not None:
            assert m["speed_path"] is False and m["max_abs_err"] < 1e-5
    assert any("not a speed path" in n or "not measured" in n for n in doc["notes"])
    assert "bench:" in result.stderr  # progress lines go to stderr, JSON alone on stdout


def test_bench_refuses_a_gpu_it_does_not_have():
    from andrea_cli.backends.cuda import cuda_availability

    if cuda_availability().ok:
        pytest.skip("a GPU answers here")
    result = CliRunner().invoke(app, ["bench", "--side", "gpu"])
    assert result.exit_code == 2 and "--side gpu" in result.output


@pytest.mark.parametrize("causal", [True, False])
def test_gpu_side_implementations_run_through_the_cpu_build(causal):
    """The GPU bench's kernel launchers only need a KernelDevice: drive them with the CPU build,
    so their argument lists and buffer shapes are checked here, not first on a GPU."""
    from andrea_cli import reference
    from andrea_cli.backends.cpu import CpuBackend
    from andrea_cli.bench_peers import fused_gpu_impl, staged_gpu_impl
    from andrea_cli.kernel_file import packaged_kernel_path
    from andrea_cli.masks import MaskSpec

    backend = CpuBackend(packaged_kernel_path())
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 40, 16), dtype=np.float32) for _ in range(3))
    expected = reference.attention(q, k, v, MaskSpec("causal" if causal else "none"))
    for impl in (staged_gpu_impl(backend, max_T=1024), fused_gpu_impl(backend), fused_gpu_impl(backend, variant=1)):
        out = impl.to_host(impl.prepare(q, k, v, causal)())
        np.testing.assert_allclose(out, expected, atol=1e-5, err_msg=impl.name)
