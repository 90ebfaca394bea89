"""The CPU side of `andrea bench`: the NumPy path (the baseline), torch SDPA on the CPU, and the
CPU build of the fused kernel, reported apart since it is a correctness tool, not a speed path."""

from __future__ import annotations

import os
import platform
import time

import numpy as np

from andrea_cli.backends.launch.fused_bf16 import BF16_KERNELS
from andrea_cli.bench.decode import DECODE_ROWS
from andrea_cli.bench.sweep import Impl, io_bytes, select_impls, tt_bytes
from andrea_cli.bench.torch_sdpa import torch_environment, torch_impl
from andrea_cli.defaults import DEFAULT_BLAS_THREADS
from andrea_cli.masks import MaskSpec
from andrea_cli.scale import course_scale

CPU_BUILD_MAX_T = 128  # the CPU build runs one fiber per CUDA thread: correctness, not speed
CPU_BUILD = "cpu_build_"  # its rows' names: the GPU side's, so prefixed
CPU_BUILD_LIMITS = dict(speed_path=False, max_T=CPU_BUILD_MAX_T, repeats=1,
                        why_max_T=f"the CPU build is not a speed path; run only up to T={CPU_BUILD_MAX_T}")


def numpy_peak_bytes(H, T, d_k, mask: MaskSpec):
    """matmul's result and `* scale`'s copy of it live together; a mask adds the (T, T) boolean
    and the two int64 index arrays `s[:, hidden]` makes of it."""
    return tt_bytes(H, T, 2) + (10.0 * T * T if mask.hides_future else 0) + io_bytes(H, T, d_k)


def perf_counter_timer(run, warmup: int, repeats: int) -> list[float]:
    for _ in range(warmup):
        run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1e3)
    return times


def pinned_timer(threads: int):
    """perf_counter_timer with the BLAS and OpenMP thread pools (NumPy's, torch's) limited to
    `threads` for the warm-up and the repeats of each measurement (threadpoolctl)."""
    from threadpoolctl import threadpool_limits

    def timer(run, warmup: int, repeats: int) -> list[float]:
        with threadpool_limits(limits=threads):
            return perf_counter_timer(run, warmup, repeats)

    return timer


def threads_seen(threads: int) -> dict:
    """What threadpoolctl finds inside the limit: each BLAS/OpenMP library loaded and its threads."""
    from threadpoolctl import threadpool_info, threadpool_limits

    with threadpool_limits(limits=threads):
        libraries = {}
        for pool in threadpool_info():
            libraries[pool["internal_api"]] = max(libraries.get(pool["internal_api"], 0), pool["num_threads"])
    return {"limit": threads, "libraries": libraries}


def numpy_impl() -> Impl:
    """The equation in float32 NumPy (BLAS matmuls): the CPU speed baseline."""

    def prepare(q, k, v, mask: MaskSpec):
        T, d_k = q.shape[1], q.shape[2]
        scale = np.float32(course_scale(d_k).factor)
        hidden = ~mask.visible(T) if mask.hides_future else None

        def run():
            s = np.matmul(q, k.transpose(0, 2, 1)) * scale  # (H, T, T)
            if hidden is not None:
                s[:, hidden] = -np.inf
            s -= s.max(axis=-1, keepdims=True)
            np.exp(s, out=s)
            s /= s.sum(axis=-1, keepdims=True)
            return np.matmul(s, v)

        return run

    return Impl("numpy", prepare, peak_bytes=numpy_peak_bytes)


def cpu_build_impl(kernel_path, timeout: float | None = None, name: str = CPU_BUILD + "fused") -> Impl:
    """The default fused kernel through the CPU build: reported, never a speed figure."""
    from andrea_cli.backends.cpu import CpuBackend
    from andrea_cli.backends.launch.fused import FUSED_MAX_D, WHY_MAX_D, launch_fused

    device = CpuBackend(kernel_path, timeout=timeout).device()

    def prepare(q, k, v, mask: MaskSpec):
        H, T, d_k = q.shape
        out = np.empty((H, T, d_k), dtype=np.float32)

        def run():
            run.kernels = launch_fused(device, q, k, v, out, H, T, d_k, d_k, mask=mask, scale=course_scale(d_k))
            return out

        return run

    return Impl(name, prepare, **CPU_BUILD_LIMITS, max_d_k=FUSED_MAX_D, why_max_d_k=WHY_MAX_D)


def cpu_build_bf16_impl(kernel_path, timeout: float | None = None, name: str = CPU_BUILD + "fused_bf16",
                        variant: int | None = None, on_request: bool = False) -> Impl:
    """A tensor-core kernel through the CPU build, its mma, wgmma, TMA and mbarriers emulated:
    reported, never a speed figure. variant None: the CPU build's default (attention_fused_kernel5);
    4 to 7: that kernel (kernel7's tensor maps encoded by the CPU build's own encoder)."""
    from andrea_cli.backends.cpu import CpuBackend
    from andrea_cli.backends.launch.fused_bf16 import BF16_DIMS, convert_inputs, launch_fused_bf16

    device = CpuBackend(kernel_path, timeout=timeout).device()

    def prepare(q, k, v, mask: MaskSpec):
        H, T, d_k = q.shape
        qb, kb, vb = convert_inputs(device, q, k, v, (H, T, d_k), course_scale(d_k))
        out = np.empty((H, T, d_k), dtype=np.float32)

        def run():
            run.kernels = launch_fused_bf16(device, qb, kb, vb, out, H, T, d_k, mask=mask, variant=variant)
            return out

        return run

    return Impl(name, prepare, **CPU_BUILD_LIMITS, only_d_ks=BF16_DIMS, precision="bf16", on_request=on_request)


