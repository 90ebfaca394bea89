"""Launch a fused attention kernel (attention_fused_kernel1, 2 or 3): one launch for every head,
the T×T matrices never built. Drives cupy or the CPU build through the same `KernelDevice`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from andrea_cli.backends.launch.catalogue import family
from andrea_cli.backends.launch.kernel_spec import define
from andrea_cli.backends.launch.device import KernelDevice, Transfers, cdiv, timed_runs
from andrea_cli.backends.launch.shapes import check_shapes
from andrea_cli.backends.launch.staged import check_bias
from andrea_cli.errors import AndreaError
from andrea_cli.masks import MaskSpec
from andrea_cli.scale import Scale

FUSED = family("fused", "fused")  # {variant: its row}: kernel1, kernel2 (float4 loads), kernel3 (register-tiled)
FUSED_KEYS = FUSED[1].tile_size()  # keys per tile of kernel1 and 2 (and of the fused backward): one per lane
FUSED_MAX_D = define("FUSED_MAX_D")  # each lane keeps d_v / 32 output columns in registers
WHY_MAX_D = f"the fused kernel keeps d_v / 32 columns per lane in registers: d_k, d_v <= {FUSED_MAX_D}"
ROWS_PER_BLOCK = FUSED[1].block_rows()  # query rows (warps) per block; they share every K/V tile loaded


@dataclass
class FusedOutputs:
    output: np.ndarray  # (H, T, d_v)
    timings_ms: dict[str, float]  # {"fused": ms, "total": ms}
    transfer_ms: dict[str, float] = field(default_factory=dict)
    load_ms: float = 0.0
    device_output: Any = field(default=None, repr=False)  # the output where the kernel wrote it
    kernels: dict[str, str] = field(default_factory=dict)  # {stage: the kernel it ran}

    @property
    def kernel(self) -> str:
        """The fused kernel that ran (bf16: kernel6 on sm_90, where the device chose it)."""
        return self.kernels["fused"]


def check_fused_shape(d_k: int, d_v: int) -> None:
    for flag, d in (("d_k", d_k), ("d_v", d_v)):
        if d > FUSED_MAX_D:
            raise AndreaError(
                f"the fused kernel takes {flag} <= {FUSED_MAX_D} (got {d}): run without --fused for wider heads"
            )


def fused_variants(d_k: int, d_v: int) -> list[int]:
    """The fused kernels that take these widths: kernel1 any width; kernel2 (float4 loads) widths
    divisible by 4; kernel3 (register-tiled, the head size compiled in) d_k = d_v = 64 or 128.
    Every one takes every mask, a mask array included."""
    return [variant for variant, k in FUSED.items() if k.takes(d_k, d_v)]


def why_not(k, d_k: int, d_v: int) -> str:
    """Why a row of the table does not take these widths."""
    return f"{k.stem} needs {k.needs()} (got d_k {d_k}, d_v {d_v})"


def default_variant(d_k: int, d_v: int) -> int:
    """The fastest fused kernel that takes these widths."""
    return max(fused_variants(d_k, d_v))


def shared_bytes(d_k: int, d_v: int, rows: int = ROWS_PER_BLOCK, variant: int = 1) -> int:
    """q_s (rows, d_k) + k_s (32, padded d_k) + v_s (32, d_v), float32. At d = 128 with 8 rows:
    36,992 (kernel1) or 37,376 (kernel2) bytes, under the 48 KiB every GPU gives without an opt-in.
    Kernel3: q_s (64, d) + k_s (64, d + 4) + v_s (64, d): 50,176 bytes at d = 64, 99,328 at 128
    (the cuda backend opts in above 48 KiB)."""
    k = FUSED[variant]
    return k.shared_bytes(d_k, d_v, rows=None if k.head_sizes else rows)


def bias_tile_bytes(k, d: int) -> int:
    """Kernel3's mask-array tile b_s (its rows, its keys), float32, beside its other tiles."""
    return 4 * k.block_rows(d) * k.tile_size(d)


