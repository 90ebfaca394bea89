"""The kernel table: one row per kernel of the kernel file, in its catalogue's order (one row per
variant where the head size is compiled in, an entry point per size), and everything the
launchers, verify, bench and the static bound know of it. Block sizes come from the kernel
file's #defines and __launch_bounds__, never copied; a new variant is its body there and a row here."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Callable, Union

from andrea_cli.backends.toolchain.cuda_arch import TENSOR_CORE_CC, WGMMA_CC
from andrea_cli.errors import AndreaError
from andrea_cli import kernel_file
from andrea_cli.kernel_file import integer_defines, launch_bounds, packaged_kernel_path


@cache
def _file_sizes() -> tuple[dict[str, int], dict[str, int]]:
    text = packaged_kernel_path().read_text()
    return integer_defines(text), launch_bounds(text)


def define(name: str) -> int:
    """An integer #define of the packaged kernel file: TILE, FUSED_KEYS, TC_ROWS, ..."""
    return _file_sizes()[0][name]


# A size: a number the launcher chooses (the kernel takes any), a #define's name (`{d}` in it: the
# head size), or a rule over the sizes: the #defines and the row's own "d", "rows", "tile", "threads"
# ("threads" before the row's rule: its __launch_bounds__)
Size = Union[int, str, Callable[[dict], int]]


def _gemm_8x8_edge(sizes: dict) -> int:
    """gemm_tile_8x8: a square output tile, 8x8 per thread, so threads = (edge / 8)^2."""
    return 8 * math.isqrt(sizes["threads"])


@dataclass(frozen=True)
class Numerics:
    """What verify's bf16 reference repeats of a tensor-core kernel's arithmetic."""

    softmax_keys: dict[int, int]  # d -> keys per online-softmax step (a running max per step)
    exp2_error_u: float  # its exp2's relative error bound, in units of u = 2^-24 (an ulp is <= 2u)
    flushes_subnormals: bool  # ex2.approx.ftz: weights below 2^-126 become 0


@dataclass(frozen=True)
class Kernel:
    stem: str  # its name in the kernel file; with head_sizes, each entry point adds _d64, _d128
    family: str  # staged, staged_backward, fused, fused_bf16, fused_backward, fused_bf16_backward
    stage: str  # the stage it times as (timings_ms): scores, ..., fused, to_bf16, forward, dkdv, dq
    variant: int
    label: str  # its one short name: verify's stage, bench's row, parity's role
    precision: str = "fp32"  # what it multiplies: fp32, or bf16 on tensor cores
    head_sizes: tuple[int, ...] | None = None  # d_k = d_v compiled in, one entry point each; None: any
    width_multiple: int = 1  # d_k and d_v must be multiples of it (float4 loads)
    max_d: Size | None = None  # d_k, d_v at most this
    cc: tuple[int, int] | None = None  # the oldest compute capability it runs on (None: any CUDA 12 GPU)
    cc_exact: bool = False  # on cc alone (wgmma: sm_90a)
    rows: Size = 0  # output rows one block owns (grid ceil(T / rows)): queries, or keys for dK/dV
    tile: Size = 0  # keys per tile of its loop (queries per tile for dK/dV); 0: no tiles
    threads: Size = 0  # per block
    shared: Callable[..., int] | None = None  # (sizes, d_k, d_v) -> dynamic shared bytes
    products: int = 0  # T×T×d matrix products it does (Q·K^T, P·V, ...): bench --bound's FLOPs
    numerics: Numerics | None = None

    def entry(self, d: int | None = None) -> str:
        """The entry point's name in the kernel file (d: the head size, where it is compiled in)."""
        if self.head_sizes is None:
            return self.stem
        if d not in self.head_sizes:
            raise AndreaError(f"{self.stem} is built for d_k = d_v = {' or '.join(map(str, self.head_sizes))} "
                              f"(got {d})")
        return f"{self.stem}_d{d}"

    def entries(self) -> tuple[str, ...]:
        return (self.stem,) if self.head_sizes is None else tuple(self.entry(d) for d in self.head_sizes)

    def sizes(self, d: int | None = None, rows: int | None = None) -> dict[str, int]:
        """Its block's sizes at head size d, "rows", "tile", "threads", beside the file's #defines."""
        defines, bounds = _file_sizes()
        sizes = {**defines, "d": d or 0, "threads": 0}
        if self.head_sizes is None or d in self.head_sizes:
            sizes["threads"] = bounds.get(self.entry(d), 0)
        for key, size in (("rows", self.rows if rows is None else rows), ("tile", self.tile),
                          ("threads", self.threads)):
            sizes[key] = _resolve(size, sizes) if size else sizes.get(key, 0)
        return sizes

    def block_rows(self, d: int | None = None) -> int:
        return self.sizes(d)["rows"]

    def tile_size(self, d: int | None = None) -> int:
        return self.sizes(d)["tile"]

    def block_threads(self, d: int | None = None, rows: int | None = None) -> int:
        return self.sizes(d, rows)["threads"]

    def shared_bytes(self, d_k: int = 0, d_v: int | None = None, rows: int | None = None, threads: int = 0) -> int:
        """Dynamic shared memory of one block (rows: a launch's own, where the kernel takes any)."""
        if self.shared is None:
            return 0
        sizes = self.sizes(d_k if self.head_sizes else None, rows)
        if threads:
            sizes["threads"] = threads
        return self.shared(sizes, d_k, d_k if d_v is None else d_v)

    def takes(self, d_k: int, d_v: int) -> bool:
        """Whether it is built for these widths."""
        if self.head_sizes is not None:
            return d_k == d_v and d_k in self.head_sizes
        limit = _resolve(self.max_d, self.sizes()) if self.max_d else None
        return (d_k % self.width_multiple == 0 and d_v % self.width_multiple == 0
                and (limit is None or max(d_k, d_v) <= limit))

    def needs(self) -> str:
        """What widths it takes, for an error message."""
        if self.head_sizes is not None:
            return f"d_k = d_v, one of {', '.join(map(str, self.head_sizes))}"
        if self.width_multiple > 1:
            return f"d_k and d_v divisible by {self.width_multiple}"
        return "any d_k and d_v" + (f" up to {_resolve(self.max_d, self.sizes())}" if self.max_d else "")

    def runs_on(self, cc: tuple[int, int] | None) -> bool:
        """cc None: the CPU build, which runs every kernel."""
        if cc is None or self.cc is None:
            return True
        return tuple(cc) == self.cc if self.cc_exact else tuple(cc) >= self.cc


