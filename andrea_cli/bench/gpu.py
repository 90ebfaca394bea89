"""The GPU side of `andrea bench`: the fused and staged kernels, cupy's cuBLAS path and torch SDPA,
timed with CUDA events and an L2 flush between repeats. cupy is imported only inside functions."""

from __future__ import annotations

from functools import partial

import sys

import numpy as np

from andrea_cli.backends.cuda import gpu_errors
from andrea_cli.bench.decode import DECODE_ROWS
from andrea_cli.bench.sweep import Impl, io_bytes, select_impls, tt_bytes
from andrea_cli.bench.torch_sdpa import torch_environment, torch_impl
from andrea_cli.masks import MaskSpec
from andrea_cli.scale import course_scale


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
        # launches are asynchronous: a fault surfaces at a synchronize, so all of it is guarded
        with gpu_errors("timing"):
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
    """variant None: what the launcher picks (kernel3 at d_k = 64 or 128, else kernel2 for widths
    divisible by 4, else kernel1), the row "fused"; else the row of the variant's label."""
    from andrea_cli.backends.launch.fused import FUSED, FUSED_MAX_D, WHY_MAX_D, launch_fused

    dev = backend.device()

    def prepare_on(dev, q, k, v, mask: MaskSpec):
        H, T, d_k = q.shape
        dq, dk, dv = (dev.to_device(a) for a in (q, k, v))
        out = dev.empty((H, T, d_k))

        def run():
            run.kernels = launch_fused(dev, dq, dk, dv, out, H, T, d_k, d_k, mask=mask, scale=course_scale(d_k), variant=variant)
            return out

        return run

    return Impl("fused" if variant is None else FUSED[variant].label, partial(prepare_on, dev), prepare_on=prepare_on, to_host=dev.to_host,
                max_d_k=FUSED_MAX_D, why_max_d_k=WHY_MAX_D)


def fused_bf16_gpu_impl(backend, variant: int | None = None, on_request: bool = False) -> Impl:
    """The tensor-core kernel on bf16 copies made before timing (torch SDPA in bf16 is timed the
    same way); the conversion itself is `attend --fused --precision bf16`'s to_bf16 stage.
    variant None: the device's default (kernel6 on sm_90, wgmma; kernel5 elsewhere), the row
    "fused_bf16"; 4 to 7: that kernel, the row of its label (fused7_bf16: kernel7, its K and V
    read through TMA tensor maps the launcher encodes before timing), skipped with the reason on
    a GPU without its instructions."""
    from andrea_cli.backends.launch.catalogue import why_it_cannot_run
    from andrea_cli.backends.launch.fused_bf16 import BF16_DIMS, BF16_KERNELS, convert_inputs, device_cc, launch_fused_bf16

    dev = backend.device()

    def prepare_on(dev, q, k, v, mask: MaskSpec):
        H, T, d_k = q.shape
        dq, dk, dv = (dev.to_device(a) for a in (q, k, v))
        qb, kb, vb = convert_inputs(dev, dq, dk, dv, (H, T, d_k), course_scale(d_k))
        out = dev.empty((H, T, d_k))

        def run():
            run.kernels = launch_fused_bf16(dev, qb, kb, vb, out, H, T, d_k, mask=mask, variant=variant)
            return out

        return run

    cannot_run = "" if variant is None else why_it_cannot_run(BF16_KERNELS[variant], device_cc(dev))
    return Impl("fused_bf16" if variant is None else BF16_KERNELS[variant].label, partial(prepare_on, dev),
                prepare_on=prepare_on, to_host=dev.to_host, only_d_ks=BF16_DIMS, precision="bf16",
                peer="torch_sdpa_bf16", peak_bytes=lambda H, T, d_k, mask: io_bytes(H, T, d_k, 5.5),
                on_request=on_request, cannot_run=cannot_run)


def bf16_variant_impls(backend) -> list[Impl]:
    """Every tensor-core kernel's own row, newest first (fused7_bf16 .. fused4_bf16), beside the
    default's (fused_bf16): the one the default runs on this device only on request (--impl), its
    figure being fused_bf16's."""
    from andrea_cli.backends.launch.fused_bf16 import BF16_KERNELS, default_bf16_variant, device_cc

    default = default_bf16_variant(device_cc(backend.device()))
    return [fused_bf16_gpu_impl(backend, v, on_request=v == default) for v in sorted(BF16_KERNELS, reverse=True)]


def staged_gpu_impl(backend, plan=None) -> Impl:
    """The kernel file's five staged kernels, one launch each, the T×T matrices in memory.
    plan None: the default (the register-tiled GEMMs, softmax_kernel3); else named after its
    GEMM variant (staged_kernel1: the one-output-per-thread kernels)."""
    from andrea_cli.backends.launch.staged import DEFAULT_PLAN, allocate_stages, launch_stages

    dev = backend.device()

    def prepare_on(dev, q, k, v, mask: MaskSpec):
        H, T, d_k = q.shape
        dq, dk, dv = (dev.to_device(a) for a in (q, k, v))
        buf = allocate_stages(dev, H, T, d_k, mask=mask, scaled=True)

        def run():
            run.kernels = launch_stages(dev, dq, dk, dv, buf, T=T, d_k=d_k, d_v=d_k, H=H, mask=mask, scale=course_scale(d_k),
                          plan=plan or DEFAULT_PLAN)
            return buf.output

        return run

    # scores, scaled and weights, and masked when causal: (H, T, T) each; Q, K, V and the output
    return Impl("staged" if plan is None else f"staged_kernel{plan.gemm_variant}", partial(prepare_on, dev), prepare_on=prepare_on, to_host=dev.to_host,
                peak_bytes=lambda H, T, d_k, mask: tt_bytes(H, T, 3 + mask.hides_future) + io_bytes(H, T, d_k))