def launch_fused(dev: KernelDevice, dq, dk, dv, out, H: int, T: int, d_k: int, d_v: int, *,
                 mask: MaskSpec, scale: Scale, rows: int = ROWS_PER_BLOCK, variant: int | None = None,
                 S: int | None = None, H_kv: int | None = None, dbias=None) -> dict[str, str]:
    """One launch on arrays already on the device (bench times exactly this); {"fused": the kernel}.
    T: the query rows (L), S: the keys (T unless given); H query heads over H_kv K/V heads.
    dbias: a mask array's bias on the device, (1 or H, L, S), for mask.kind "array"."""
    check_fused_shape(d_k, d_v)
    variant = default_variant(d_k, d_v) if variant is None else variant
    if variant not in FUSED:
        raise AndreaError(f"the fused kernels are attention_fused_kernel{', '.join(map(str, FUSED))} (got {variant})")
    k = FUSED[variant]
    if not k.takes(d_k, d_v):
        raise AndreaError(why_not(k, d_k, d_v))
    L, S = T, T if S is None else S
    lengths = (np.int32(L), np.int32(S))
    group = np.int32(H // (H if H_kv is None else H_kv))  # query heads per K/V head
    if mask.is_array and dbias is None:
        raise ValueError("a mask array needs its bias on the device (dbias)")
    # the whole Mask, then the mask array (None, 0 without one) with its heads: 1 broadcasts
    mask_args = mask.kernel_args(L, S, heads=H)
    bias_args = (dbias, np.int32(mask.bias.size // (L * S))) if mask.is_array else (None, np.int32(0))
    name = k.entry(d_k if k.head_sizes else None)
    if k.head_sizes:  # register-tiled: its own rows and threads per block; the head size is in the name
        dev.get_function(name)(
            (cdiv(L, k.block_rows(d_k)), 1, H), (k.block_threads(d_k), 1, 1),
            (dq, dk, dv, out, *lengths, group, np.float32(scale.factor), *mask_args, *bias_args),
            shared_mem=k.shared_bytes(d_k, d_v) + (bias_tile_bytes(k, d_k) if mask.is_array else 0),
        )
        return {"fused": name}
    dev.get_function(name)(
        (cdiv(L, rows), 1, H), (32, rows, 1),
        (dq, dk, dv, out, *lengths, np.int32(d_k), np.int32(d_v), group, np.float32(scale.factor), *mask_args,
         *bias_args),
        shared_mem=k.shared_bytes(d_k, d_v, rows=rows),
    )
    return {"fused": name}


def run_fused(dev: KernelDevice, q, k, v, *, mask: MaskSpec, scale: Scale,
              rows: int = ROWS_PER_BLOCK, variant: int | None = None) -> FusedOutputs:
    """q (H, L, d_k), k (H_kv, S, d_k), v (H_kv, S, d_v) -> output (H, L, d_v) and the kernel's time."""
    H, T, d_k = q.shape
    H_kv, S, d_v = v.shape
    check_shapes(q, k, v)
    check_fused_shape(d_k, d_v)

    transfers = Transfers(dev)
    dq, dk, dv = transfers.upload(q, k, v)
    dbias = None
    if mask.is_array:
        check_bias(mask.bias, H, T, S)
        dbias, = transfers.upload(mask.bias.reshape(-1, T, S))

    out = dev.empty((H, T, d_v))

    def launch(clock):
        clock.start("fused")
        ran = launch_fused(dev, dq, dk, dv, out, H, T, d_k, d_v, mask=mask, scale=scale, rows=rows, variant=variant,
                           S=S, H_kv=H_kv, dbias=dbias)
        clock.stop("fused")
        return ran

    timings, ran = timed_runs(dev, launch)
    timings["total"] = timings["fused"]
    (host,) = transfers.download(out)
    return FusedOutputs(host, timings, transfers.elapsed_ms(), device_output=out, kernels=ran)