def _resolve(size: Size, sizes: dict) -> int:
    if callable(size):
        return size(sizes)
    if isinstance(size, str):
        return sizes[size.format(**sizes)]
    return size


# Shared memory per block (dynamic), from the kernels' own layouts; float32 is 4 bytes, bf16 2.
def _softmax1_shared(s, d_k, d_v):  # one float per warp
    return (s["threads"] // 32) * 4


def _fused_shared(k_stride: Callable[[int], int]):
    """q_s (rows, d_k) + k_s (keys, k_stride(d_k)) + v_s (keys, d_v), float32."""
    return lambda s, d_k, d_v: 4 * (s["rows"] * d_k + s["tile"] * k_stride(d_k) + s["tile"] * d_v)


def _bf16_shared(kv_pad: int):
    """q_s (rows, d+8) padded for ldmatrix, and two stages of K and V (tile, d + kv_pad), bf16."""
    return lambda s, d_k, d_v: 2 * (s["rows"] * (d_k + 8) + 2 * 2 * s["tile"] * (d_k + kv_pad))


def _dkdv1_shared(s, d_k, d_v):
    """k_s, v_s (32 keys, odd strides) + q_s, dO_s (8 rows) + P and dS of 8 rows × 32 keys."""
    rows = s["FUSED_BWD_ROWS"]
    return 4 * (s["rows"] * ((d_k | 1) + (d_v | 1)) + rows * (d_k + d_v) + 2 * rows * s["rows"])


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
GEMM_8X8 = dict(rows=_gemm_8x8_edge)  # threads: its __launch_bounds__
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
           rows="FUSED_KEYS", tile="FUSED_BWD_ROWS", threads=lambda s: 32 * s["FUSED_BWD_ROWS"],
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
    bench times beside the default."""
    return sorted(family(name, stage))[-2::-1]


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


def check_kernel_runs(entry: str, cc: tuple[int, int]) -> None:
    """Refuse, in one line, a kernel the GPU cannot run, before the driver is asked to launch it."""
    k = row_of(entry)
    if k is None or k.runs_on(cc):
        return
    if k.cc_exact:
        fallback = family(k.family, k.stage)[default_variant(k.family, k.stage, None)]
        raise AndreaError(f"{entry} uses Hopper's wgmma, which only compute capability {_cc_text(k.cc)} "
                          f"(sm_90a: H100, H200) has; this GPU has {_cc_text(cc)}: run {fallback.stem} "
                          f"(mma.sync, any GPU from sm_{fallback.cc[0]}{fallback.cc[1]}) on it")
    raise AndreaError(f"{entry} uses Ampere instructions (bf16, mma.sync) that need compute capability "
                      f"{_cc_text(k.cc)} (sm_{k.cc[0]}{k.cc[1]}); this GPU has {_cc_text(cc)}: "
                      "use the fp32 kernels on it")


def default_variant(name: str, stage: str, cc: tuple[int, int] | None, d_k: int | None = None,
                    d_v: int | None = None) -> int:
    """The fastest variant of a family's stage the device runs at these widths: the highest. A
    kernel for one compute capability alone (kernel6, wgmma) is the default only there, not in
    the CPU build (cc None), where speed is not the point."""
    rows = family(name, stage).values()
    return max(k.variant for k in rows if k.runs_on(cc) and not (cc is None and k.cc_exact)
               and (d_k is None or k.takes(d_k, d_v)))


def matmul_products(entry: str) -> int:
    k = row_of(entry)
    return k.products if k else 0
