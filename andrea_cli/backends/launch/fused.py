"""Launch a fused attention kernel (attention_fused_kernel1, 2 or 3): one launch for every head,
the T×T matrices never built. Drives cupy or the CPU build through the same `KernelDevice`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from andrea_cli.backends.launch.device import KernelDevice, Transfers, cdiv, timed_runs
from andrea_cli.errors import AndreaError
from andrea_cli.masks import MaskSpec
from andrea_cli.reference import scale_for

FUSED_KEYS = 32  # must match FUSED_KEYS in cuda/microgpt_cuda.cu
FUSED_MAX_D = 128  # must match FUSED_MAX_D: each lane keeps d_v / 32 output columns in registers
WHY_MAX_D = f"the fused kernel keeps d_v / 32 columns per lane in registers: d_k, d_v <= {FUSED_MAX_D}"
ROWS_PER_BLOCK = 8  # query rows (warps) per block; they share every K/V tile loaded


@dataclass
class FusedOutputs:
    output: np.ndarray  # (H, T, d_v)
    timings_ms: dict[str, float]  # {"fused": ms, "total": ms}
    transfer_ms: dict[str, float] = field(default_factory=dict)
    load_ms: float = 0.0
    device_output: Any = field(default=None, repr=False)  # the output where the kernel wrote it
    kernel: str | None = None  # the kernel that ran, where the device chose it (bf16: kernel6 on sm_90)


def check_fused_shape(d_k: int, d_v: int) -> None:
    for flag, d in (("d_k", d_k), ("d_v", d_v)):
        if d > FUSED_MAX_D:
            raise AndreaError(
                f"the fused kernel takes {flag} <= {FUSED_MAX_D} (got {d}): run without --fused for wider heads"
            )


FUSED_VARIANTS = (1, 2, 3)  # attention_fused_kernel1, attention_fused_kernel2, attention_fused_kernel3_d*
REGISTER_TILED_D = (64, 128)  # kernel3's entry points: attention_fused_kernel3_d64, _d128
FUSED3_ROWS, FUSED3_THREADS = 64, 128  # must match FUSED3_ROWS and FUSED3_THREADS in the kernel file


def fused_variants(d_k: int, d_v: int) -> list[int]:
    """The fused kernels that take these widths: kernel1 any width; kernel2 (float4 loads) widths
    divisible by 4; kernel3 (register-tiled, the head size compiled in) d_k = d_v = 64 or 128."""
    variants = [1, 2] if d_k % 4 == 0 and d_v % 4 == 0 else [1]
    return variants + [3] if d_k == d_v and d_k in REGISTER_TILED_D else variants


def _why_not(variant: int, d_k: int, d_v: int) -> str:
    needs = {2: "d_k and d_v divisible by 4",
             3: f"d_k = d_v, one of {', '.join(map(str, REGISTER_TILED_D))}"}.get(variant, "a variant of 1, 2 or 3")
    return f"attention_fused_kernel{variant} needs {needs} (got d_k {d_k}, d_v {d_v})"


def default_variant(d_k: int, d_v: int) -> int:
    """The fastest fused kernel that takes these widths."""
    return max(fused_variants(d_k, d_v))


def shared_bytes(d_k: int, d_v: int, rows: int = ROWS_PER_BLOCK, variant: int = 1) -> int:
    """q_s (rows, d_k) + k_s (32, padded d_k) + v_s (32, d_v), float32. At d = 128 with 8 rows:
    36,992 (kernel1) or 37,376 (kernel2) bytes, under the 48 KiB every GPU gives without an opt-in.
    Kernel3: q_s (64, d) + k_s (64, d + 4) + v_s (64, d): 50,176 bytes at d = 64, 99,328 at 128
    (the cuda backend opts in above 48 KiB)."""
    if variant == 3:
        return 4 * (3 * FUSED3_ROWS * d_k + 4 * FUSED3_ROWS)
    k_stride = d_k | 1 if variant == 1 else d_k + 4
    return 4 * (rows * d_k + FUSED_KEYS * k_stride + FUSED_KEYS * d_v)


def launch_fused(dev: KernelDevice, dq, dk, dv, out, H: int, T: int, d_k: int, d_v: int, *,
                 mask: MaskSpec, scaled: bool, rows: int = ROWS_PER_BLOCK, variant: int | None = None) -> None:
    """One launch on arrays already on the device (bench times exactly this)."""
    variant = default_variant(d_k, d_v) if variant is None else variant
    if variant not in fused_variants(d_k, d_v):
        raise AndreaError(_why_not(variant, d_k, d_v))
    scale = scale_for(d_k, scaled)
    if variant == 3:  # 64 query rows per block of 128 threads; the head size is in the name
        dev.get_function(f"attention_fused_kernel3_d{d_k}")(
            (cdiv(T, FUSED3_ROWS), 1, H), (FUSED3_THREADS, 1, 1),
            (dq, dk, dv, out, np.int32(T), np.float32(scale), *mask.kernel_args()),
            shared_mem=shared_bytes(d_k, d_v, variant=3),
        )
        return
    dev.get_function(f"attention_fused_kernel{variant}")(
        (cdiv(T, rows), 1, H), (32, rows, 1),
        (dq, dk, dv, out, np.int32(T), np.int32(d_k), np.int32(d_v), np.float32(scale), *mask.kernel_args()),
        shared_mem=shared_bytes(d_k, d_v, rows, variant),
    )


def run_fused(dev: KernelDevice, q, k, v, *, mask: MaskSpec, scaled: bool,
              rows: int = ROWS_PER_BLOCK, variant: int | None = None) -> FusedOutputs:
    """q, k: (H, T, d_k); v: (H, T, d_v) -> output (H, T, d_v) and the kernel's time."""
    H, T, d_k = q.shape
    d_v = v.shape[-1]
    check_fused_shape(d_k, d_v)

    transfers = Transfers(dev)
    dq, dk, dv = transfers.upload(q, k, v)

    out = dev.empty((H, T, d_v))

    def launch(clock):
        clock.start("fused")
        launch_fused(dev, dq, dk, dv, out, H, T, d_k, d_v, mask=mask, scaled=scaled, rows=rows, variant=variant)
        clock.stop("fused")

    timings = timed_runs(dev, launch)
    timings["total"] = timings["fused"]
    (host,) = transfers.download(out)
    return FusedOutputs(host, timings, transfers.elapsed_ms(), device_output=out)
