"""The kernel table: one row per kernel of the kernel file, in its catalogue's order (one row per
variant where the head size is compiled in, an entry point per size), and everything the
launchers, verify, bench and the static bound know of it (kernel_spec.Kernel). Block sizes come
from the kernel file's #defines and __launch_bounds__, never copied: a new variant is its body
there and a row here."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

from andrea_cli import kernel_file
from andrea_cli.backends.launch.kernel_spec import Kernel, Numerics
from andrea_cli.backends.toolchain.cuda_arch import TENSOR_CORE_CC, WGMMA_CC
from andrea_cli.errors import AndreaError


def gemm_8x8_edge(sizes: dict) -> int:
    """gemm_tile_8x8: a square output tile, 8x8 per thread, so threads = (edge / 8)^2."""
    return 8 * math.isqrt(sizes["threads"])


# Shared memory per block (dynamic), from the kernels' own layouts; float32 is 4 bytes, bf16 2.
def _softmax1_shared(s, d_k, d_v):  # one float per warp
    return (s["threads"] // 32) * 4


def _fused_shared(k_stride: Callable[[int], int]):
    """q_s (rows, d_k) + k_s (keys, k_stride(d_k)) + v_s (keys, d_v), float32."""
    return lambda s, d_k, d_v: 4 * (s["rows"] * d_k + s["tile"] * k_stride(d_k) + s["tile"] * d_v)


def _bf16_shared(kv_pad: int):
    """q_s (rows, d+8) padded for ldmatrix, and two stages of K and V (tile, d + kv_pad), bf16."""
    return lambda s, d_k, d_v: 2 * (s["rows"] * (d_k + 8) + 2 * 2 * s["tile"] * (d_k + kv_pad))


def _k7_shared(s, d_k, d_v):
    """kernel7: q_s (rows, d+8) and a ring of K7_STAGES stages of K and V (tile, d), bf16, their
    full and empty mbarriers (8 bytes each), and 128 bytes to align the TMA destinations."""
    return 2 * (s["rows"] * (d_k + 8) + 2 * s["K7_STAGES"] * s["tile"] * d_k) + 16 * s["K7_STAGES"] + 128


def _dkdv1_shared(s, d_k, d_v):
    """k_s, v_s (32 keys, odd strides) + q_s, dO_s (8 query rows) + P and dS of 8 rows × 32 keys."""
    keys, rows = s["rows"], s["tile"]
    return 4 * (keys * ((d_k | 1) + (d_v | 1)) + rows * (d_k + d_v) + 2 * rows * keys)


def _dq1_shared(s, d_k, d_v):
    """q_s, dO_s (rows) + k_s, v_s (32 keys, odd strides), float32."""
    return 4 * (s["rows"] * (d_k + d_v) + s["tile"] * ((d_k | 1) + (d_v | 1)))


def _dkdv2_shared(s, d_k, d_v):
    """k_s, v_s (64, d+8) + q_s, o_s (2, QT, d+8), bf16, + lse_s, delta_s (2, QT) float."""
    return 2 * (2 * s["rows"] + 4 * s["tile"]) * (d_k + 8) + 4 * 4 * s["tile"]


def _dq2_shared(s, d_k, d_v):
    """q_s, o_s (64, d+8) + k_s, v_s (2, 64, d+8), bf16."""
    return 2 * (2 * s["rows"] + 4 * s["tile"]) * (d_k + 8)


SQUARE_TILE = dict(rows="TILE", threads=lambda s: s["TILE"] * s["TILE"])  # 16x16 outputs, one per thread
GEMM_8X8 = dict(rows=gemm_8x8_edge)  # threads: its __launch_bounds__
WARP_ROWS = dict(threads=lambda s: 32 * s["rows"])  # one warp per row; rows: the launcher's choice
FUSED_ROWS = 8  # query rows (warps) per block of the warp-per-row fused kernels: they share each K/V tile
DS_ROWS = 4  # rows (warps) per block of ds_kernel1 and the delta kernel
TC = dict(precision="bf16", head_sizes=(64, 128), cc=TENSOR_CORE_CC)
# kernel4: exp2f, 2 ulp (the CUDA math library's stated bound): 4u. kernel5 and kernel6:
# ex2.approx.ftz, 2 ulp from the correctly rounded result (the PTX manual), so 2.5 ulp from the
# exact one: 5u; kernel5 steps through a 64-key tile 16 keys at a time at d 128 (STEP in the kernel)
EXP2F = Numerics({64: 64, 128: 64}, 4.0, False)

KERNELS = (
    Kernel("scores_kernel1", "staged", "scores", 1, "scores1", **SQUARE_TILE, products=1),
    Kernel("scores_kernel2", "staged", "scores", 2, "scores2", **GEMM_8X8, products=1),
    Kernel("scale_kernel1", "staged", "scale", 1, "scale", threads=256),
    Kernel("mask_kernel1", "staged", "mask", 1, "mask", **SQUARE_TILE),
    Kernel("mask_kernel2", "staged", "mask", 2, "mask2", **SQUARE_TILE),  # a mask array (--mask-file)
    Kernel("softmax_kernel1", "staged", "softmax", 1, "softmax1", rows=1, shared=_softmax1_shared),
    Kernel("softmax_kernel2", "staged", "softmax", 2, "softmax2", **WARP_ROWS),
    Kernel("softmax_kernel3", "staged", "softmax", 3, "softmax3", rows=1, tile=lambda s: 4 * s["SOFTMAX3_VEC"]),
    Kernel("av_kernel1", "staged", "av", 1, "av1", **SQUARE_TILE, products=1),
    Kernel("av_kernel2", "staged", "av", 2, "av2", **GEMM_8X8, products=1),
    Kernel("attention_fused_kernel1", "fused", "fused", 1, "fused1", max_d="FUSED_MAX_D", rows=FUSED_ROWS,
           tile="FUSED_KEYS", **WARP_ROWS, shared=_fused_shared(lambda d: d | 1), products=2),
    Kernel("attention_fused_kernel2", "fused", "fused", 2, "fused2", width_multiple=4, max_d="FUSED_MAX_D",
           rows=FUSED_ROWS, tile="FUSED_KEYS", **WARP_ROWS, shared=_fused_shared(lambda d: d + 4), products=2),
    Kernel("attention_fused_kernel3", "fused", "fused", 3, "fused3", head_sizes=(64, 128), rows="FUSED3_ROWS",
           tile="FUSED3_KEYS", threads="FUSED3_THREADS", shared=_fused_shared(lambda d: d + 4), products=2),
    Kernel("attention_fused_lse_kernel1", "fused_backward", "forward", 1, "fused1_lse", max_d="FUSED_MAX_D",
           rows=FUSED_ROWS, tile="FUSED_KEYS", **WARP_ROWS, shared=_fused_shared(lambda d: d | 1), products=2),
    Kernel("attention_fused_lse_kernel2", "fused_backward", "forward", 2, "fused2_lse", width_multiple=4,
           max_d="FUSED_MAX_D", rows=FUSED_ROWS, tile="FUSED_KEYS", **WARP_ROWS,
           shared=_fused_shared(lambda d: d + 4), products=2),
    Kernel("to_bf16_kernel1", "fused_bf16", "to_bf16", 1, "to_bf16", precision="bf16", cc=TENSOR_CORE_CC,
           threads=256, tile=2),  # two values per thread and step (one cvt.rn.bf16x2)
    Kernel("attention_fused_kernel4", "fused_bf16", "fused", 4, "fused4_bf16", **TC, rows="TC_ROWS", tile="TC_KEYS",
           shared=_bf16_shared(8), products=2, numerics=EXP2F),
    Kernel("attention_fused_kernel5", "fused_bf16", "fused", 5, "fused5_bf16", **TC, rows="K5_ROWS", tile="TC_KEYS",
           shared=_bf16_shared(8), products=2, numerics=Numerics({64: 64, 128: 16}, 5.0, True)),
    Kernel("attention_fused_kernel6", "fused_bf16", "fused", 6, "fused6_bf16", **{**TC, "cc": WGMMA_CC},
           cc_exact=True, rows="K6_ROWS", tile="TC_KEYS", shared=_bf16_shared(0), products=2,
           numerics=Numerics({64: 64, 128: 64}, 5.0, True)),  # K, V unpadded: wgmma's canonical layout
    # kernel7: kernel6's tiles, warp-specialised (a TMA producer warp, two consumer warpgroups in
    # ping-pong); chosen by name: its static bound is not above kernel6's (bench --bound)
    Kernel("attention_fused_kernel7", "fused_bf16", "fused", 7, "fused7_bf16", **{**TC, "cc": WGMMA_CC},
           cc_exact=True, rows="K7_ROWS", tile="TC_KEYS", shared=_k7_shared, products=2,
           numerics=Numerics({64: 64, 128: 64}, 5.0, True), tensor_maps=True, default=False),
    # decode: one query per head against the KV cache (flash-decoding); the block's threads from
    # __launch_bounds__, the keys of a slice (tile) the launcher's choice
    Kernel("kv_append_kernel1", "decode", "append", 1, "append1", threads=128),
    Kernel("kv_append_kernel2", "decode", "append", 2, "append2_bf16", precision="bf16", cc=TENSOR_CORE_CC,
           threads=128, width_multiple=2),  # bf16 stored two to a word
    Kernel("attention_decode_kernel1", "decode", "decode", 1, "decode1", max_d="DECODE_MAX_D"),
    Kernel("attention_decode_kernel2", "decode", "decode", 2, "decode2_bf16", precision="bf16", cc=TENSOR_CORE_CC,
           max_d="DECODE_MAX_D", width_multiple=2),
    Kernel("attention_decode_merge_kernel1", "decode", "merge", 1, "merge", threads=128),
    Kernel("dv_kernel1", "staged_backward", "dv", 1, "dv1", **SQUARE_TILE, products=1),
    Kernel("dp_kernel1", "staged_backward", "dp", 1, "dp1", **SQUARE_TILE, products=1),
    Kernel("ds_kernel1", "staged_backward", "ds", 1, "ds", rows=DS_ROWS, **WARP_ROWS),
    Kernel("dq_kernel1", "staged_backward", "dq", 1, "dq1", **SQUARE_TILE, products=1),
    Kernel("dk_kernel1", "staged_backward", "dk", 1, "dk1", **SQUARE_TILE, products=1),
    Kernel("dv_kernel2", "staged_backward", "dv", 2, "dv2", **GEMM_8X8, products=1),
    Kernel("dq_kernel2", "staged_backward", "dq", 2, "dq2", **GEMM_8X8, products=1),
    Kernel("dk_kernel2", "staged_backward", "dk", 2, "dk2", **GEMM_8X8, products=1),
    Kernel("dp_kernel2", "staged_backward", "dp", 2, "dp2", **GEMM_8X8, products=1),
    Kernel("attention_backward_delta_kernel1", "fused_backward", "delta", 1, "delta", rows=DS_ROWS, **WARP_ROWS),
    # a block owns 32 keys and walks the query rows that see them, 8 at a time (FUSED_BWD_ROWS)
    Kernel("attention_backward_dkdv_kernel1", "fused_backward", "dkdv", 1, "dkdv", max_d="FUSED_MAX_D",
           rows="FUSED_KEYS", tile="FUSED_BWD_ROWS", threads=lambda s: 32 * s["tile"],
           shared=_dkdv1_shared, products=4),  # Q·K^T recomputed, dP, dV, dK
    Kernel("attention_backward_dq_kernel1", "fused_backward", "dq", 1, "fused_dq", max_d="FUSED_MAX_D",
           rows=FUSED_ROWS, tile="FUSED_KEYS", **WARP_ROWS, shared=_dq1_shared, products=3),
    Kernel("attention_fused_lse_kernel4", "fused_bf16_backward", "forward", 4, "fused4_bf16_lse", **TC,
           rows="TC_ROWS", tile="TC_KEYS", shared=_bf16_shared(8), products=2, numerics=EXP2F),
    Kernel("attention_backward_dkdv_kernel2", "fused_bf16_backward", "dkdv", 2, "dkdv_bf16", **TC,
           rows="TC_KEYS", tile="TC_BWD_QUERIES_D{d}", shared=_dkdv2_shared, products=4),
    Kernel("attention_backward_dq_kernel2", "fused_bf16_backward", "dq", 2, "dq_bf16", **TC, rows="TC_ROWS",
           tile="TC_KEYS", shared=_dq2_shared, products=3),
)


def family(name: str, stage: str) -> dict[int, Kernel]:
    """{variant: row} of one family's stage, in the table's order."""
    found = {k.variant: k for k in KERNELS if (k.family, k.stage) == (name, stage)}
    if not found:
        raise KeyError(f"no kernel family {name!r} with a stage {stage!r}")
    return found


def kernel(name: str, stage: str, variant: int = 1) -> Kernel:
    return family(name, stage)[variant]


def earlier_variants(name: str, stage: str) -> list[int]:
    """A family stage's variants before its newest, newest first: the steps of its progression
    bench times beside the default. A row that is never a default (default=False: kernel7) is
    neither the newest nor a step: it runs by name."""
    return sorted(v for v, k in family(name, stage).items() if k.default)[-2::-1]


def variant_named(name: str, family_name: str, stage: str) -> int | None:
    """A variant of a family's stage by any of its names: its stem (attention_fused_kernel7), the
    stem's tail (kernel7), its number (7) or its label (bench's row, fused7_bf16); None: no such."""
    name = name.strip().lower()
    for variant, k in family(family_name, stage).items():
        if name in (k.stem, k.stem.rsplit("_", 1)[-1], str(variant), k.label):
            return variant
    return None


def entry_points() -> tuple[str, ...]:
    """Every kernel the launchers call, by its name in the kernel file."""
    return tuple(name for k in KERNELS for name in k.entries())


def resolve_kernel_path(user_path: Path | None) -> Path:
    """--kernel FILE, checked to keep every kernel of the table, or the packaged file."""
    return kernel_file.resolve_kernel_path(user_path, entry_points())


def row_of(entry: str) -> Kernel | None:
    """The row an entry point belongs to (None: a kernel the table does not list)."""
    return next((k for k in KERNELS if entry in k.entries()), None)


def _cc_text(cc: tuple[int, int]) -> str:
    return f"{cc[0]}.{cc[1]}"


def why_it_cannot_run(k: Kernel, cc: tuple[int, int] | None, entry: str | None = None) -> str:
    """Why a GPU of compute capability cc cannot run kernel k, in one line ("" when it can; the
    CPU build, cc None, runs every kernel). entry: the name to give it (default: its stem)."""
    if k.runs_on(cc):
        return ""
    entry = entry or k.stem
    if k.cc_exact:
        fallback = family(k.family, k.stage)[default_variant(k.family, k.stage, None)]
        return (f"{entry} uses Hopper's wgmma, which only compute capability {_cc_text(k.cc)} "
                f"(sm_90a: H100, H200) has; this GPU has {_cc_text(cc)}: run {fallback.stem} "
                f"(mma.sync, any GPU from sm_{fallback.cc[0]}{fallback.cc[1]}) on it")
    return (f"{entry} uses Ampere instructions (bf16, mma.sync) that need compute capability "
            f"{_cc_text(k.cc)} (sm_{k.cc[0]}{k.cc[1]}); this GPU has {_cc_text(cc)}: "
            "use the fp32 kernels on it")


def check_kernel_runs(entry: str, cc: tuple[int, int]) -> None:
    """Refuse, in one line, a kernel the GPU cannot run, before the driver is asked to launch it."""
    k = row_of(entry)
    why = "" if k is None else why_it_cannot_run(k, cc, entry)
    if why:
        raise AndreaError(why)


def default_variant(name: str, stage: str, cc: tuple[int, int] | None) -> int:
    """The fastest variant of a family's stage the device runs: the highest. A kernel for one
    compute capability alone (kernel6, wgmma) is the default only there, not in the CPU build
    (cc None), where speed is not the point; a row marked default=False (kernel7) never is."""
    rows = family(name, stage).values()
    return max(k.variant for k in rows if k.default and k.runs_on(cc) and not (cc is None and k.cc_exact))


def matmul_products(entry: str) -> int:
    k = row_of(entry)
    return k.products if k else 0
