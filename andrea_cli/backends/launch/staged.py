"""Launch the kernel file's stages, one launch per stage with every head on gridDim.z.

The same code drives cupy on a GPU and the CPU build of the kernel file: both hand out kernels
with cupy's call shape, `kernel(grid, block, args, shared_mem=...)`, and a `KernelDevice` says
how to move arrays and time stages on that side.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from andrea_cli.backends.base import StageOutputs
from andrea_cli.backends.launch.catalogue import family, kernel
from andrea_cli.backends.launch.shapes import check_shapes
from andrea_cli.backends.launch.device import KernelDevice, NoClock, Transfers, cdiv, timed_runs
from andrea_cli.errors import AndreaError
from andrea_cli.masks import MaskSpec
from andrea_cli.scale import Scale

SCORES, SOFTMAX, AV = (family("staged", stage) for stage in ("scores", "softmax", "av"))  # {variant: row}
SCALE, MASK, MASK_ARRAY = kernel("staged", "scale"), kernel("staged", "mask"), kernel("staged", "mask", 2)
TILE = MASK.block_rows()  # 16x16 outputs per block: scores_kernel1, mask_kernel1, av_kernel1
SCORES2_TILE, AV2_TILE = SCORES[2].block_rows(), AV[2].block_rows()  # output tile edge of the 8x8 kernels
SOFTMAX3_PER_THREAD = SOFTMAX[3].tile_size()  # values of a row each thread of softmax_kernel3 holds
SOFTMAX3_MAX_T = 1024 * SOFTMAX3_PER_THREAD  # longer rows take softmax_kernel2
SCALE_GRID = 4096  # scale_kernel1's most blocks: a grid-stride loop does the rest


@dataclass(frozen=True)
class LaunchPlan:
    """The kernel variants and launch geometry the kernel file offers (verify runs all of them).
    The default is the fastest: the register-tiled GEMMs and the row-in-registers softmax."""

    gemm_variant: int = 2  # scores_kernelN and av_kernelN: 1 one output per thread, 2 8x8 per thread
    softmax_variant: int = 3  # 1: one block per row; 2: one warp per row; 3: the row in registers
    softmax_threads: int = 256  # threads per block for variant 1 (a multiple of 32)
    softmax_rows_per_block: int = 4  # warps (rows) per block for variant 2

    def __post_init__(self):
        if self.gemm_variant not in SCORES or self.softmax_variant not in SOFTMAX:
            raise ValueError(f"no scores_kernel{self.gemm_variant} or no softmax_kernel{self.softmax_variant} "
                             "in the kernel table")

    def softmax_for(self, T: int) -> int:
        """softmax_kernel3 holds the row in registers, up to SOFTMAX3_MAX_T; past it, kernel2."""
        return 2 if self.softmax_variant == 3 and T > SOFTMAX3_MAX_T else self.softmax_variant

    def describe(self) -> str:
        gemm = f"scores/av_kernel{self.gemm_variant}"
        if self.softmax_variant == 1:
            return f"{gemm}, softmax_kernel1, {self.softmax_threads} threads/row"
        if self.softmax_variant == 2:
            return f"{gemm}, softmax_kernel2, {self.softmax_rows_per_block} rows/block"
        return f"{gemm}, softmax_kernel3 (kernel2 past T = {SOFTMAX3_MAX_T:,})"

    def short(self) -> str:
        """A table cell: gemm variant, then softmax variant/geometry."""
        softmax = {1: f"1/{self.softmax_threads}", 2: f"2/{self.softmax_rows_per_block}", 3: "3"}[self.softmax_variant]
        return f"{self.gemm_variant}·{softmax}"


DEFAULT_PLAN = LaunchPlan()
KERNEL1_PLAN = LaunchPlan(1, 1, 256)  # the one-output-per-thread kernels: the default before register tiling
# attend --plan: the fast kernels (the default), or the five stages as the course writes them:
# scores_kernel1, scale_kernel1, mask_kernel1, softmax_kernel1, av_kernel1, one output per thread
NAMED_PLANS = {"fast": DEFAULT_PLAN, "textbook": KERNEL1_PLAN}
ALL_PLANS = (
    DEFAULT_PLAN,
    KERNEL1_PLAN,
    LaunchPlan(1, 1, 32),  # a single warp: the shared-memory step reduces one value
    LaunchPlan(1, 1, 1024),
    LaunchPlan(1, 2, softmax_rows_per_block=1),
    LaunchPlan(2, 2, softmax_rows_per_block=8),
)


@dataclass
class StageBuffers:
    """The device arrays of one staged run. A stage that does not run (--no-scale, --mask none)
    leaves its output the same array as its input."""

    scores: Any  # (H, L, S)
    scaled: Any  # (H, L, S)
    masked: Any  # (H, L, S)
    weights: Any  # (H, L, S)
    output: Any  # (H, L, d_v)


def allocate_stages(dev: KernelDevice, H: int, T: int, d_v: int, *, mask: MaskSpec, scaled,
                    S: int | None = None) -> StageBuffers:
    """T: the query rows (L); S: the keys (T unless given); scaled: whether a scale stage runs (a
    Scale, or a bool)."""
    L, S = T, T if S is None else S
    scores = dev.empty((H, L, S))
    scaled_scores = dev.empty((H, L, S)) if scaled else scores
    masked = dev.empty((H, L, S)) if mask.kind != "none" else scaled_scores
    return StageBuffers(scores, scaled_scores, masked, dev.empty((H, L, S)), dev.empty((H, L, d_v)))


def launch_stages(dev: KernelDevice, dq, dk, dv, buf: StageBuffers, *, T: int, d_k: int, d_v: int, H: int,
                  mask: MaskSpec, scale: Scale, plan: LaunchPlan = DEFAULT_PLAN, clock=None,
                  S: int | None = None, H_kv: int | None = None, dbias=None) -> dict[str, str]:
    """One launch per stage on arrays already on the device (bench times exactly this); returns
    {stage: the kernel it ran}. T: the query rows (L), S: the keys (T unless given); H query heads
    over H_kv K/V heads (H unless given; the kernels read K/V head h // (H / H_kv), no copy).
    dbias: a mask array's bias on the device, (1 or H, L, S), for mask.kind "array"."""
    clock = clock or NoClock()
    i32, f32 = np.int32, np.float32
    L, S = T, T if S is None else S
    group = i32(H // (H if H_kv is None else H_kv))  # query heads per K/V head
    mask_args = mask.kernel_args(L, S, heads=H)  # the whole Mask: right, sinks and ALiBi too
    tile_block = (TILE, TILE, 1)
    ran = {}

    clock.start("scores")
    scores = ran["scores"] = SCORES[plan.gemm_variant].entry()
    scores_args = (dq, dk, buf.scores, i32(L), i32(S), i32(d_k), group)
    if plan.gemm_variant == 2:
        dev.get_function(scores)((cdiv(S, SCORES2_TILE), cdiv(L, SCORES2_TILE), H), (SCORES[2].block_threads(), 1, 1),
                                 scores_args)
    else:
        dev.get_function(scores)((cdiv(S, TILE), cdiv(L, TILE), H), tile_block, scores_args)
    clock.stop("scores")

    if scale.applied:
        n = H * L * S
        threads = SCALE.block_threads()
        name = ran["scale"] = SCALE.entry()
        clock.start("scale")
        dev.get_function(name)(
            (min(cdiv(n, threads), SCALE_GRID), 1, 1), (threads, 1, 1),
            # 0: the kernel works out the course's 1.0f / sqrtf(d_k) itself; else the factor given
            (buf.scores, buf.scaled, np.int64(n), i32(d_k), f32(scale.kernel_given())),
        )
        clock.stop("scale")

    if mask.is_array:  # mask_kernel2 adds the array (a bool mask: 0 / -inf) to the scaled scores
        if dbias is None:
            raise ValueError("a mask array needs its bias on the device (dbias)")
        name = ran["mask"] = MASK_ARRAY.entry()
        clock.start("mask")
        dev.get_function(name)((cdiv(S, TILE), cdiv(L, TILE), H), tile_block,
                               (buf.scaled, dbias, buf.masked, i32(L), i32(S), i32(mask.bias.size // (L * S))))
        clock.stop("mask")
    elif mask.kind != "none":
        name = ran["mask"] = MASK.entry()
        clock.start("mask")
        dev.get_function(name)((cdiv(S, TILE), cdiv(L, TILE), H), tile_block,
                               (buf.scaled, buf.masked, i32(L), i32(S), *mask_args))
        clock.stop("mask")

    clock.start("softmax")
    softmax = plan.softmax_for(S)  # rows of S keys
    name = ran["softmax"] = SOFTMAX[softmax].entry()
    rows_args = (buf.masked, buf.weights, i32(L), i32(S))
    if softmax == 3:  # the smallest block whose threads hold the whole row
        threads = 32 * cdiv(cdiv(S, SOFTMAX3_PER_THREAD), 32)
        dev.get_function(name)((L, 1, H), (threads, 1, 1), rows_args)
    elif softmax == 1:
        threads = plan.softmax_threads
        dev.get_function(name)((L, 1, H), (threads, 1, 1), rows_args, shared_mem=SOFTMAX[1].shared_bytes(threads=threads))
    else:
        rows = plan.softmax_rows_per_block
        dev.get_function(name)((cdiv(L, rows), 1, H), (32, rows, 1), rows_args)
    clock.stop("softmax")

    clock.start("av")
    av_args = (buf.weights, dv, buf.output, i32(L), i32(S), i32(d_v), group, *mask_args)
    av = ran["av"] = AV[plan.gemm_variant].entry()
    if plan.gemm_variant == 2:
        # the group of query heads sharing a K/V head as one product of group·L rows (av_kernel2)
        grid = (cdiv(d_v, AV2_TILE), cdiv(int(group) * L, AV2_TILE), H // int(group))
        dev.get_function(av)(grid, (AV[2].block_threads(), 1, 1), av_args)
    else:
        dev.get_function(av)((cdiv(d_v, TILE), cdiv(L, TILE), H), tile_block, av_args)
    clock.stop("av")
    return ran


def check_bias(bias: np.ndarray, H: int, L: int, S: int) -> None:
    """A mask array fits the run: (L, S) for every head, or (H, L, S), float32 (MaskSpec holds it so)."""
    if bias.dtype != np.float32 or bias.shape not in ((L, S), (1, L, S), (H, L, S)):
        raise AndreaError(f"the mask array is {bias.dtype} {bias.shape}; this run needs float32 ({L}, {S}) "
                          f"(queries, keys) or ({H}, {L}, {S}): fix the mask file or attn_mask")


def run_staged(dev: KernelDevice, q, k, v, *, mask: MaskSpec, scale: Scale,
               plan: LaunchPlan = DEFAULT_PLAN) -> StageOutputs:
    """q (H, L, d_k), k (H_kv, S, d_k), v (H_kv, S, d_v): L queries against S keys, H a multiple of H_kv."""
    H, L, d_k = q.shape
    H_kv, S, d_v = v.shape
    check_shapes(q, k, v)

    transfers = Transfers(dev)
    dq, dk, dv = transfers.upload(q, k, v)
    dbias = None
    if mask.is_array:
        check_bias(mask.bias, H, L, S)
        dbias, = transfers.upload(mask.bias.reshape(-1, L, S))

    buf = allocate_stages(dev, H, L, d_v, mask=mask, scaled=scale, S=S)
    timings, ran = timed_runs(dev, lambda clock: launch_stages(dev, dq, dk, dv, buf, T=L, d_k=d_k, d_v=d_v, H=H,
                                                               mask=mask, scale=scale, plan=plan, clock=clock,
                                                               S=S, H_kv=H_kv, dbias=dbias))
    timings["total"] = sum(timings.values())
    names = ("scores", "scaled", "masked", "weights", "output")
    host = dict(zip(names, transfers.download(*(getattr(buf, name) for name in names))))
    return StageOutputs(**host, timings_ms=timings, transfer_ms=transfers.elapsed_ms(), device_output=buf.output,
                        kernels=ran)
