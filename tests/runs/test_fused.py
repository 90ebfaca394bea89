"""The bf16 tensor-core kernel where the other kernels are: `attend --fused --precision bf16`
(JSON and tables say the precision, bad combinations are one-line exit 2), the bench's GPU-side
launcher driven through the CPU build, and the bf16 peak of the roofline."""

from __future__ import annotations

import json

import numpy as np
import pytest

from andrea_cli.bench.roofline import DevicePeak, bf16_flops_per_clock_per_sm, peak_from_properties
from andrea_cli.masks import MaskSpec
from andrea_cli.verification import bf16_attention


def test_attend_fused_bf16_json_says_the_precision_and_matches_the_reference(cli, tmp_path):
    out = tmp_path / "o.npy"
    doc = cli.json("attend", "--fused", "--precision", "bf16", "--backend", "cpu", "--T", 70, "--d-k", 64,
                   "--mask", "window:40", "--out", out, "--sample-rows", 4)
    assert doc["precision"] == "bf16" and doc["kernel"] == "attention_fused_kernel5_d64"  # the default
    assert set(doc["timings_ms"]) >= {"to_bf16", "fused", "total"} and doc["timings_ms"]["fused"] > 0
    assert any("bf16" in n for n in doc["notices"])
    from andrea_cli.inputs import random_qkv

    qkv = random_qkv(70, 64, 64, 0)
    want, tol = bf16_attention.reference_and_tol(qkv.q[None], qkv.k[None], qkv.v[None], MaskSpec("window", 40), True)
    assert (np.abs(np.load(out) - want[0]) <= tol[0]).all()
    fp32 = cli.json("attend", "--fused", "--backend", "cpu", "--T", 8, "--d-k", 64)
    assert fp32["precision"] == "fp32" and fp32["kernel"] == "attention_fused_kernel3_d64"  # the entry point that ran


def test_attend_bf16_table_names_kernel_and_conversion(cli):
    result = cli("attend", "--fused", "--precision", "bf16", "--backend", "cpu", "--T", 16, "--d-k", 128)
    assert result.exit_code == 0, result.output
    assert "attention_fused_kernel5_d128, bf16" in result.output and "to_bf16" in result.output


@pytest.mark.parametrize("args, match", [
    (["--precision", "bf16"], "add --fused"),
    (["--fused", "--precision", "fp16"], "not one of fp32, bf16"),
    (["--fused", "--precision", "bf16", "--d-k", "80"], "d_k = d_v = 64 or 128"),
    (["--fused", "--precision", "bf16", "--d-k", "64", "--d-v", "128"], "d_k = d_v = 64 or 128"),
])
def test_bad_precision_is_one_line_exit_2(run_main, args, match):
    code, _, err = run_main("attend", "--backend", "cpu", "--T", "8", *args)
    assert code == 2 and match in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("causal", [True, False])
def test_gpu_bench_bf16_launcher_runs_through_the_cpu_build(cpu_backend, causal):
    from andrea_cli.bench.gpu import fused_bf16_gpu_impl

    impl = fused_bf16_gpu_impl(cpu_backend())
    assert impl.precision == "bf16" and impl.peer == "torch_sdpa_bf16" and impl.only_d_ks == (64, 128)
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((2, 70, 64), dtype=np.float32) for _ in range(3))
    mask = MaskSpec("causal" if causal else "none")
    want, tol = bf16_attention.reference_and_tol(q, k, v, mask, True)
    assert (np.abs(impl.to_host(impl.prepare(q, k, v, mask)()) - want) <= tol).all()


def test_bf16_peak_from_properties():
    h100 = {"name": "H100", "major": 9, "minor": 0, "multiProcessorCount": 132, "clockRate": 1_830_000,
            "memoryClockRate": 2_619_000, "memoryBusWidth": 5120}
    assert peak_from_properties(h100).bf16_tflops == pytest.approx(132 * 4096 * 1.83e9 / 1e12)  # 989, the datasheet's
    a100 = dict(h100, major=8, multiProcessorCount=108, clockRate=1_410_000)
    assert peak_from_properties(a100).bf16_tflops == pytest.approx(312, rel=0.01)
    assert bf16_flops_per_clock_per_sm(7, 0) is None  # Volta: no bf16 mma
    peak = DevicePeak("x", 1, 64, 1.0, peak_tflops=10.0, peak_gbs=1000.0, bf16_tflops=100.0)
    assert peak.roofline_ms(1e12, 1e6, "bf16") == pytest.approx(10.0) and peak.roofline_ms(1e12, 1e6) == pytest.approx(100.0)


def test_cpu_bench_reports_the_bf16_cpu_build_apart(cli):
    doc = cli.json("bench", "--side", "cpu", "--T", "64", "--d-k", "64", "--mask", "causal", "--repeats", "1")
    rows = [m for m in doc["measurements"] if m["impl"] == "cpu_build_fused_bf16"]
    assert rows and all(m["precision"] == "bf16" and m["speed_path"] is False for m in rows)
    assert all(m["max_abs_err"] < 2e-2 for m in rows if m["median_ms"] is not None)
