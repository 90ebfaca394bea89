"""The implementations `andrea bench` times, and each side's clock. cupy and torch are imported
only inside the functions that use them."""

from __future__ import annotations

import math
import os
import platform
import sys
import time

import numpy as np

from andrea_cli.bench import Impl, io_bytes, tt_bytes

CPU_BUILD_MAX_T = 128  # the CPU build runs one fiber per CUDA thread: correctness, not speed
WHY_MAX_D_K = "the fused kernel keeps d_k / 32 columns per lane in registers: d_k <= {}"


def numpy_peak_bytes(H, T, d_k, causal):
    """matmul's result and `* scale`'s copy of it live together; causal adds the (T, T) boolean
    and the two int64 index arrays `s[:, hidden]` makes of it."""
    return tt_bytes(H, T, 2) + (10.0 * T * T if causal else 0) + io_bytes(H, T, d_k)


def torch_peak_bytes(H, T, d_k, causal):
    """3-D inputs send SDPA to its math backend: scores, then _safe_softmax's softmax, -inf test
    (bool), zeros and where: 18 bytes per score; causal adds a (T, T) bool and float mask."""
    return 18.0 * H * T * T + (5.0 * T * T if causal else 0) + io_bytes(H, T, d_k, 6)


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

    return Impl("numpy", prepare, peak_bytes=numpy_peak_bytes)


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

        # (1, H, T, d): the batch-and-heads layout SDPA's fused (flash / memory-efficient)
        # kernels expect; with 3-D inputs it may fall back to its unfused math path
        tq, tk, tv = (torch.as_tensor(a, device=device)[None] for a in (q, k, v))

        def run():
            with torch.no_grad():
                return F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)

        return run

    return Impl("torch_sdpa", prepare, to_host=lambda t: t[0].cpu().numpy(), peak_bytes=torch_peak_bytes)


def cpu_build_impl(kernel_path) -> Impl:
    """attention_fused_kernel1 through the CPU build: reported, never a speed figure."""
    from andrea_cli.backends.cpu import CpuBackend
    from andrea_cli.backends.fused import FUSED_MAX_D, launch_fused
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
                why_max_T=f"the CPU build is not a speed path; run only up to T={CPU_BUILD_MAX_T}",
                max_d_k=FUSED_MAX_D, why_max_d_k=WHY_MAX_D_K.format(FUSED_MAX_D))


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


def release_gpu_memory() -> None:
    """Give the blocks cupy's pool (and torch's caching allocator) keep back to the device, so the
    next implementation finds the memory the budget counted on."""
    import cupy

    cupy.get_default_memory_pool().free_all_blocks()
    if "torch" in sys.modules:
        sys.modules["torch"].cuda.empty_cache()


def gpu_out_of_memory() -> tuple[type[BaseException], ...]:
    """cupy's OutOfMemoryError is a MemoryError; torch's is a RuntimeError of its own."""
    torch = sys.modules.get("torch")
    oom = getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None)
    return (MemoryError,) if oom is None else (MemoryError, oom)


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
    from andrea_cli.backends.fused import FUSED_MAX_D, launch_fused
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

    return Impl("fused" if variant is None else f"fused_kernel{variant}", prepare, to_host=dev.to_host,
                max_d_k=FUSED_MAX_D, why_max_d_k=WHY_MAX_D_K.format(FUSED_MAX_D))


def staged_gpu_impl(backend) -> Impl:
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

    # scores, scaled and weights, and masked when causal: (H, T, T) each; Q, K, V and the output
    return Impl("staged", prepare, to_host=dev.to_host,
                peak_bytes=lambda H, T, d_k, causal: tt_bytes(H, T, 3 + causal) + io_bytes(H, T, d_k))


def cupy_impl() -> Impl:
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

    # at `exp(s - max)`: s, s - max and its exp, (H, T, T) each; causal adds the (T, T) boolean
    return Impl("cupy", prepare, to_host=cupy.asnumpy,
                peak_bytes=lambda H, T, d_k, causal: tt_bytes(H, T, 3) + (T * T if causal else 0)
                + io_bytes(H, T, d_k, 5))


# ------------------------------------------------------------------------------------------------
# The two sweeps

def bench_cpu(kernel_path, *, Ts, d_ks, causals, H, warmup, repeats, progress, with_cpu_build=True):
    from andrea_cli.bench import Side, run_sweep
    from andrea_cli.inputs import available_memory_bytes

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
    side = Side("cpu", cpu_device_name(), perf_counter_timer, available_memory_bytes)
    result = run_sweep(side, impls, Ts=Ts, d_ks=d_ks,
                       causals=causals, H=H, warmup=warmup, repeats=repeats, baseline="numpy",
                       progress=progress)
    result.notes = notes + result.notes
    return result


def bench_gpu(kernel_path, *, Ts, d_ks, causals, H, warmup, repeats, progress):
    import cupy

    from andrea_cli.backends.cuda import CudaBackend
    from andrea_cli.bench import Side, peak_from_properties, run_sweep

    backend = CudaBackend(kernel_path)
    props = gpu_properties()
    peak = peak_from_properties(props)
    impls = [fused_gpu_impl(backend), fused_gpu_impl(backend, variant=1), staged_gpu_impl(backend), cupy_impl()]
    notes = [f"GPU side: CUDA events, L2 ({props['l2CacheSize'] / 2**20:.0f} MiB) flushed before every repeat; "
             f"peak {peak.peak_tflops:.1f} FP32 TFLOP/s = {peak.sms} SMs × {peak.lanes_per_sm} lanes × 2 × "
             f"{peak.clock_ghz:.2f} GHz; memory {peak.peak_gbs:.0f} GB/s"]
    reason = torch_reason()
    if reason is None:
        impls.append(torch_impl("cuda"))
    else:
        notes.append(f"torch SDPA not measured: {reason}")
    side = Side("gpu", backend.device_name(), event_timer_with_l2_flush(props["l2CacheSize"]),
                free_bytes=lambda: cupy.cuda.runtime.memGetInfo()[0], memory="GPU memory",
                release=release_gpu_memory, out_of_memory=gpu_out_of_memory())
    result = run_sweep(side, impls, Ts=Ts, d_ks=d_ks, causals=causals, H=H, warmup=warmup, repeats=repeats,
                       baseline="fused", peak=peak, progress=progress)
    result.notes = notes + result.notes
    return result
