"""Launch the kernel file's stages, one launch per stage with every head on gridDim.z.

The same code drives cupy on a GPU and the CPU build of the kernel file: both hand out kernels
with cupy's call shape, `kernel(grid, block, args, shared_mem=...)`, and a `KernelDevice` says
how to move arrays and time stages on that side.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

import numpy as np

from andrea_cli.backends.base import StageOutputs
from andrea_cli.masks import MaskSpec

TILE = 16  # must match TILE in cuda/microgpt_cuda.cu


@dataclass(frozen=True)
class LaunchPlan:
    """The launch geometry choices the kernel file offers (verify runs all of them)."""

    softmax_variant: int = 1  # 1: one block per row; 2: one warp per row
    softmax_threads: int = 256  # threads per block for variant 1 (a multiple of 32)
    softmax_rows_per_block: int = 4  # warps (rows) per block for variant 2

    def describe(self) -> str:
        if self.softmax_variant == 1:
            return f"softmax_kernel1, {self.softmax_threads} threads/row"
        return f"softmax_kernel2, {self.softmax_rows_per_block} rows/block"


DEFAULT_PLAN = LaunchPlan()
ALL_PLANS = (
    LaunchPlan(1, 256),
    LaunchPlan(1, 32),  # a single warp: the shared-memory step reduces one value
    LaunchPlan(1, 1024),
    LaunchPlan(2, softmax_rows_per_block=1),
    LaunchPlan(2, softmax_rows_per_block=8),
)


class KernelDevice(Protocol):
    name: str
    warmup_runs: int  # untimed runs before the timed one (GPU clocks and caches settle)

    def get_function(self, name: str) -> Callable[..., None]: ...

    def to_device(self, a: np.ndarray) -> Any: ...

    def empty(self, shape: tuple[int, ...]) -> Any: ...

    def to_host(self, a: Any) -> np.ndarray: ...

    def clock(self) -> "StageClock": ...


class StageClock(Protocol):
    def start(self, stage: str) -> None: ...

    def stop(self, stage: str) -> None: ...

    def elapsed_ms(self) -> dict[str, float]:
        """Waits for the device, then returns the time of each stage started and stopped."""
        ...


def cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def run_staged(dev: KernelDevice, q, k, v, *, mask: MaskSpec, scaled: bool,
               plan: LaunchPlan = DEFAULT_PLAN) -> StageOutputs:
    H, T, d_k = q.shape
    d_v = v.shape[-1]
    i32, f32 = np.int32, np.float32

    transfer = dev.clock()
    transfer.start("h2d")
    dq, dk, dv = (dev.to_device(np.ascontiguousarray(a, dtype=np.float32)) for a in (q, k, v))
    transfer.stop("h2d")

    tile_grid = (cdiv(T, TILE), cdiv(T, TILE), H)
    tile_block = (TILE, TILE, 1)
    for _ in range(dev.warmup_runs + 1):
        clock = dev.clock()
        scores = dev.empty((H, T, T))
        clock.start("scores")
        dev.get_function("scores_kernel1")(tile_grid, tile_block, (dq, dk, scores, i32(T), i32(d_k)))
        clock.stop("scores")

        scaled_scores = scores
        if scaled:
            scaled_scores = dev.empty((H, T, T))
            n = H * T * T
            clock.start("scale")
            dev.get_function("scale_kernel1")(
                (min(cdiv(n, 256), 4096), 1, 1), (256, 1, 1),
                (scores, scaled_scores, np.int64(n), f32(1.0 / np.sqrt(d_k))),
            )
            clock.stop("scale")

        masked = scaled_scores
        if mask.kind != "none":
            masked = dev.empty((H, T, T))
            clock.start("mask")
            dev.get_function("mask_kernel1")(
                tile_grid, tile_block, (scaled_scores, masked, i32(T), i32(mask.kernel_window))
            )
            clock.stop("mask")

        weights = dev.empty((H, T, T))
        clock.start("softmax")
        if plan.softmax_variant == 1:
            threads = plan.softmax_threads
            dev.get_function("softmax_kernel1")(
                (T, 1, H), (threads, 1, 1), (masked, weights, i32(T)),
                shared_mem=(threads // 32) * 4,
            )
        else:
            rows = plan.softmax_rows_per_block
            dev.get_function("softmax_kernel2")((cdiv(T, rows), 1, H), (32, rows, 1), (masked, weights, i32(T)))
        clock.stop("softmax")

        output = dev.empty((H, T, d_v))
        clock.start("av")
        dev.get_function("av_kernel1")(
            (cdiv(d_v, TILE), cdiv(T, TILE), H), tile_block,
            (weights, dv, output, i32(T), i32(d_v), i32(mask.hides_future)),
        )
        clock.stop("av")
        timings = clock.elapsed_ms()

    timings["total"] = sum(timings.values())
    transfer.start("d2h")
    host = {name: dev.to_host(a) for name, a in
            (("scores", scores), ("scaled", scaled_scores), ("masked", masked), ("weights", weights), ("output", output))}
    transfer.stop("d2h")
    return StageOutputs(**host, timings_ms=timings, transfer_ms=transfer.elapsed_ms())
