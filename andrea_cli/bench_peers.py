"""The implementations `andrea bench` times, and each side's clock. cupy and torch are imported
only inside the functions that use them."""

from __future__ import annotations

import math
import os
import platform
import time

import numpy as np

from andrea_cli.bench import Impl

CPU_BUILD_MAX_T = 128  # the CPU build runs one fiber per CUDA thread: correctness, not speed


# ------------------------------------------------------------------------------------------------
# CPU side

def perf_counter_timer(run, warmup: int, repeats: int) -> list[float]:
    for _ in range(warmup):
        run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1e3)
    return times


def numpy_impl() -> Impl:
    """The equation in float32 NumPy (BLAS matmuls): the CPU speed baseline."""

    def prepare(q, k, v, causal):
        T, d_k = q.shape[1], q.shape[2]
        scale = np.float32(1.0 / math.sqrt(d_k))
        hidden = np.triu(np.ones((T, T), dtype=bool), 1) if causal else None

        def run():
            s = np.matmul(q, k.transpose(0, 2, 1)) * scale  # (H, T, T)
            if hidden is not None:
                s[:, hidden] = -np.inf
            s -= s.max(axis=-1, keepdims=True)
            np.exp(s, out=s)
            s /= s.sum(axis=-1, keepdims=True)
            return np.matmul(s, v)

        return run

    return Impl("numpy", prepare)


def torch_reason() -> str | None:
    try:
        import torch  # noqa: F401
    except Exception as exc:
        return f"torch is not importable ({type(exc).__name__})"
    return None


def torch_impl(device: str) -> Impl:
    def prepare(q, k, v, causal):
        import torch
        import torch.nn.functional as F

        tq, tk, tv = (torch.as_tensor(a, device=device) for a in (q, k, v))

        def run():
            with torch.no_grad():
                return F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)

        return run

    return Impl("torch_sdpa", prepare, to_host=lambda t: t.cpu().numpy())


def cpu_build_impl(kernel_path) -> Impl:
    """attention_fused_kernel1 through the CPU build: reported, never a speed figure."""
    from andrea_cli.backends.cpu import CpuBackend
    from andrea_cli.backends.fused import launch_fused
    from andrea_cli.masks import MaskSpec

    device = CpuBackend(kernel_path).device()

    def prepare(q, k, v, causal):
        H, T, d_k = q.shape
        out = np.empty((H, T, d_k), dtype=np.float32)
        mask = MaskSpec("causal" if causal else "none")

        def run():
            launch_fused(device, q, k, v, out, H, T, d_k, d_k, mask=mask, scaled=True)
            return out

        return run

    return Impl("cpu_build_fused", prepare, speed_path=False, max_T=CPU_BUILD_MAX_T, repeats=1,
                why_max_T=f"the CPU build is not a speed path; run only up to T={CPU_BUILD_MAX_T}")


def cpu_device_name() -> str:
    return f"CPU {platform.machine()} ({os.cpu_count()} logical cores), NumPy {np.__version__}"


# ------------------------------------------------------------------------------------------------
# GPU side

def gpu_properties() -> dict:
    """cudaDeviceProp, with the clocks read as attributes where the runtime's struct no longer
    carries them (CUDA 13 dropped clockRate and memoryClockRate from cudaDeviceProp)."""
    import cupy

    dev = cupy.cuda.Device().id
    props = dict(cupy.cuda.runtime.getDeviceProperties(dev))
    attrs = {"clockRate": 13, "memoryClockRate": 36, "memoryBusWidth": 37, "l2CacheSize": 38}
    for key, attr in attrs.items():
        if not props.get(key):
            props[key] = cupy.cuda.runtime.deviceGetAttribute(attr, dev)
    return props


