"""bench/bound/measured.py: on a GPU, `andrea bench` puts each kernel row's bound beside its measured
figure. No GPU here: the rows are fed as the GPU sweep would leave them, the device named as an H200
reports itself; an unknown GPU or missing tools leave the bound out in one line, a row whose launches
cannot be recorded loses its bound only."""

from __future__ import annotations

import pytest
from rich.console import Console

from andrea_cli.bench.bound.gpus import GPUS
from andrea_cli.kernel_file import packaged_kernel_path


H200 = GPUS["h200"]


class _RecordingBackend:
    """What the GPU bench's implementations need of a backend when only their launches matter."""

    def device(self):
        from andrea_cli.bench.bound.geometry import RecordingDevice

        return RecordingDevice()


def _gpu_rows(impls, shapes, ms: float):
    """The BenchResult a GPU sweep would leave: every implementation measured at `ms` per shape."""
    from andrea_cli.bench.sweep import BenchResult, Measurement, costs

    result = BenchResult("gpu", "NVIDIA H200 (sm_90, 132 SMs)", None, "fused", 1, 5)
    for impl in impls:
        for H, T, d_k, causal in shapes:
            flops, _ = costs(impl.direction, H, T, d_k, causal)
            result.measurements.append(Measurement(impl.name, T, d_k, H, causal, ms, tflops=flops / (ms / 1e3) / 1e12,
                                                   direction=impl.direction, precision=impl.precision))
    return result


def test_an_unknown_gpu_or_missing_tools_leave_the_bound_out_in_one_line(monkeypatch):
    from andrea_cli.bench import gpu as bench_gpu
    from andrea_cli.bench.bound import measured

    impls = [bench_gpu.fused_gpu_impl(_RecordingBackend())]

    def never(*args):
        raise AssertionError("compiled for a GPU without a model")

    result = _gpu_rows(impls, [(2, 256, 64, False)], 1.0)
    measured.attach_bounds(result, impls, "NVIDIA L4", 58, packaged_kernel_path(), compile_bounds=never)
    assert result.notes == ["no static bound beside the measured figures: no model of NVIDIA L4: the bound knows "
                            "NVIDIA H200 SXM, NVIDIA H100 SXM5, NVIDIA A100 SXM4 80GB"]
    monkeypatch.setattr(measured, "find_cuobjdump", lambda: None)
    result = _gpu_rows(impls, [(2, 256, 64, False)], 1.0)
    measured.attach_bounds(result, impls, "NVIDIA H200", 132, packaged_kernel_path(), compile_bounds=never)
    assert result.notes == ["no static bound beside the measured figures: cuobjdump not found: pip install '.[bound]'"]
    m = result.measurements[0]
    assert m.bound_tflops is None and m.measured_over_bound is None


def test_a_row_whose_launches_cannot_be_recorded_loses_its_bound_only(monkeypatch):
    from andrea_cli.bench import gpu as bench_gpu
    from andrea_cli.bench.bound import measured
    from andrea_cli.bench.sweep import Impl, swept_mask

    def refuses(dev, q, k, v, mask):
        raise ValueError("no such launch")

    impls = [Impl("broken", None, prepare_on=refuses), bench_gpu.fused_gpu_impl(_RecordingBackend())]
    result = _gpu_rows(impls, [(2, 256, 64, False)], 1.0)

    class Bounds:  # a bound of 0.5 ms for whatever the fused row launches
        def tflops(self, impl, m):
            assert measured.recorded_launches(impl, m.H, m.T, m.d_k, swept_mask(m.causal))
            return 2.0 * m.tflops

    monkeypatch.setattr(measured, "find_cuobjdump", lambda: "cuobjdump")
    measured.attach_bounds(result, impls, "NVIDIA H200", 132, packaged_kernel_path(), compile_bounds=lambda p, s: Bounds())
    broken, fused = result.measurements
    assert broken.bound_tflops is None and fused.measured_over_bound == pytest.approx(0.5)
    assert "no static bound for 1 row(s), first broken at T=256 d_k=64: no such launch" in result.notes


