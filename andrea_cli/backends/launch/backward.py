"""Launch the kernel file's backward pass: staged (dv, dp, ds, dq, dk, after the staged forward
that gives P) or fused (the forward writing its row logsumexp, then delta, dkdv, dq). Drives
cupy or the CPU build through the same `KernelDevice` as the forward launchers."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from andrea_cli.backends.launch.fused import FUSED_KEYS, ROWS_PER_BLOCK, check_fused_shape, fused_variants, shared_bytes
from andrea_cli.backends.launch.device import KernelDevice, NoClock, Transfers, cdiv, timed_runs
from andrea_cli.backends.launch.staged import (AV2_TILE, DEFAULT_PLAN, SCORES2_TILE, TILE, LaunchPlan,
                                               allocate_stages, launch_stages)
from andrea_cli.errors import AndreaError
from andrea_cli.masks import MaskSpec
from andrea_cli.reference import scale_for

BACKWARD_STAGES = ("dv", "dp", "ds", "dq", "dk")
FUSED_BACKWARD_STAGES = ("delta", "dkdv", "dq")
FUSED_BWD_ROWS = 8  # must match FUSED_BWD_ROWS in cuda/microgpt_cuda.cu: the dkdv kernel's block
DS_ROWS_PER_BLOCK = 4  # warps (rows) per block of ds_kernel1 and the delta kernel
LSE_VARIANTS = (1, 2)  # the fused forwards that also write the logsumexp: attention_fused_lse_kernel1, 2


def lse_variants(d_k: int, d_v: int) -> list[int]:
    """The forwards-with-logsumexp that take these widths (kernel1 and kernel2's rules)."""
    return [v for v in fused_variants(d_k, d_v) if v in LSE_VARIANTS]


def default_lse_variant(d_k: int, d_v: int) -> int:
    """The forward the fused backward runs after: the fastest that also writes the logsumexp
    (not default_variant's kernel3, which has no logsumexp twin)."""
    return max(lse_variants(d_k, d_v))


@dataclass
class BackwardOutputs:
    dq: np.ndarray  # (H, T, d_k)
    dk: np.ndarray  # (H, T, d_k)
    dv: np.ndarray  # (H, T, d_v)
    timings_ms: dict[str, float]  # "forward" (what the backward needs of it), each stage, "total"
    d_weights: np.ndarray | None = None  # dP (H, T, T); None on the fused path, which never builds it
    d_scores: np.ndarray | None = None  # dS (H, T, T); likewise
    lse: np.ndarray | None = None  # (H, T) the fused forward's row logsumexp, on the fused path
    weights: np.ndarray | None = None  # P (H, T, T), the staged forward's, that the staged backward read
    output: np.ndarray | None = None  # O (H, T, d_v), the forward's output (the layer's W_O needs it)
    transfer_ms: dict[str, float] = field(default_factory=dict)
    load_ms: float = 0.0


def dkdv_shared_bytes(d_k: int, d_v: int) -> int:
    """k_s, v_s (32, odd strides) + q_s, dO_s (8 rows) + P and dS of 8 rows × 32 keys, float32.
    43,264 bytes at d = 128, under the 48 KiB every GPU gives without an opt-in."""
    rows = FUSED_BWD_ROWS
    return 4 * (FUSED_KEYS * ((d_k | 1) + (d_v | 1)) + rows * (d_k + d_v) + 2 * rows * FUSED_KEYS)


def dq_shared_bytes(d_k: int, d_v: int, rows: int = ROWS_PER_BLOCK) -> int:
    return 4 * (rows * (d_k + d_v) + FUSED_KEYS * ((d_k | 1) + (d_v | 1)))


def _float32(*arrays) -> list[np.ndarray]:
    return [np.ascontiguousarray(a, dtype=np.float32) for a in arrays]


def launch_staged_backward(dev: KernelDevice, weights, q, k, v, d_out, dp, ds, dq, dk, dv, *, T: int,
                           d_k: int, d_v: int, H: int, mask: MaskSpec, scaled: bool, clock=None,
                           gemm_variant: int = DEFAULT_PLAN.gemm_variant) -> None:
    """One launch per backward stage on arrays already on the device (bench times exactly this).
    gemm_variant: dv, dp, dq and dk's kernel, as the forward's plan picks scores and av's (1: one
    output per thread; 2: the register-tiled 8x8 per thread)."""
    clock = clock or NoClock()
    i32, f32 = np.int32, np.float32
    scale = f32(scale_for(d_k, scaled))
    mask_args = mask.kernel_args()
    rows = DS_ROWS_PER_BLOCK
    n = gemm_variant
    if n == 2:  # 64x64 outputs per block of 64 threads (av_kernel2's tile); dP 128x128 per 256
        def width_grid(width: int):
            return (cdiv(width, AV2_TILE), cdiv(T, AV2_TILE), H), (64, 1, 1)
        dp_grid, dp_block = (cdiv(T, SCORES2_TILE), cdiv(T, SCORES2_TILE), H), (256, 1, 1)
    else:  # 16x16 outputs per block, one per thread
        def width_grid(width: int):
            return (cdiv(width, TILE), cdiv(T, TILE), H), (TILE, TILE, 1)
        dp_grid, dp_block = (cdiv(T, TILE), cdiv(T, TILE), H), (TILE, TILE, 1)

    clock.start("dv")
    dev.get_function(f"dv_kernel{n}")(*width_grid(d_v), (weights, d_out, dv, i32(T), i32(d_v), *mask_args))
    clock.stop("dv")
    clock.start("dp")
    dev.get_function(f"dp_kernel{n}")(dp_grid, dp_block, (d_out, v, dp, i32(T), i32(d_v)))
    clock.stop("dp")
    clock.start("ds")
    dev.get_function("ds_kernel1")((cdiv(T, rows), 1, H), (32, rows, 1), (weights, dp, ds, i32(T)))
    clock.stop("ds")
    clock.start("dq")
    dev.get_function(f"dq_kernel{n}")(*width_grid(d_k), (ds, k, dq, i32(T), i32(d_k), scale, *mask_args))
    clock.stop("dq")
    clock.start("dk")
    dev.get_function(f"dk_kernel{n}")(*width_grid(d_k), (ds, q, dk, i32(T), i32(d_k), scale, *mask_args))
    clock.stop("dk")


def run_staged_backward(dev: KernelDevice, q, k, v, d_out, *, mask: MaskSpec, scaled: bool,
                        plan: LaunchPlan = DEFAULT_PLAN) -> BackwardOutputs:
    """q, k: (H, T, d_k); v, d_out: (H, T, d_v). The staged forward runs first for P, with `plan`;
    the backward's products take its GEMM variant."""
    H, T, d_k = q.shape
    d_v = v.shape[-1]
    transfers = Transfers(dev)
    gq, gk, gv, gdo = transfers.upload(*_float32(q, k, v, d_out))

    buf = allocate_stages(dev, H, T, d_v, mask=mask, scaled=scaled)
    dp, ds = dev.empty((H, T, T)), dev.empty((H, T, T))
    dq, dk, dv = dev.empty((H, T, d_k)), dev.empty((H, T, d_k)), dev.empty((H, T, d_v))

    def launch(clock):
        launch_stages(dev, gq, gk, gv, buf, T=T, d_k=d_k, d_v=d_v, H=H, mask=mask, scaled=scaled, clock=clock,
                      plan=plan)
        launch_staged_backward(dev, buf.weights, gq, gk, gv, gdo, dp, ds, dq, dk, dv, T=T, d_k=d_k, d_v=d_v, H=H,
                               mask=mask, scaled=scaled, clock=clock, gemm_variant=plan.gemm_variant)

    stage_ms = timed_runs(dev, launch)
    timings = {"forward": sum(ms for name, ms in stage_ms.items() if name not in BACKWARD_STAGES)}
    timings.update({name: stage_ms[name] for name in BACKWARD_STAGES})
    timings["total"] = sum(timings.values())

    host = transfers.download(dq, dk, dv, dp, ds, buf.weights, buf.output)
    return BackwardOutputs(*host[:3], timings, d_weights=host[3], d_scores=host[4], weights=host[5],
                           output=host[6], transfer_ms=transfers.elapsed_ms())


def launch_delta(dev: KernelDevice, d_out, out, delta, *, T: int, d_v: int, H: int, clock) -> None:
    """delta_i = dO[i] · O[i], the rowsum term every fused backward (fp32 and bf16) starts from."""
    clock.start("delta")
    dev.get_function("attention_backward_delta_kernel1")(
        (cdiv(T, DS_ROWS_PER_BLOCK), 1, H), (32, DS_ROWS_PER_BLOCK, 1), (d_out, out, delta, np.int32(T), np.int32(d_v)))
    clock.stop("delta")


def launch_fused_backward(dev: KernelDevice, q, k, v, out, d_out, lse, delta, dq, dk, dv, *, T: int, d_k: int,
                          d_v: int, H: int, mask: MaskSpec, scaled: bool, clock=None, rows: int = ROWS_PER_BLOCK) -> None:
    """delta, dkdv, dq on arrays already on the device; out and lse from attention_fused_lse_kernel*."""
    clock = clock or NoClock()
    i32 = np.int32
    scale = np.float32(scale_for(d_k, scaled))
    mask_args = mask.kernel_args()
    launch_delta(dev, d_out, out, delta, T=T, d_v=d_v, H=H, clock=clock)
    clock.start("dkdv")
    dev.get_function("attention_backward_dkdv_kernel1")(
        (cdiv(T, FUSED_KEYS), 1, H), (32, FUSED_BWD_ROWS, 1),
        (q, k, v, d_out, lse, delta, dk, dv, i32(T), i32(d_k), i32(d_v), scale, *mask_args),
        shared_mem=dkdv_shared_bytes(d_k, d_v))
    clock.stop("dkdv")
    clock.start("dq")
    dev.get_function("attention_backward_dq_kernel1")(
        (cdiv(T, rows), 1, H), (32, rows, 1),
        (q, k, v, d_out, lse, delta, dq, i32(T), i32(d_k), i32(d_v), scale, *mask_args),
        shared_mem=dq_shared_bytes(d_k, d_v, rows))
    clock.stop("dq")


def launch_fused_lse(dev: KernelDevice, q, k, v, out, lse, *, T: int, d_k: int, d_v: int, H: int, mask: MaskSpec,
                     scaled: bool, variant: int, rows: int = ROWS_PER_BLOCK) -> None:
    scale = np.float32(scale_for(d_k, scaled))
    dev.get_function(f"attention_fused_lse_kernel{variant}")(
        (cdiv(T, rows), 1, H), (32, rows, 1),
        (q, k, v, out, lse, np.int32(T), np.int32(d_k), np.int32(d_v), scale, *mask.kernel_args()),
        shared_mem=shared_bytes(d_k, d_v, rows, variant))


def run_fused_backward(dev: KernelDevice, q, k, v, d_out, *, mask: MaskSpec, scaled: bool,
                       variant: int | None = None) -> BackwardOutputs:
    """The fused forward (with its logsumexp), then the fused backward; no (T, T) array anywhere."""
    H, T, d_k = q.shape
    d_v = v.shape[-1]
    check_fused_shape(d_k, d_v)
    variant = default_lse_variant(d_k, d_v) if variant is None else variant
    if variant not in lse_variants(d_k, d_v):
        raise AndreaError(f"attention_fused_lse_kernel{variant} needs d_k and d_v divisible by 4 (got {d_k}, {d_v})")
    transfers = Transfers(dev)
    gq, gk, gv, gdo = transfers.upload(*_float32(q, k, v, d_out))

    out, lse, delta = dev.empty((H, T, d_v)), dev.empty((H, T)), dev.empty((H, T))
    dq, dk, dv = dev.empty((H, T, d_k)), dev.empty((H, T, d_k)), dev.empty((H, T, d_v))

    def launch(clock):
        clock.start("forward")
        launch_fused_lse(dev, gq, gk, gv, out, lse, T=T, d_k=d_k, d_v=d_v, H=H, mask=mask, scaled=scaled,
                         variant=variant)
        clock.stop("forward")
        launch_fused_backward(dev, gq, gk, gv, out, gdo, lse, delta, dq, dk, dv, T=T, d_k=d_k, d_v=d_v, H=H,
                              mask=mask, scaled=scaled, clock=clock)

    stage_ms = timed_runs(dev, launch)
    timings = {name: stage_ms[name] for name in ("forward", *FUSED_BACKWARD_STAGES)}
    timings["total"] = sum(timings.values())
    host = transfers.download(dq, dk, dv, lse, out)
    return BackwardOutputs(*host[:3], timings, lse=host[3], output=host[4], transfer_ms=transfers.elapsed_ms())
