"""`verify --racecheck --quick`'s sweep: chosen for races, not numbers. Every kernel of the kernel
table runs (a new row joins through the family that launches it), at a shape where each of its
tile loops goes round at least twice (a barrier that parts one trip's reads from the next trip's
writes only matters from the second trip); every case runs two heads, so every grid has two
blocks to compare. ThreadSanitizer's happens-before
check does not depend on the order threads run in, so these cases run the forward schedule
only (the reverse one is there to make a missing barrier change the numbers)."""

from __future__ import annotations

from dataclasses import replace

from andrea_cli.backends.launch.catalogue import KERNELS
from andrea_cli.backends.launch.kernel_spec import Kernel
from andrea_cli.backends.launch.staged import ALL_PLANS, DEFAULT_PLAN, KERNEL1_PLAN
from andrea_cli.masks import MaskSpec
from andrea_cli.verification.mask_arrays import array_cases
from andrea_cli.verification.case import Case

# The fp32 kernels (any width): T one past two 16-wide tiles and one past the 32-key tiles of the
# warp-per-row kernels; d_k and d_v past two 16-wide slices (and the 8-deep GEMM slices), not equal,
# multiples of 4 for the float4 kernels.
FP32_T, FP32_D_K, FP32_D_V = 33, 40, 36
# The softmax-only plans: their kernels have no tile loop (a row per block or warp); two rows, so
# each launch has blocks to compare. Not the 1024-thread geometry of softmax_kernel1 (the full
# `verify --racecheck` sweep runs it): its code is the 256- and 32-thread geometries' code, and
# ThreadSanitizer's vector clocks are as long as the most threads it has seen (two fiber sets of
# the widest block), which every later barrier and block start pays for: measured, 4 blocks of
# 1024 threads took 12.6 s of a 56 s sweep, and made every later block dearer.
SOFTMAX_T = 2
MAX_THREADS = 256
# The tensor-core kernels and kernel3 (d 64 and 128 compiled in): no mask, so every block walks
# every key tile (three of 64 keys, the third partial; kernel5 and kernel6: two blocks of 128 rows).
TC_FAMILIES = ("fused", "fused_bf16", "backward_bf16")


def tc_T() -> int:
    """The most trips_needed of any head-size kernel."""
    return max(trips_needed(k, d) for k in KERNELS if k.head_sizes for d in k.head_sizes)


def race_cases() -> list[Case]:
    causal = MaskSpec("causal")
    plans = [plan for plan in ALL_PLANS if plan not in (DEFAULT_PLAN, KERNEL1_PLAN)
             and (plan.softmax_variant != 1 or plan.softmax_threads <= MAX_THREADS)]
    T = tc_T()
    return ([Case(FP32_T, FP32_D_K, FP32_D_V, causal, True, plan) for plan in (DEFAULT_PLAN, KERNEL1_PLAN)]
            + [Case(SOFTMAX_T, 3, 3, causal, True, plan, families=("staged",)) for plan in plans]
            + [Case(T, d, d, MaskSpec("none"), True, families=TC_FAMILIES) for d in head_sizes()]
            + array_cases(True)[1:2]  # mask_kernel2: an ALiBi-shaped bias, the staged family
            + [replace(bias_tile_case(), families=("fused",))])


def bias_tile_case() -> Case:
    """Kernel3's bias tile, reloaded beside the K tile: d 64, 70 keys (two 64-key tiles)."""
    return next(c for c in array_cases(True) if c.d_k == c.d_v == 64 and c.S > 64)


def head_sizes() -> list[int]:
    return sorted({d for k in KERNELS if k.head_sizes for d in k.head_sizes})


def trips_needed(k: Kernel, d: int | None) -> int:
    """The least T at which the kernel's tile loop (its table row's tile: keys, or queries for dK
    and dV) goes round twice, three times for the tensor-core kernels: they double-buffer their
    tiles, so a stage is refilled (after the barrier that says every warp is done reading it) only
    on the third trip. Every case runs two heads, so every grid has two blocks."""
    return 1 + (2 if k.precision == "bf16" and k.tile_size(d) > 2 else 1) * k.tile_size(d)