def event_timer_with_l2_flush(l2_bytes: int):
    """CUDA events around each repeat; before it, a write over twice the L2 size, so every repeat
    reads its inputs from memory as a cold call in a real model would."""
    import cupy

    flush = cupy.empty(max(2 * l2_bytes, 1 << 20) // 4, dtype=cupy.float32)

    def timer(run, warmup: int, repeats: int) -> list[float]:
        for _ in range(warmup):
            run()
        times = []
        for _ in range(repeats):
            flush.fill(0)
            begin, end = cupy.cuda.Event(), cupy.cuda.Event()
            begin.record()
            run()
            end.record()
            end.synchronize()
            times.append(cupy.cuda.get_elapsed_time(begin, end))
        return times

    return timer


def fused_gpu_impl(backend, variant: int | None = None) -> Impl:
    """variant None: what the launcher picks (kernel2 for widths divisible by 4)."""
    from andrea_cli.backends.fused import launch_fused
    from andrea_cli.masks import MaskSpec

    dev = backend.device()

    def prepare(q, k, v, causal):
        H, T, d_k = q.shape
        dq, dk, dv = (dev.to_device(a) for a in (q, k, v))
        out = dev.empty((H, T, d_k))
        mask = MaskSpec("causal" if causal else "none")

        def run():
            launch_fused(dev, dq, dk, dv, out, H, T, d_k, d_k, mask=mask, scaled=True, variant=variant)
            return out

        return run

    return Impl("fused" if variant is None else f"fused_kernel{variant}", prepare, to_host=dev.to_host)


def staged_gpu_impl(backend, max_T: int) -> Impl:
    """The kernel file's five staged kernels, one launch each, the T×T matrices in memory."""
    from andrea_cli.backends.staged import allocate_stages, launch_stages
    from andrea_cli.masks import MaskSpec

    dev = backend.device()

    def prepare(q, k, v, causal):
        H, T, d_k = q.shape
        dq, dk, dv = (dev.to_device(a) for a in (q, k, v))
        mask = MaskSpec("causal" if causal else "none")
        buf = allocate_stages(dev, H, T, d_k, mask=mask, scaled=True)

        def run():
            launch_stages(dev, dq, dk, dv, buf, T=T, d_k=d_k, d_v=d_k, H=H, mask=mask, scaled=True)
            return buf.output

        return run

    return Impl("staged", prepare, to_host=dev.to_host, max_T=max_T,
                why_max_T="the staged kernels' four (H, T, T) arrays would not fit in GPU memory")


def cupy_impl(max_T: int) -> Impl:
    """cuBLAS matmuls and cupy's elementwise/reduction kernels: the T×T matrices in memory."""

    def prepare(q, k, v, causal):
        import cupy

        T, d_k = q.shape[1], q.shape[2]
        dq, dk, dv = (cupy.asarray(a) for a in (q, k, v))
        scale = np.float32(1.0 / math.sqrt(d_k))
        hidden = cupy.triu(cupy.ones((T, T), dtype=bool), 1) if causal else None

        def run():
            s = cupy.matmul(dq, dk.transpose(0, 2, 1)) * scale  # (H, T, T)
            if hidden is not None:
                s = cupy.where(hidden, cupy.float32(-np.inf), s)
            s = cupy.exp(s - s.max(axis=-1, keepdims=True))
            return cupy.matmul(s / s.sum(axis=-1, keepdims=True), dv)

        return run

    import cupy

    return Impl("cupy", prepare, to_host=cupy.asnumpy, max_T=max_T,
                why_max_T="the T×T matrices would not fit in GPU memory")


# ------------------------------------------------------------------------------------------------
# The two sweeps

def bench_cpu(kernel_path, *, Ts, d_ks, causals, H, warmup, repeats, progress, with_cpu_build=True):
    from andrea_cli.bench import run_sweep

    impls = [numpy_impl()]
    notes = ["CPU side: wall-clock medians (time.perf_counter); no peak or roofline (no device properties to compute them from)"]
    reason = torch_reason()
    if reason is None:
        impls.append(torch_impl("cpu"))
    else:
        notes.append(f"torch SDPA (CPU) not measured: {reason}")
    if with_cpu_build:
        from andrea_cli.backends.cpu import CpuBackend

        status = CpuBackend(kernel_path).available()
        if status.ok:
            impls.append(cpu_build_impl(kernel_path))
            notes.append(f"cpu_build_fused is the kernel file compiled for the CPU: a correctness tool, "
                         f"not a speed path (run once, only up to T={CPU_BUILD_MAX_T})")
        else:
            notes.append(f"the CPU build of the kernels not measured: {status.reason}")
    result = run_sweep("cpu", cpu_device_name(), impls, perf_counter_timer, Ts=Ts, d_ks=d_ks,
                       causals=causals, H=H, warmup=warmup, repeats=repeats, baseline="numpy",
                       progress=progress)
    result.notes = notes + result.notes
    return result


def bench_gpu(kernel_path, *, Ts, d_ks, causals, H, warmup, repeats, progress):
    import cupy

    from andrea_cli.backends.cuda import CudaBackend
    from andrea_cli.bench import peak_from_properties, run_sweep

    backend = CudaBackend(kernel_path)
    props = gpu_properties()
    peak = peak_from_properties(props)
    free, _ = cupy.cuda.runtime.memGetInfo()
    cupy_max_T = int(math.sqrt(0.6 * free / (16 * H)))  # about four (H, T, T) float32 arrays live
    impls = [fused_gpu_impl(backend), fused_gpu_impl(backend, variant=1), staged_gpu_impl(backend, cupy_max_T),
             cupy_impl(cupy_max_T)]
    notes = [f"GPU side: CUDA events, L2 ({props['l2CacheSize'] / 2**20:.0f} MiB) flushed before every repeat; "
             f"peak {peak.peak_tflops:.1f} FP32 TFLOP/s = {peak.sms} SMs × {peak.lanes_per_sm} lanes × 2 × "
             f"{peak.clock_ghz:.2f} GHz; memory {peak.peak_gbs:.0f} GB/s"]
    reason = torch_reason()
    if reason is None:
        impls.append(torch_impl("cuda"))
    else:
        notes.append(f"torch SDPA not measured: {reason}")
    result = run_sweep("gpu", backend.device_name(), impls, event_timer_with_l2_flush(props["l2CacheSize"]),
                       Ts=Ts, d_ks=d_ks, causals=causals, H=H, warmup=warmup, repeats=repeats,
                       baseline="fused", peak=peak, progress=progress)
    result.notes = notes + result.notes
    return result
