"""`andrea bench`: the FLOP and byte formulas, the peak from device properties, a tiny CPU run."""

from __future__ import annotations

import json
import os
import shutil
import weakref

import numpy as np
import pytest
from typer.testing import CliRunner

from andrea_cli.bench.cpu import numpy_impl, perf_counter_timer
from andrea_cli.bench.roofline import DevicePeak, attention_bytes, attention_flops, fp32_lanes_per_sm, peak_from_properties
from andrea_cli.bench.sweep import CAUSAL, NO_MASK, Impl, Side, run_sweep
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


@pytest.mark.parametrize("mask", [CAUSAL, NO_MASK], ids=str)
def test_gpu_side_implementations_run_through_the_cpu_build(cpu_backend, mask):
    """The GPU bench's kernel launchers only need a KernelDevice: drive them with the CPU build,
    so their argument lists and buffer shapes are checked here, not first on a GPU."""
    from andrea_cli import reference
    from andrea_cli.bench.gpu import fused_gpu_impl, staged_gpu_impl

    from andrea_cli.backends.launch.staged import KERNEL1_PLAN

    backend = cpu_backend()
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 40, 64), dtype=np.float32) for _ in range(3))  # d 64: every variant
    expected = reference.attention(q, k, v, mask)
    for impl in (staged_gpu_impl(backend), staged_gpu_impl(backend, plan=KERNEL1_PLAN), fused_gpu_impl(backend),
                 fused_gpu_impl(backend, variant=2), fused_gpu_impl(backend, variant=1)):
        out = impl.to_host(impl.prepare(q, k, v, mask)())
        np.testing.assert_allclose(out, expected, atol=1e-5, err_msg=impl.name)


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


def _side(**kw) -> Side:
    return Side("cpu", "test", perf_counter_timer, lambda: 2**40, **kw)


def test_the_sweep_skips_an_implementation_that_runs_out_of_memory_and_carries_on():
    def hungry(q, k, v, mask):
        raise MemoryError("Unable to allocate 149. GiB")

    released = []
    impls = [numpy_impl(), Impl("hungry", hungry), Impl("after", numpy_impl().prepare)]
    result = run_sweep(_side(release=lambda: released.append(1)), impls, Ts=(8, 16), d_ks=(4,), masks=(CAUSAL,),
                       warmup=0, repeats=1, baseline="numpy")
    by = {(m.impl, m.T): m for m in result.measurements}
    for T in (8, 16):
        assert by["hungry", T].median_ms is None
        assert by["hungry", T].skipped == "ran out of host memory: MemoryError"
        assert by["after", T].median_ms is not None and by["after", T].ratio is not None
    assert len(released) == 1 + 3 * 2  # before the sweep, then after every implementation at each size


def test_a_failing_implementation_costs_its_row_and_a_lost_device_stops_the_sweep():
    from andrea_cli.backends.base import DeviceFault, DeviceOutOfMemory
    from andrea_cli.errors import AndreaError

    def refused(q, k, v, mask):
        raise AndreaError("softmax_kernel1 launch: too many resources requested")

    def no_room(q, k, v, mask):
        raise DeviceOutOfMemory("allocating (1, 8, 8) on the GPU: the GPU ran out of memory")

    impls = [numpy_impl(), Impl("refused", refused), Impl("no_room", no_room), Impl("after", numpy_impl().prepare)]
    result = run_sweep(_side(), impls, Ts=(8,), d_ks=(4,), masks=(NO_MASK,), warmup=0, repeats=1, baseline="numpy")
    by = {m.impl: m for m in result.measurements}
    assert by["refused"].skipped == "failed: softmax_kernel1 launch: too many resources requested"
    assert by["no_room"].skipped.startswith("ran out of")  # a GPU out-of-memory is a MemoryError too
    assert by["after"].median_ms is not None

    def faulted(q, k, v, mask):
        raise DeviceFault("the GPU faulted")

    with pytest.raises(DeviceFault):
        run_sweep(_side(), [numpy_impl(), Impl("faulted", faulted)], Ts=(8,), d_ks=(4,), masks=(NO_MASK,),
                  warmup=0, repeats=1, baseline="numpy")


def test_torch_without_cuda_is_a_reason_not_a_crash():
    from andrea_cli.bench.torch_sdpa import torch_reason

    torch = pytest.importorskip("torch", reason="torch is not installed: nothing to check")
    if torch.cuda.is_available():
        pytest.skip("this torch has CUDA")
    assert "no usable CUDA" in torch_reason("cuda") and torch_reason("cpu") is None


def test_an_implementation_too_big_for_the_budget_is_skipped_with_its_need_unprepared():
    def never(q, k, v, mask):
        raise AssertionError("prepared a size over the budget")

    impls = [numpy_impl(), Impl("big", never, peak_bytes=lambda H, T, d_k, mask: 2.0**50)]
    result = run_sweep(_side(), impls, Ts=(8,), d_ks=(4,), masks=(NO_MASK,), warmup=0, repeats=1, baseline="numpy")
    big = next(m for m in result.measurements if m.impl == "big")
    assert big.median_ms is None and big.skipped.startswith("needs about 1048576.0 GiB of host memory")


def test_the_previous_implementation_is_freed_before_the_next_prepares():
    alive = []

    def holding(q, k, v, mask):
        assert all(ref() is None for ref in alive), "the previous implementation's buffers are still alive"
        buffer = np.zeros(4)
        alive.append(weakref.ref(buffer))
        return lambda: (buffer, numpy_impl().prepare(q, k, v, mask)())[1]

    impls = [numpy_impl(), Impl("a", holding), Impl("b", holding)]
    run_sweep(_side(), impls, Ts=(8, 9), d_ks=(4,), masks=(NO_MASK,), warmup=0, repeats=1, baseline="numpy")
    assert len(alive) == 4


