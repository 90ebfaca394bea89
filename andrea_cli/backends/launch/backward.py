"""Launch the kernel file's backward pass: staged (dv, dp, ds, dq, dk, after the staged forward
that gives P) or fused (the forward writing its row logsumexp, then delta, dkdv, dq). Drives
cupy or the CPU build through the same `KernelDevice` as the forward launchers."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from andrea_cli.backends.launch.catalogue import family, kernel
from andrea_cli.backends.launch.fused import ROWS_PER_BLOCK, check_fused_shape, why_not
from andrea_cli.backends.launch.device import KernelDevice, NoClock, Transfers, cdiv, timed_runs
from andrea_cli.backends.launch.shapes import require_square
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
                           gemm_variant: int = DEFAULT_PLAN.gemm_variant) -> dict[str, str]:
    """One launch per backward stage on arrays already on the device (bench times exactly this);
    returns {stage: the kernel it ran}. gemm_variant: dv, dp, dq and dk's kernel, as the forward's
    plan picks scores and av's (1: one output per thread, 16x16 per block; 2: the register-tiled
    8x8 per thread, 64x64 per block of 64, dP 128x128 per 256)."""
    clock = clock or NoClock()
    i32, f32 = np.int32, np.float32
    factor = f32(scale.factor)
    mask_args = mask.square_args()  # the staged backward: L = S only
    rows = DS_ROWS_PER_BLOCK
    ran = {stage: STAGED[stage][1 if stage == "ds" else gemm_variant].entry() for stage in BACKWARD_STAGES}

    def tile_grid(stage: str, width: int):
        """A square tile of the (T, width) output per block: one output per thread in a 2-D block,
        or 8x8 per thread in a 1-D one."""
        k = STAGED[stage][gemm_variant]
        edge, threads = k.block_rows(), k.block_threads()
        block = (edge, edge, 1) if edge * edge == threads else (threads, 1, 1)
        return (cdiv(width, edge), cdiv(T, edge), H), block

    clock.start("dv")
    dev.get_function(ran["dv"])(*tile_grid("dv", d_v), (weights, d_out, dv, i32(T), i32(d_v), *mask_args))
    clock.stop("dv")
    clock.start("dp")
    dev.get_function(ran["dp"])(*tile_grid("dp", T), (d_out, v, dp, i32(T), i32(d_v)))
    clock.stop("dp")
    clock.start("ds")
    dev.get_function(ran["ds"])((cdiv(T, rows), 1, H), (32, rows, 1), (weights, dp, ds, i32(T)))
    clock.stop("ds")
    clock.start("dq")
    dev.get_function(ran["dq"])(*tile_grid("dq", d_k), (ds, k, dq, i32(T), i32(d_k), factor, *mask_args))
    clock.stop("dq")
    clock.start("dk")
    dev.get_function(ran["dk"])(*tile_grid("dk", d_k), (ds, q, dk, i32(T), i32(d_k), factor, *mask_args))
    clock.stop("dk")
    return ran


def run_staged_backward(dev: KernelDevice, q, k, v, d_out, *, mask: MaskSpec, scale: Scale,
                        plan: LaunchPlan = DEFAULT_PLAN) -> BackwardOutputs:
    """q, k: (H, T, d_k); v, d_out: (H, T, d_v). The staged forward runs first for P, with `plan`;
    the backward's products take its GEMM variant."""
    require_square(q, k, v, "the staged backward's kernels")
    H, T, d_k = q.shape
    d_v = v.shape[-1]
    transfers = Transfers(dev)
    gq, gk, gv, gdo = transfers.upload(*_float32(q, k, v, d_out))

    buf = allocate_stages(dev, H, T, d_v, mask=mask, scaled=scale)
    dp, ds = dev.empty((H, T, T)), dev.empty((H, T, T))
    dq, dk, dv = dev.empty((H, T, d_k)), dev.empty((H, T, d_k)), dev.empty((H, T, d_v))

    def launch(clock):
        ran = launch_stages(dev, gq, gk, gv, buf, T=T, d_k=d_k, d_v=d_v, H=H, mask=mask, scale=scale, clock=clock,
                            plan=plan)
        return {**ran, **launch_staged_backward(dev, buf.weights, gq, gk, gv, gdo, dp, ds, dq, dk, dv, T=T, d_k=d_k,
                                                d_v=d_v, H=H, mask=mask, scale=scale, clock=clock,
                                                gemm_variant=plan.gemm_variant)}

    stage_ms, ran = timed_runs(dev, launch)
    timings = {"forward": sum(ms for name, ms in stage_ms.items() if name not in BACKWARD_STAGES)}
    timings.update({name: stage_ms[name] for name in BACKWARD_STAGES})
    timings["total"] = sum(timings.values())

    host = transfers.download(dq, dk, dv, dp, ds, buf.weights, buf.output)
    return BackwardOutputs(*host[:3], timings, d_weights=host[3], d_scores=host[4], weights=host[5],
                           output=host[6], transfer_ms=transfers.elapsed_ms(), kernels=ran)


