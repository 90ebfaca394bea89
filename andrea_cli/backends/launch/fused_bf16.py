"""Launch a tensor-core kernel (attention_fused_kernel6_d64/_d128 by default on an sm_90 GPU, kernel5
elsewhere and in the CPU build, kernel4 on request):
Q, K, V converted to bf16 on the device by to_bf16_kernel1 (Q pre-scaled by scale·log2 e), then one
fused launch for every head. Drives cupy or the CPU build through the same `KernelDevice` as the
fp32 launchers."""

from __future__ import annotations

import math

import numpy as np

from andrea_cli.backends.launch.catalogue import default_variant, family, kernel
from andrea_cli.backends.launch.kernel_spec import Kernel
from andrea_cli.backends.launch.fused import FusedOutputs
from andrea_cli.backends.launch.device import KernelDevice, Transfers, cdiv, timed_runs
from andrea_cli.backends.launch.shapes import check_shapes
from andrea_cli.backends.launch.tensor_maps import kv_tensor_maps
from andrea_cli.errors import AndreaError
from andrea_cli.masks import MaskSpec
from andrea_cli.scale import Scale

PRECISIONS = ("fp32", "bf16")  # attend --precision; fp32 runs the FP32 fused kernels
BF16_KERNELS = family("fused_bf16", "fused")  # {variant: its row}: kernel4, kernel5, kernel6 (wgmma)
TO_BF16 = kernel("fused_bf16", "to_bf16")
BF16_DIMS = BF16_KERNELS[min(BF16_KERNELS)].head_sizes  # the head sizes every one has an entry point for


def default_bf16_variant(cc: tuple[int, int] | None) -> int:
    """The fastest kernel the device runs: kernel6 (wgmma) on compute capability 9.0; kernel5
    elsewhere, and in the CPU build (cc None), where speed is not the point and kernel5 is
    andrea's default everywhere but Hopper."""
    return default_variant("fused_bf16", "fused", cc)


def bf16_kernel(variant: int | None, cc: tuple[int, int] | None = None) -> Kernel:
    if variant is None:
        return BF16_KERNELS[default_bf16_variant(cc)]
    if variant not in BF16_KERNELS:
        raise AndreaError(f"the tensor-core kernels are attention_fused_kernel{', '.join(map(str, BF16_KERNELS))} "
                          f"(got {variant})")
    return BF16_KERNELS[variant]


def device_cc(dev) -> tuple[int, int] | None:
    """The device's compute capability (a cupy-backed device), None for the CPU build."""
    return getattr(dev, "compute_capability", None)


LOG2E = math.log2(math.e)


def check_bf16_shape(d_k: int, d_v: int) -> None:
    if d_k != d_v or d_k not in BF16_DIMS:
        raise AndreaError(f"--precision bf16 runs the tensor-core kernel, built for d_k = d_v = "
                          f"{' or '.join(map(str, BF16_DIMS))} (got d_k {d_k}, d_v {d_v}): use --d-k "
                          f"{' or '.join(map(str, BF16_DIMS))}, or --precision fp32")


def shared_bytes_bf16(d: int, variant: int | None = None) -> int:
    """The dynamic shared memory of a kernel's block: q_s (rows, d+8) and two stages of K and V
    (64 keys each), bf16. kernel4 and kernel5 pad every row by 8 (ldmatrix's banks): 46,080 / 87,040
    and 55,296 / 104,448 bytes at d = 64 / 128; kernel6's K and V sit unpadded in wgmma's layout:
    51,200 / 100,352. All above the 48 KiB default: the cuda device opts in."""
    return bf16_kernel(variant).shared_bytes(d)


def q_multiplier(scale: Scale) -> float:
    """Q's factor in its conversion: the softmax scale times log2(e), so the kernel uses exp2."""
    return scale.factor * LOG2E


CONVERT_GRID = 4096  # to_bf16_kernel1's most blocks: a grid-stride loop does the rest


