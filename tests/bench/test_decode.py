"""bench's decode rows on the CPU build: a step's output against a float64 softmax written out here,
its bytes and GB/s from its own times, "no GPU" where there is no HBM to compare with, the GPU
side's share of HBM, and the table at 80 columns."""

import json

import numpy as np
import pytest
from rich.console import Console

from andrea_cli.bench.cpu import perf_counter_timer
from andrea_cli.bench.decode import bench_decode, measure_step
from andrea_cli.bench.sweep import BenchResult
from andrea_cli.render.bench import render_bench


@pytest.mark.parametrize("precision, width", [("fp32", 4), ("bf16", 2)])
def test_a_step_reads_the_whole_cache_and_says_how_fast(cpu_device, precision, width):
    m = measure_step(cpu_device, perf_counter_timer, S=150, d_k=32, H=2, precision=precision, warmup=0, repeats=2,
                     hbm_gbs=None, speed_path=False)
    assert m.cache_bytes == 2 * 150 * (32 + 32) * width  # K and V rows of every head, all 150 keys
    assert m.gbs == pytest.approx(m.cache_bytes / (m.median_ms["decode"] * 1e-3) / 1e9)
    assert all(m.median_ms[s] > 0 for s in ("append", "decode", "merge", "step")) and m.share_of_hbm is None
    assert m.max_abs_err < 1e-5 and m.slices == 2  # 150 keys: two slices of at least 64
    suffix = "1" if precision == "fp32" else "2"
    assert m.kernels == [f"kv_append_kernel{suffix}", f"attention_decode_kernel{suffix}",
                         "attention_decode_merge_kernel1"]


def test_the_step_is_checked_against_an_independent_softmax(cpu_device, monkeypatch):
    """A step whose output is wrong shows it in max_abs_err: the merge's output zeroed."""
    from andrea_cli.backends.launch import decode as launch

    real = launch.decode

    def wrong(*args, **kwargs):
        step = real(*args, **kwargs)
        zeros = np.zeros(step.output.shape, np.float32)
        step.output = cpu_device.to_device(zeros)
        return step

    monkeypatch.setattr(launch, "decode", wrong)
    m = measure_step(cpu_device, perf_counter_timer, S=20, d_k=16, H=1, precision="fp32", warmup=0, repeats=1,
                     hbm_gbs=None, speed_path=False)
    assert m.max_abs_err > 1e-2


def test_on_a_gpu_the_share_of_hbm_is_the_decode_kernels_gbs_over_it(cpu_device):
    rows, notes = bench_decode(cpu_device, perf_counter_timer, lengths=(40,), d_ks=(16,), H=1, warmup=0, repeats=1,
                               hbm_gbs=4800.0, speed_path=True)
    assert [m.precision for m in rows] == ["fp32", "bf16"] and not notes  # the CPU build runs both caches
    for m in rows:
        assert m.share_of_hbm == pytest.approx(m.gbs / 4800.0)
        assert json.loads(json.dumps(m.to_json()))["share_of_hbm"] == pytest.approx(m.share_of_hbm)


def test_the_decode_table_fits_80_columns_and_says_no_gpu(cpu_device):
    rows, _ = bench_decode(cpu_device, perf_counter_timer, lengths=(33, 1024), d_ks=(128,), H=1, warmup=0, repeats=1,
                           hbm_gbs=None, speed_path=False)
    result = BenchResult("cpu", "CPU", None, "numpy", 0, 1, decode=rows)
    console = Console(width=80, record=True, force_terminal=False)
    render_bench(console, result)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "no GPU" in text and "CPU build" in text and "…" not in text
    assert "attention_decode_kernel2" in text  # every run names the kernels it ran


def test_bench_cpu_impl_decode_runs_the_decode_rows(cli):
    result = cli("bench", "--side", "cpu", "--impl", "decode", "--T", 70, "--d-k", 16, "--mask", "causal",
                 "--repeats", 1, "--warmup", 0, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [(m["precision"], m["S"]) for m in doc["decode"]] == [("fp32", 70), ("bf16", 70)]
    assert all(m["speed_path"] is False and m["hbm_gbs"] is None for m in doc["decode"])
    assert any("CPU-build figures" in n and "no GPU" in n for n in doc["notes"])
    assert {m["impl"] for m in doc["measurements"]} == {"numpy"}  # the baseline only