def _cpu_build_bf16_variant(variant: int):
    """The CPU build's row of one tensor-core kernel, cpu_build_fused7_bf16 ..; the default's
    (kernel5) only on request, its figure being cpu_build_fused_bf16's."""
    from andrea_cli.backends.launch.fused_bf16 import default_bf16_variant

    def make(kernel_path, timeout: float | None, name: str) -> Impl:
        return cpu_build_bf16_impl(kernel_path, timeout, name, variant, on_request=variant == default_bf16_variant(None))

    return make


def _cpu_build_backward(kernel_path, timeout: float | None, name: str) -> Impl:
    from andrea_cli.backends.cpu import CpuBackend
    from andrea_cli.bench.backward import fused_backward_impl

    return fused_backward_impl(CpuBackend(kernel_path, timeout=timeout), name=name, **CPU_BUILD_LIMITS)


def _cpu_build_bf16_backward(kernel_path, timeout: float | None, name: str) -> Impl:
    from andrea_cli.backends.cpu import CpuBackend
    from andrea_cli.bench.backward import fused_bf16_backward_impl

    return fused_bf16_backward_impl(CpuBackend(kernel_path, timeout=timeout), name=name, peer=None, **CPU_BUILD_LIMITS)


# The CPU build's rows, each a GPU-side row of that name: the default kernel of each fused family,
# and every tensor-core kernel by its label (fused7_bf16 .. fused4_bf16)
CPU_BUILD_ROWS = {"fused": cpu_build_impl, "fused_bf16": cpu_build_bf16_impl,
                  **{BF16_KERNELS[v].label: _cpu_build_bf16_variant(v) for v in sorted(BF16_KERNELS, reverse=True)},
                  "fused_backward": _cpu_build_backward, "fused_bf16_backward": _cpu_build_bf16_backward}


def cpu_device_name() -> str:
    return f"CPU {platform.machine()} ({os.cpu_count()} logical cores), NumPy {np.__version__}"


def bench_cpu(kernel_path, *, Ts, d_ks, masks, H, warmup, repeats, progress, with_cpu_build=True,
              timeout: float | None = None, blas_threads: int = DEFAULT_BLAS_THREADS, only=None):
    """only: --impl's names (None: every implementation but those run on request: torch SDPA in
    bf16, by default and pinned, the tensor-core kernel's peers on a GPU)."""
    from andrea_cli.bench.sweep import Side, run_sweep
    from andrea_cli.inputs import available_memory_bytes

    from andrea_cli.bench.backward import numpy_backward_impl
    from andrea_cli.bench.torch_sdpa import torch_backward_impl

    impls = [numpy_impl(), numpy_backward_impl()]
    notes = ["CPU side: wall-clock medians (time.perf_counter); no peak or roofline (no device properties to compute them from)",
             f"BLAS/OpenMP threads pinned to {blas_threads} per measurement (threadpoolctl; --blas-threads N changes it)",
             "*_backward rows: dQ, dK, dV from dO after an untimed forward; TFLOP/s by FlashAttention's convention, "
             "2.5 × the forward's FLOPs"]
    torch_impls = [torch_impl("cpu"), torch_backward_impl("cpu")]
    torch_impls += [torch_impl("cpu", "bf16", backend, on_request=True) for backend in (None, "flash", "cudnn")]
    environment = torch_environment()
    reason = environment.get("reason")
    if reason is None:
        impls += torch_impls
    else:
        notes.append(f"torch SDPA (CPU) not measured: {reason}")
    # --impl accepts these names even where they cannot run (a note says why they have no rows)
    unavailable = [impl.name for impl in torch_impls] + [CPU_BUILD + row for row in CPU_BUILD_ROWS]
    status = None
    if with_cpu_build:
        from andrea_cli.backends.cpu import CpuBackend

        status = CpuBackend(kernel_path).available()
        if status.ok:
            impls += [make(kernel_path, timeout, CPU_BUILD + row) for row, make in CPU_BUILD_ROWS.items()]
            notes.append(f"cpu_build_fused* (the fused kernels, each tensor-core kernel by name, the backward) is the "
                         f"kernel file compiled for the CPU, CPU-build figures: a correctness tool, not a speed path "
                         f"(run once, only up to T={CPU_BUILD_MAX_T})")
        else:
            notes.append(f"the CPU build of the kernels not measured: {status.reason}")
    impls = select_impls(impls, only, "numpy", "cpu", [*unavailable, DECODE_ROWS])
    side = Side("cpu", cpu_device_name(), pinned_timer(blas_threads), available_memory_bytes)
    result = run_sweep(side, impls, Ts=Ts, d_ks=d_ks,
                       masks=masks, H=H, warmup=warmup, repeats=repeats, baseline="numpy",
                       progress=progress)
    if not only or DECODE_ROWS in only:
        if status is not None and status.ok:
            from andrea_cli.backends.cpu import CpuBackend
            from andrea_cli.bench.decode import bench_decode

            result.decode, why = bench_decode(CpuBackend(kernel_path, timeout=timeout).device(), side.timer,
                                              lengths=Ts, d_ks=d_ks, H=H, warmup=0, repeats=1, hbm_gbs=None,
                                              speed_path=False, progress=progress)
            notes += [f"decode rows: one step of generation on the CPU build at cache lengths "
                      f"{', '.join(map(str, Ts))} (run once): CPU-build figures, not a speed path; "
                      "% of HBM: no GPU", *why]
        else:
            notes.append("decode rows not measured: they run the kernels' CPU build (--no-cpu-build, or no compiler)")
    result.notes = notes + result.notes
    result.threads = threads_seen(blas_threads)
    if not only or any(name.startswith("torch_sdpa") for name in only):
        result.torch = environment
    return result