def launch_to_bf16(dev: KernelDevice, x, out, n: int, multiplier: float) -> dict[str, str]:
    threads = TO_BF16.block_threads()
    grid = max(1, min(cdiv(n, TO_BF16.tile_size() * threads), CONVERT_GRID))
    dev.get_function(TO_BF16.entry())((grid,), (threads,),
                                      (x, out, np.int64(n), np.float32(multiplier)))
    return {"to_bf16": TO_BF16.entry()}


def launch_fused_bf16(dev: KernelDevice, qb, kb, vb, out, H: int, T: int, d: int, *, mask: MaskSpec,
                      variant: int | None = None, S: int | None = None, group: int = 1) -> dict[str, str]:
    """One launch on bf16 arrays already on the device (bench times exactly this); {"fused": the kernel}.
    T (= L) query rows per head against S keys (S = T unless given); `group` query heads per K/V
    head (query head h reads K/V head h // group). The whole Mask: two-sided windows, sinks, ALiBi."""
    S = T if S is None else S
    kernel = bf16_kernel(variant, device_cc(dev))
    name = kernel.entry(d)
    maps = kv_tensor_maps(dev, kb, vb, H // group * S, d) if kernel.tensor_maps else ()
    dev.get_function(name)(
        (cdiv(T, kernel.block_rows(d)), 1, H), (kernel.block_threads(d), 1, 1),
        (qb, kb, vb, out, np.int32(T), np.int32(S), np.int32(group), *mask.kernel_args(T, S, heads=H), *maps),
        shared_mem=kernel.shared_bytes(d),
    )
    return {"fused": name}


def convert_inputs(dev: KernelDevice, dq, dk, dv, shape: tuple[int, int, int], scale: Scale,
                   kv_shape: tuple[int, int, int] | None = None):
    """The bf16 copies of Q (pre-scaled), K and V, made on the device (by TO_BF16); Q of `shape`,
    K and V of `kv_shape` (H_kv, S, d) where it differs."""
    kv_shape = shape if kv_shape is None else kv_shape
    copies = []
    for x, multiplier, size in ((dq, q_multiplier(scale), shape), (dk, 1.0, kv_shape), (dv, 1.0, kv_shape)):
        xb = dev.empty(size, dtype=np.uint16)
        launch_to_bf16(dev, x, xb, size[0] * size[1] * size[2], multiplier)
        copies.append(xb)
    return copies


def run_fused_bf16(dev: KernelDevice, q, k, v, *, mask: MaskSpec, scale: Scale,
                   variant: int | None = None) -> FusedOutputs:
    """q (H, L, d), k and v (H_kv, S, d) float32 -> output (H, L, d) float32; timings of the
    conversion and the kernel. L != S through the mask's offset, grouped K/V heads in the
    kernels' indexing (nothing copied)."""
    check_shapes(q, k, v)
    H, T, d_k = q.shape
    H_kv, S = k.shape[:2]
    check_bf16_shape(d_k, v.shape[-1])

    transfers = Transfers(dev)
    dq, dk, dv = transfers.upload(q, k, v)

    out = dev.empty((H, T, d_k))

    def launch(clock):
        clock.start("to_bf16")
        qb, kb, vb = convert_inputs(dev, dq, dk, dv, (H, T, d_k), scale, kv_shape=(H_kv, S, d_k))
        clock.stop("to_bf16")
        clock.start("fused")
        ran = launch_fused_bf16(dev, qb, kb, vb, out, H, T, d_k, mask=mask, variant=variant, S=S, group=H // H_kv)
        clock.stop("fused")
        return {"to_bf16": TO_BF16.entry(), **ran}

    timings, ran = timed_runs(dev, launch)
    timings["total"] = timings["to_bf16"] + timings["fused"]
    (host,) = transfers.download(out)
    return FusedOutputs(host, timings, transfers.elapsed_ms(), device_output=out, kernels=ran)
