"""Launch the kernel file's backward pass: staged (dv, dp, ds, dq, dk, after the staged forward
that gives P) or fused (the forward writing its row logsumexp, then delta, dkdv, dq). Drives
cupy or the CPU build through the same `KernelDevice` as the forward launchers."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from andrea_cli.backends.launch.catalogue import family, kernel
from andrea_cli.backends.launch.fused import ROWS_PER_BLOCK, check_fused_shape, why_not
from andrea_cli.backends.launch.device import KernelDevice, NoClock, Transfers, cdiv, timed_runs
from andrea_cli.backends.launch.shapes import check_shapes
from andrea_cli.backends.launch.staged import DEFAULT_PLAN, LaunchPlan, allocate_stages, launch_stages
from andrea_cli.errors import AndreaError
from andrea_cli.masks import MaskSpec
from andrea_cli.scale import Scale

BACKWARD_STAGES = ("dv", "dp", "ds", "dq", "dk")
FUSED_BACKWARD_STAGES = ("delta", "dkdv", "dq")
STAGED = {stage: family("staged_backward", stage) for stage in BACKWARD_STAGES}  # {stage: {variant: row}}
LSE = family("fused_backward", "forward")  # the fused forwards that also write the logsumexp: lse_kernel1, 2
DELTA, DKDV, DQ = (kernel("fused_backward", stage) for stage in FUSED_BACKWARD_STAGES)
DS_ROWS_PER_BLOCK = STAGED["ds"][1].block_rows()  # warps (rows) per block of ds_kernel1 and the delta kernel


def lse_variants(d_k: int, d_v: int) -> list[int]:
    """The forwards-with-logsumexp that take these widths (kernel1 and kernel2's rules)."""
    return [variant for variant, k in LSE.items() if k.takes(d_k, d_v)]


def default_lse_variant(d_k: int, d_v: int) -> int:
    """The forward the fused backward runs after: the fastest that also writes the logsumexp
    (not default_variant's kernel3, which has no logsumexp twin)."""
    return max(lse_variants(d_k, d_v))


@dataclass
class BackwardOutputs:
    dq: np.ndarray  # (H, L, d_k)
    dk: np.ndarray  # (H_kv, S, d_k), summed over the query heads that read each K/V head
    dv: np.ndarray  # (H_kv, S, d_v)
    timings_ms: dict[str, float]  # "forward" (what the backward needs of it), each stage, "total"
    d_weights: np.ndarray | None = None  # dP (H, T, T); None on the fused path, which never builds it
    d_scores: np.ndarray | None = None  # dS (H, T, T); likewise
    lse: np.ndarray | None = None  # (H, T) the fused forward's row logsumexp, on the fused path
    weights: np.ndarray | None = None  # P (H, T, T), the staged forward's, that the staged backward read
    output: np.ndarray | None = None  # O (H, T, d_v), the forward's output (the layer's W_O needs it)
    transfer_ms: dict[str, float] = field(default_factory=dict)
    load_ms: float = 0.0
    kernels: dict[str, str] = field(default_factory=dict)  # {stage: the kernel it ran}; none on the NumPy path


def dkdv_shared_bytes(d_k: int, d_v: int) -> int:
    """k_s, v_s (32, odd strides) + q_s, dO_s (8 rows) + P and dS of 8 rows × 32 keys, float32.
    43,264 bytes at d = 128, under the 48 KiB every GPU gives without an opt-in."""
    return DKDV.shared_bytes(d_k, d_v)


def dq_shared_bytes(d_k: int, d_v: int, rows: int = ROWS_PER_BLOCK) -> int:
    return DQ.shared_bytes(d_k, d_v, rows=rows)


def _float32(*arrays) -> list[np.ndarray]:
    return [np.ascontiguousarray(a, dtype=np.float32) for a in arrays]


def launch_staged_backward(dev: KernelDevice, weights, q, k, v, d_out, dp, ds, dq, dk, dv, *, T: int,
                           d_k: int, d_v: int, H: int, mask: MaskSpec, scale: Scale, clock=None,
                           gemm_variant: int = DEFAULT_PLAN.gemm_variant, S: int | None = None,
                           H_kv: int | None = None) -> dict[str, str]:
    """One launch per backward stage on arrays already on the device (bench times exactly this);
    returns {stage: the kernel it ran}. gemm_variant: dv, dp, dq and dk's kernel, as the forward's
    plan picks scores and av's (1: one output per thread, 16x16 per block; 2: the register-tiled
    8x8 per thread, 64x64 per block of 64, dP 128x128 per 256). T: the query rows (L); S: the
    keys (T unless given); H query heads over H_kv K/V heads (H unless given): dK and dV are
    (H_kv, S, d), each summed over its group inside the kernel (no atomics)."""
    clock = clock or NoClock()
    i32, f32 = np.int32, np.float32
    factor = f32(scale.factor)
    L, S = T, T if S is None else S
    H_kv = H if H_kv is None else H_kv
    group = H // H_kv
    mask_args = mask.kernel_args(L, S, heads=H)  # the whole Mask: right and sinks move the ranges
    rows = DS_ROWS_PER_BLOCK
    ran = {stage: STAGED[stage][1 if stage == "ds" else gemm_variant].entry() for stage in BACKWARD_STAGES}

    def tile_grid(stage: str, width: int, height: int, heads: int):
        """A square tile of the (height, width) output per block: one output per thread in a 2-D
        block, or 8x8 per thread in a 1-D one."""
        k = STAGED[stage][gemm_variant]
        edge, threads = k.block_rows(), k.block_threads()
        block = (edge, edge, 1) if edge * edge == threads else (threads, 1, 1)
        return (cdiv(width, edge), cdiv(height, edge), heads), block

    # dV and dK: one block per tile of a K/V head's (S, d), the group summed inside. dP and dQ:
    # kernel1 per query head; kernel2 stacks a group's query heads, (group·L) rows, as av_kernel2
    stacked = gemm_variant == 2
    rows_of, heads_of = (group * L, H_kv) if stacked else (L, H)
    sizes = (i32(L), i32(S))
    clock.start("dv")
    dev.get_function(ran["dv"])(*tile_grid("dv", d_v, S, H_kv),
                                (weights, d_out, dv, *sizes, i32(d_v), i32(group), *mask_args))
    clock.stop("dv")
    clock.start("dp")
    dev.get_function(ran["dp"])(*tile_grid("dp", S, rows_of, heads_of), (d_out, v, dp, *sizes, i32(d_v), i32(group)))
    clock.stop("dp")
    clock.start("ds")
    dev.get_function(ran["ds"])((cdiv(L, rows), 1, H), (32, rows, 1), (weights, dp, ds, *sizes))
    clock.stop("ds")
    clock.start("dq")
    dev.get_function(ran["dq"])(*tile_grid("dq", d_k, rows_of, heads_of),
                                (ds, k, dq, *sizes, i32(d_k), i32(group), factor, *mask_args))
    clock.stop("dq")
    clock.start("dk")
    dev.get_function(ran["dk"])(*tile_grid("dk", d_k, S, H_kv),
                                (ds, q, dk, *sizes, i32(d_k), i32(group), factor, *mask_args))
    clock.stop("dk")
    return ran


def run_staged_backward(dev: KernelDevice, q, k, v, d_out, *, mask: MaskSpec, scale: Scale,
                        plan: LaunchPlan = DEFAULT_PLAN) -> BackwardOutputs:
    """q, d_out: (H, L, d_k), (H, L, d_v); k, v: (H_kv, S, d_k), (H_kv, S, d_v), H a multiple of
    H_kv. The staged forward runs first for P, with `plan`; the backward's products take its GEMM
    variant."""
    check_shapes(q, k, v)
    if mask.is_array:
        raise AndreaError("the staged backward takes --mask (causal, windows, sinks, alibi), not a mask "
                          "array: drop --mask-file")
    H, T, d_k = q.shape
    H_kv, S, d_v = v.shape
    transfers = Transfers(dev)
    gq, gk, gv, gdo = transfers.upload(*_float32(q, k, v, d_out))

    buf = allocate_stages(dev, H, T, d_v, mask=mask, scaled=scale, S=S)
    dp, ds = dev.empty((H, T, S)), dev.empty((H, T, S))
    dq, dk, dv = dev.empty((H, T, d_k)), dev.empty((H_kv, S, d_k)), dev.empty((H_kv, S, d_v))

    def launch(clock):
        ran = launch_stages(dev, gq, gk, gv, buf, T=T, d_k=d_k, d_v=d_v, H=H, mask=mask, scale=scale, clock=clock,
                            plan=plan, S=S, H_kv=H_kv)
        return {**ran, **launch_staged_backward(dev, buf.weights, gq, gk, gv, gdo, dp, ds, dq, dk, dv, T=T, d_k=d_k,
                                                d_v=d_v, H=H, mask=mask, scale=scale, clock=clock,
                                                gemm_variant=plan.gemm_variant, S=S, H_kv=H_kv)}

    stage_ms, ran = timed_runs(dev, launch)
    timings = {"forward": sum(ms for name, ms in stage_ms.items() if name not in BACKWARD_STAGES)}
    timings.update({name: stage_ms[name] for name in BACKWARD_STAGES})
    timings["total"] = sum(timings.values())

    host = transfers.download(dq, dk, dv, dp, ds, buf.weights, buf.output)
    return BackwardOutputs(*host[:3], timings, d_weights=host[3], d_scores=host[4], weights=host[5],
                           output=host[6], transfer_ms=transfers.elapsed_ms(), kernels=ran)


def launch_delta(dev: KernelDevice, d_out, out, delta, *, T: int, d_v: int, H: int, clock) -> dict[str, str]:
    """delta_i = dO[i] · O[i], the rowsum term every fused backward (fp32 and bf16) starts from;
    T: the query rows (L) of each of the H query heads."""
    rows = DELTA.block_rows()
    clock.start("delta")
    dev.get_function(DELTA.entry())(
        (cdiv(T, rows), 1, H), (32, rows, 1), (d_out, out, delta, np.int32(T), np.int32(d_v)))
    clock.stop("delta")
    return {"delta": DELTA.entry()}


def launch_fused_backward(dev: KernelDevice, q, k, v, out, d_out, lse, delta, dq, dk, dv, *, T: int, d_k: int,
                          d_v: int, H: int, mask: MaskSpec, scale: Scale, clock=None,
                          rows: int = ROWS_PER_BLOCK, S: int | None = None,
                          H_kv: int | None = None) -> dict[str, str]:
    """delta, dkdv, dq on arrays already on the device; out and lse from attention_fused_lse_kernel*.
    T: the query rows (L); S: the keys (T unless given); H_kv K/V heads (H unless given): the
    dK/dV kernel's block owns keys of one K/V head and sums its group's query heads itself.
    Returns {stage: the kernel it ran}."""
    clock = clock or NoClock()
    i32 = np.int32
    factor = np.float32(scale.factor)
    L, S = T, T if S is None else S
    H_kv = H if H_kv is None else H_kv
    group = i32(H // H_kv)
    mask_args = mask.kernel_args(L, S, heads=H)  # the whole Mask: ALiBi's bias in each recomputed P
    ran = launch_delta(dev, d_out, out, delta, T=L, d_v=d_v, H=H, clock=clock)
    name = ran["dkdv"] = DKDV.entry()
    clock.start("dkdv")
    dev.get_function(name)(
        (cdiv(S, DKDV.block_rows()), 1, H_kv), (32, DKDV.tile_size(), 1),  # 32 keys per block, 8 query rows at a time
        (q, k, v, d_out, lse, delta, dk, dv, i32(L), i32(S), i32(d_k), i32(d_v), group, factor, *mask_args),
        shared_mem=dkdv_shared_bytes(d_k, d_v))
    clock.stop("dkdv")
    name = ran["dq"] = DQ.entry()
    clock.start("dq")
    dev.get_function(name)(
        (cdiv(L, rows), 1, H), (32, rows, 1),
        (q, k, v, d_out, lse, delta, dq, i32(L), i32(S), i32(d_k), i32(d_v), group, factor, *mask_args),
        shared_mem=dq_shared_bytes(d_k, d_v, rows))
    clock.stop("dq")
    return ran


def launch_fused_lse(dev: KernelDevice, q, k, v, out, lse, *, T: int, d_k: int, d_v: int, H: int, mask: MaskSpec,
                     scale: Scale, variant: int, rows: int = ROWS_PER_BLOCK, S: int | None = None,
                     H_kv: int | None = None) -> dict[str, str]:
    S = T if S is None else S
    group = H // (H if H_kv is None else H_kv)
    name = LSE[variant].entry()
    dev.get_function(name)(
        (cdiv(T, rows), 1, H), (32, rows, 1),
        (q, k, v, out, lse, np.int32(T), np.int32(S), np.int32(d_k), np.int32(d_v), np.int32(group),
         np.float32(scale.factor), *mask.kernel_args(T, S, heads=H), None, np.int32(0)),  # no mask array
        shared_mem=LSE[variant].shared_bytes(d_k, d_v, rows=rows))
    return {"forward": name}


def run_fused_backward(dev: KernelDevice, q, k, v, d_out, *, mask: MaskSpec, scale: Scale,
                       variant: int | None = None) -> BackwardOutputs:
    """The fused forward (with its logsumexp), then the fused backward; no (L, S) array anywhere.
    q, d_out (H, L, d); k, v (H_kv, S, d), H a multiple of H_kv."""
    check_shapes(q, k, v)
    if mask.is_array:
        raise AndreaError("the fused backward takes --mask (causal, windows, sinks, alibi), not a mask "
                          "array: drop --mask-file")
    H, T, d_k = q.shape
    H_kv, S, d_v = v.shape
    check_fused_shape(d_k, d_v)
    variant = default_lse_variant(d_k, d_v) if variant is None else variant
    if variant not in LSE:
        raise AndreaError(f"the forwards with a logsumexp are attention_fused_lse_kernel{', '.join(map(str, LSE))} "
                          f"(got {variant})")
    if not LSE[variant].takes(d_k, d_v):
        raise AndreaError(why_not(LSE[variant], d_k, d_v))
    transfers = Transfers(dev)
    gq, gk, gv, gdo = transfers.upload(*_float32(q, k, v, d_out))

    out, lse, delta = dev.empty((H, T, d_v)), dev.empty((H, T)), dev.empty((H, T))
    dq, dk, dv = dev.empty((H, T, d_k)), dev.empty((H_kv, S, d_k)), dev.empty((H_kv, S, d_v))

    def launch(clock):
        clock.start("forward")
        ran = launch_fused_lse(dev, gq, gk, gv, out, lse, T=T, d_k=d_k, d_v=d_v, H=H, mask=mask, scale=scale,
                               variant=variant, S=S, H_kv=H_kv)
        clock.stop("forward")
        return {**ran, **launch_fused_backward(dev, gq, gk, gv, out, gdo, lse, delta, dq, dk, dv, T=T, d_k=d_k,
                                               d_v=d_v, H=H, mask=mask, scale=scale, clock=clock, S=S, H_kv=H_kv)}

    stage_ms, ran = timed_runs(dev, launch)
    timings = {name: stage_ms[name] for name in ("forward", *FUSED_BACKWARD_STAGES)}
    timings["total"] = sum(timings.values())
    host = transfers.download(dq, dk, dv, lse, out)
    return BackwardOutputs(*host[:3], timings, lse=host[3], output=host[4], transfer_ms=transfers.elapsed_ms(),
                           kernels=ran)