def launch_delta(dev: KernelDevice, d_out, out, delta, *, T: int, d_v: int, H: int, clock) -> dict[str, str]:
    """delta_i = dO[i] · O[i], the rowsum term every fused backward (fp32 and bf16) starts from."""
    rows = DELTA.block_rows()
    clock.start("delta")
    dev.get_function(DELTA.entry())(
        (cdiv(T, rows), 1, H), (32, rows, 1), (d_out, out, delta, np.int32(T), np.int32(d_v)))
    clock.stop("delta")
    return {"delta": DELTA.entry()}


def launch_fused_backward(dev: KernelDevice, q, k, v, out, d_out, lse, delta, dq, dk, dv, *, T: int, d_k: int,
                          d_v: int, H: int, mask: MaskSpec, scale: Scale, clock=None,
                          rows: int = ROWS_PER_BLOCK) -> dict[str, str]:
    """delta, dkdv, dq on arrays already on the device; out and lse from attention_fused_lse_kernel*.
    Returns {stage: the kernel it ran}."""
    clock = clock or NoClock()
    i32 = np.int32
    factor = np.float32(scale.factor)
    mask_args = mask.square_args()  # the fused backward: L = S only
    ran = launch_delta(dev, d_out, out, delta, T=T, d_v=d_v, H=H, clock=clock)
    name = ran["dkdv"] = DKDV.entry()
    clock.start("dkdv")
    dev.get_function(name)(
        (cdiv(T, DKDV.block_rows()), 1, H), (32, DKDV.tile_size(), 1),  # 32 keys per block, 8 query rows at a time
        (q, k, v, d_out, lse, delta, dk, dv, i32(T), i32(d_k), i32(d_v), factor, *mask_args),
        shared_mem=dkdv_shared_bytes(d_k, d_v))
    clock.stop("dkdv")
    name = ran["dq"] = DQ.entry()
    clock.start("dq")
    dev.get_function(name)(
        (cdiv(T, rows), 1, H), (32, rows, 1),
        (q, k, v, d_out, lse, delta, dq, i32(T), i32(d_k), i32(d_v), factor, *mask_args),
        shared_mem=dq_shared_bytes(d_k, d_v, rows))
    clock.stop("dq")
    return ran


def launch_fused_lse(dev: KernelDevice, q, k, v, out, lse, *, T: int, d_k: int, d_v: int, H: int, mask: MaskSpec,
                     scale: Scale, variant: int, rows: int = ROWS_PER_BLOCK) -> dict[str, str]:
    name = LSE[variant].entry()
    dev.get_function(name)(
        (cdiv(T, rows), 1, H), (32, rows, 1),
        (q, k, v, out, lse, np.int32(T), np.int32(T), np.int32(d_k), np.int32(d_v), np.int32(1),
         np.float32(scale.factor), *mask.kernel_args(T, T, heads=H), None, np.int32(0)),  # no mask array
        shared_mem=LSE[variant].shared_bytes(d_k, d_v, rows=rows))
    return {"forward": name}


def run_fused_backward(dev: KernelDevice, q, k, v, d_out, *, mask: MaskSpec, scale: Scale,
                       variant: int | None = None) -> BackwardOutputs:
    """The fused forward (with its logsumexp), then the fused backward; no (T, T) array anywhere."""
    require_square(q, k, v, "the fused backward's kernels")
    H, T, d_k = q.shape
    d_v = v.shape[-1]
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
    dq, dk, dv = dev.empty((H, T, d_k)), dev.empty((H, T, d_k)), dev.empty((H, T, d_v))

    def launch(clock):
        clock.start("forward")
        ran = launch_fused_lse(dev, gq, gk, gv, out, lse, T=T, d_k=d_k, d_v=d_v, H=H, mask=mask, scale=scale,
                               variant=variant)
        clock.stop("forward")
        return {**ran, **launch_fused_backward(dev, gq, gk, gv, out, gdo, lse, delta, dq, dk, dv, T=T, d_k=d_k,
                                               d_v=d_v, H=H, mask=mask, scale=scale, clock=clock)}

    stage_ms, ran = timed_runs(dev, launch)
    timings = {name: stage_ms[name] for name in ("forward", *FUSED_BACKWARD_STAGES)}
    timings["total"] = sum(timings.values())
    host = transfers.download(dq, dk, dv, lse, out)
    return BackwardOutputs(*host[:3], timings, lse=host[3], output=host[4], transfer_ms=transfers.elapsed_ms(),
                           kernels=ran)