@pytest.mark.parametrize("mask", [CAUSAL, NO_MASK], ids=str)
def test_peak_estimates_cover_what_the_implementations_allocate(cpu_backend, mask):
    """NumPy reports its allocations to tracemalloc: the numpy path, and the staged GPU launcher
    driven through the CPU build, must stay within the bytes they declare."""
    import tracemalloc

    from andrea_cli.bench.gpu import staged_gpu_impl

    H, T, d_k = 2, 96, 8
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((H, T, d_k), dtype=np.float32) for _ in range(3))
    from andrea_cli.bench.backward import numpy_backward_impl, staged_backward_impl

    backend = cpu_backend()
    for impl in (numpy_impl(), staged_gpu_impl(backend), numpy_backward_impl(), staged_backward_impl(backend)):
        tracemalloc.start()
        impl.prepare(q, k, v, mask)()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert peak <= impl.peak_bytes(H, T, d_k, mask) + 64 * 1024, (impl.name, peak)  # + Python's own objects
        assert peak >= 0.5 * impl.peak_bytes(H, T, d_k, mask), (impl.name, peak)  # not wildly generous


# ------------------------------------------------------------------------------------------------
# The backward pass.

def test_backward_costs_follow_the_flashattention_convention():
    from andrea_cli.bench.roofline import backward_bytes, backward_flops

    # five T×T×d_k matmuls (Q·K^T recomputed, dV, dP, dQ, dK) against the forward's two
    assert backward_flops(1, 1024, 64, causal=False) == 5 * (2 * 1024 * 1024 * 64)
    assert backward_flops(3, 100, 16, causal=True) == 2.5 * attention_flops(3, 100, 16, causal=True)
    assert backward_bytes(1, 1024, 64) == 8 * 1024 * 64 * 4  # Q, K, V, O, dO read; dQ, dK, dV written


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


@pytest.mark.parametrize("mask", [CAUSAL, NO_MASK], ids=str)
def test_gpu_side_backward_implementations_run_through_the_cpu_build(cpu_backend, mask):
    from andrea_cli.bench.sweep import sample_dq_error
    from andrea_cli.bench.backward import fused_backward_impl, numpy_backward_impl, staged_backward_impl

    backend = cpu_backend()
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 40, 16), dtype=np.float32) for _ in range(3))
    for impl in (numpy_backward_impl(), staged_backward_impl(backend), fused_backward_impl(backend)):
        dq = impl.to_host(impl.prepare(q, k, v, mask)())
        assert sample_dq_error(q, k, v, dq, mask) < 1e-5, impl.name
        assert sample_dq_error(q, k, v, 1.01 * dq, mask) > 1e-3  # the check can fail


@pytest.mark.parametrize("d_k", [64, 128])
def test_the_bf16_backward_row_runs_through_the_cpu_build(d_k):
    """fused_bf16_backward (the GPU side's row) through the CPU build: its dQ within 3x of an
    emulated bf16 autograd's error against float64; and the fp32 fused row at the widths where the
    default forward (kernel3) has no logsumexp variant, so the row runs kernel2's."""
    from andrea_cli.backends.cpu import CpuBackend
    from andrea_cli.bench.backward import fused_backward_impl, fused_bf16_backward_impl
    from andrea_cli.bench.sweep import sample_dq_error, upstream_gradient
    from andrea_cli.kernel_file import packaged_kernel_path
    from andrea_cli.verification.bf16_backward import autograd_bf16, exact_gradients

    backend = CpuBackend(packaged_kernel_path())
    rng = np.random.default_rng(d_k)
    q, k, v = (rng.standard_normal((1, 70, d_k), dtype=np.float32) for _ in range(3))
    impl = fused_bf16_backward_impl(backend)
    assert (impl.precision, impl.only_d_ks, impl.peer) == ("bf16", (64, 128), "torch_sdpa_bf16_backward")
    dq = impl.to_host(impl.prepare(q, k, v, CAUSAL)())
    d_out, mask = upstream_gradient(q), CAUSAL
    exact = exact_gradients(q, k, v, d_out, mask, True).dq
    autograd = autograd_bf16(q, k, v, d_out, mask, True).dq
    assert 0 < np.abs(dq - exact).max() <= 3 * np.abs(autograd - exact).max()
    fp32 = fused_backward_impl(backend)
    assert sample_dq_error(q, k, v, fp32.to_host(fp32.prepare(q, k, v, CAUSAL)()), CAUSAL) < 1e-5


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


def test_the_timer_pins_the_blas_threads_while_it_times():
    from threadpoolctl import threadpool_info

    from andrea_cli.bench.cpu import pinned_timer

    seen = []

    def run():
        seen.append({pool["internal_api"]: pool["num_threads"] for pool in threadpool_info()})

    times = pinned_timer(1)(run, 1, 2)
    assert len(times) == 2 and len(seen) == 3
    assert all(n == 1 for pools in seen for n in pools.values()), seen


def test_bad_blas_threads_is_one_line_exit_2(run_main):
    code, _, err = run_main("bench", "--side", "cpu", "--blas-threads", "0")
    assert code == 2 and err.strip() == "error: --blas-threads must be >= 1 (got 0)"