def cupy_impl() -> Impl:
    """cuBLAS matmuls and cupy's elementwise/reduction kernels: the T×T matrices in memory."""

    def prepare(q, k, v, mask: MaskSpec):
        import cupy

        T, d_k = q.shape[1], q.shape[2]
        dq, dk, dv = (cupy.asarray(a) for a in (q, k, v))
        scale = np.float32(course_scale(d_k).factor)
        hidden = cupy.asarray(~mask.visible(T)) if mask.hides_future else None

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
                peak_bytes=lambda H, T, d_k, mask: tt_bytes(H, T, 3) + (T * T if mask.hides_future else 0)
                + io_bytes(H, T, d_k, 5))


def bench_gpu(kernel_path, *, Ts, d_ks, masks, H, warmup, repeats, progress, only=None):
    """only: --impl's names (None: every implementation but those run on request)."""
    import cupy

    from andrea_cli.backends.cuda import CudaBackend
    from andrea_cli.backends.launch.catalogue import earlier_variants
    from andrea_cli.backends.launch.staged import KERNEL1_PLAN
    from andrea_cli.bench.sweep import Side, run_sweep
    from andrea_cli.bench.roofline import peak_from_properties

    backend = CudaBackend(kernel_path)
    props = gpu_properties()
    peak = peak_from_properties(props)
    from andrea_cli.bench.backward import fused_backward_impl, fused_bf16_backward_impl, staged_backward_impl
    from andrea_cli.bench.torch_sdpa import torch_backward_impl

    # the defaults, then the older steps of each progression (the same run gives the ratios)
    impls = [fused_gpu_impl(backend), *(fused_gpu_impl(backend, v) for v in earlier_variants("fused", "fused")),
             fused_bf16_gpu_impl(backend), *bf16_variant_impls(backend),
             staged_gpu_impl(backend), staged_gpu_impl(backend, plan=KERNEL1_PLAN),
             cupy_impl(), fused_backward_impl(backend), staged_backward_impl(backend),
             staged_backward_impl(backend, gemm_variant=1),
             fused_bf16_backward_impl(backend)]
    notes = [f"GPU side: CUDA events, L2 ({props['l2CacheSize'] / 2**20:.0f} MiB) flushed before every repeat; "
             f"peak {peak.peak_tflops:.1f} FP32 TFLOP/s = {peak.sms} SMs × {peak.lanes_per_sm} lanes × 2 × "
             f"{peak.clock_ghz:.2f} GHz; memory {peak.peak_gbs:.0f} GB/s",
             "*_backward rows: dQ, dK, dV from dO after an untimed forward; TFLOP/s by FlashAttention's convention, "
             "2.5 × the forward's FLOPs",
             "bf16 rows: % of the dense bf16 tensor-core peak ("
             + (f"{peak.bf16_tflops:.0f} TFLOP/s" if peak.bf16_tflops else "unknown for this device") + "); "
             "vs peer = torch_sdpa_bf16 ms / fused_bf16 ms (> 1: faster; the backward: "
             "torch_sdpa_bf16_backward's / fused_bf16_backward's)"]
    # the bf16 kernel's targets name SDPA's FlashAttention backend, with cuDNN's beside it, and
    # the default's own choice (its `chose` per point)
    torch_impls = [torch_impl("cuda"), torch_impl("cuda", "bf16"), torch_impl("cuda", "bf16", "flash"),
                   torch_impl("cuda", "bf16", "cudnn"), torch_backward_impl("cuda"), torch_backward_impl("cuda", "bf16")]
    environment = torch_environment("cuda")
    reason = environment.get("reason")
    impls = select_impls(impls + torch_impls, only, "fused", "gpu", [DECODE_ROWS])
    if reason is not None:
        impls = [impl for impl in impls if not impl.name.startswith("torch_sdpa")]
        notes.append(f"torch SDPA not measured: {reason}")
    side = Side("gpu", backend.device_name(), event_timer_with_l2_flush(props["l2CacheSize"]),
                free_bytes=lambda: cupy.cuda.runtime.memGetInfo()[0], memory="GPU memory",
                release=release_gpu_memory, out_of_memory=gpu_out_of_memory())
    result = run_sweep(side, impls, Ts=Ts, d_ks=d_ks, masks=masks, H=H, warmup=warmup, repeats=repeats,
                       baseline="fused", peak=peak, progress=progress)
    if not only or DECODE_ROWS in only:
        from andrea_cli.bench.decode import bench_decode

        result.decode, why = bench_decode(backend.device(), side.timer, lengths=Ts, d_ks=d_ks, H=H, warmup=warmup,
                                          repeats=repeats, hbm_gbs=peak.peak_gbs, speed_path=True, progress=progress)
        notes += [f"decode rows: one step of generation at cache lengths {', '.join(map(str, Ts))}, {H} heads; "
                  f"GB/s = cache bytes read / the decode kernel's time, against HBM {peak.peak_gbs:.0f} GB/s", *why]
    result.notes = notes + result.notes
    if not only or any(name.startswith("torch_sdpa") for name in only):
        result.torch = environment
    # each kernel row's static bound for this GPU's model at the row's shape, beside its figure
    from andrea_cli.bench.bound.measured import attach_bounds

    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    attach_bounds(result, impls, name, int(props["multiProcessorCount"]), kernel_path)
    return result