@pytest.mark.slow
def test_bench_rows_on_an_h200_carry_their_bound_at_their_own_shape(isolated_cache, bound_tools):
    """The fused row at T 4096, 12 heads, d 64 is the reference launch `bench --bound` reads, so its
    bound time is that report's; at T 1024, 2 heads the launchers' geometry at that shape gives it.
    measured / bound is the bound's time over the measured one; cupy (not a kernel of ours) has none."""
    from andrea_cli.bench.bound.geometry import reference_launches
    from andrea_cli.bench.bound.measured import RowBounds, attach_bounds
    from andrea_cli.bench.bound.report import compute_bounds, kernel_bound
    from andrea_cli.bench.gpu import fused_gpu_impl, staged_gpu_impl
    from andrea_cli.bench.sweep import Impl, costs
    from andrea_cli.render.bench import render_bench

    path = packaged_kernel_path()
    backend = _RecordingBackend()
    impls = [fused_gpu_impl(backend), staged_gpu_impl(backend), Impl("cupy", lambda q, k, v, mask: None)]
    ms = 2.0
    shapes = [(12, 4096, 64, False), (12, 4096, 64, True), (2, 1024, 64, True)]
    result = _gpu_rows(impls, shapes, ms)
    attach_bounds(result, impls, "NVIDIA H200", 132, path)
    rows = {(m.impl, m.H, m.T, m.causal): m for m in result.measurements}

    report = {k.kernel: k for k in compute_bounds(path, "h200").kernels}["attention_fused_kernel3_d64"]
    for causal, b in ((False, report.full), (True, report.causal)):
        m = rows["fused", 12, 4096, causal]
        assert m.measured_over_bound == pytest.approx(b.time_s / (ms / 1e3), rel=1e-9)
        assert m.bound_tflops == pytest.approx(costs("forward", 12, 4096, 64, causal)[0] / b.time_s / 1e12, rel=1e-9)
    bounds = RowBounds.compile(path, H200)
    small = reference_launches(T=1024, H=2).launches["attention_fused_kernel3_d64"]
    name = "attention_fused_kernel3_d64"
    want = kernel_bound(name, bounds.code[name], bounds.resources[name], small, H200, T=1024, H=2).causal.time_s
    assert rows["fused", 2, 1024, True].measured_over_bound == pytest.approx(want / (ms / 1e3), rel=1e-9)
    assert rows["fused", 2, 1024, True].measured_over_bound < rows["fused", 12, 4096, True].measured_over_bound / 10
    for (impl, *_), m in rows.items():
        assert (m.bound_tflops is None) == (impl == "cupy"), impl
    assert 0 < rows["staged", 12, 4096, False].bound_tflops <= H200.fp32_peak_tflops
    assert any("÷ bound" in note and "NVIDIA H200 SXM" in note for note in result.notes)

    row = result.to_json()["measurements"][0]
    assert row["bound_tflops"] == rows["fused", 12, 4096, False].bound_tflops
    assert row["measured_over_bound"] == rows["fused", 12, 4096, False].measured_over_bound
    console = Console(width=200, record=True)
    render_bench(console, result)
    text = console.export_text()
    assert "÷ bound" in text and f"{rows['fused', 12, 4096, False].measured_over_bound:.2f}" in text
    console = Console(width=80, record=True)
    render_bench(console, result)
    assert max(len(line) for line in console.export_text().splitlines() if "│" in line or "─" in line) <= 80


@pytest.mark.slow
def test_bench_gpu_on_a_device_that_reports_an_h200_joins_timings_and_bounds(monkeypatch, bench_gpu_as_h200,
                                                                           isolated_cache, bound_tools):
    """bench_gpu itself, with the device's properties those of an H200 and its kernels run by the
    CPU build (timed by the host clock): the rows it returns carry the bound the model gives the
    same launches at their shape, and measured / bound is that bound's time over the median."""
    import dataclasses

    from andrea_cli.bench.bound.measured import RowBounds
    from andrea_cli.bench.cpu import numpy_impl
    from andrea_cli.bench.sweep import CAUSAL, costs

    bench_gpu = bench_gpu_as_h200
    monkeypatch.setattr(bench_gpu, "cupy_impl", lambda: dataclasses.replace(numpy_impl(), name="cupy"))
    result = bench_gpu.bench_gpu(packaged_kernel_path(), Ts=(64,), d_ks=(64,), masks=(CAUSAL,), H=2, warmup=0,
                                 repeats=1, progress=lambda s: None)
    rows = {m.impl: m for m in result.measurements if m.median_ms is not None}
    assert {"fused", "fused1", "staged", "fused_backward"} <= {n for n, m in rows.items() if m.bound_tflops}
    # every tensor-core kernel's own row too, kernel7's launch (with its tensor maps) recorded like the rest
    assert {"fused_bf16", "fused7_bf16", "fused6_bf16", "fused4_bf16"} <= {n for n, m in rows.items() if m.bound_tflops}
    assert rows["cupy"].bound_tflops is None
    bounds = RowBounds.compile(packaged_kernel_path(), GPUS["h200"])
    impls = {impl.name: impl for impl in (bench_gpu.fused_gpu_impl(_RecordingBackend()),
                                          bench_gpu.staged_gpu_impl(_RecordingBackend()))}
    for name, impl in impls.items():
        m, seconds = rows[name], bounds.seconds(impl, 2, 64, 64, CAUSAL)
        assert m.measured_over_bound == pytest.approx(seconds / (m.median_ms / 1e3), rel=1e-9), name
        assert m.bound_tflops == pytest.approx(costs("forward", 2, 64, 64, True)[0] / seconds / 1e12, rel=1e-9)
    assert any("÷ bound" in note for note in result.notes)
