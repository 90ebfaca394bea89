"""Launch a tensor-core kernel (attention_fused_kernel6_d64/_d128 by default on an sm_90 GPU, kernel5
elsewhere and in the CPU build, kernel4 on request):
Q, K, V converted to bf16 on the device by to_bf16_kernel1 (Q pre-scaled by scale·log2 e), then one
fused launch for every head. Drives cupy or the CPU build through the same `KernelDevice` as the
fp32 launchers."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from andrea_cli.backends.launch.fused import FusedOutputs
from andrea_cli.backends.launch.device import KernelDevice, Transfers, cdiv, timed_runs
from andrea_cli.errors import AndreaError
from andrea_cli.masks import MaskSpec
from andrea_cli.reference import scale_for

PRECISIONS = ("fp32", "bf16")  # attend --precision; fp32 runs the FP32 fused kernels
BF16_DIMS = (64, 128)  # head sizes with an entry point: attention_fused_kernel4_d64, _d128
TC_ROWS = 64  # query rows per block (4 warps x 16): must match TC_ROWS in cuda/microgpt_cuda.cu
TC_KEYS = 64  # keys per K/V tile: must match TC_KEYS
TC_THREADS = 128


@dataclass(frozen=True)
class Bf16Kernel:
    """What a launch and the error bound of bf16_attention need to know of one tensor-core kernel
    (each figure must match the kernel file)."""

    variant: int
    rows: int  # query rows per block: TC_ROWS (kernel4), K5_ROWS (kernel5), K6_ROWS (kernel6)
    softmax_keys: dict[int, int]  # d -> keys per online-softmax step (a running max per step)
    exp2_error_u: float  # its exp2's relative error bound, in units of u = 2^-24 (an ulp is <= 2u)
    flushes_subnormals: bool  # ex2.approx.ftz: weights below 2^-126 become 0
    threads: int = TC_THREADS  # per block
    needs_cc: tuple[int, int] | None = None  # the one compute capability it runs on (sm_90a: wgmma)

    def name(self, d: int) -> str:
        return f"attention_fused_kernel{self.variant}_d{d}"

    def shared_bytes(self, d: int) -> int:
        """Dynamic shared memory of one block: q_s (rows, d+8) and two stages of K and V (64 keys
        each), bf16. kernel4 and kernel5 pad every row by 8 (ldmatrix's banks): 46,080 / 87,040 and
        55,296 / 104,448 bytes at d = 64 / 128; kernel6's K and V sit unpadded in wgmma's layout:
        51,200 / 100,352. All above the 48 KiB default: the cuda device opts in."""
        kv = 2 * 2 * TC_KEYS * (d if self.variant >= 6 else d + 8)
        return 2 * (self.rows * (d + 8) + kv)

    def runs_on(self, cc: tuple[int, int] | None) -> bool:
        """cc None: the CPU build, which runs every kernel."""
        return cc is None or self.needs_cc is None or tuple(cc) == self.needs_cc


# kernel4: exp2f, 2 ulp (the CUDA math library's stated bound): 4u. kernel5 and kernel6:
# ex2.approx.ftz, 2 ulp from the correctly rounded result (the PTX manual), so 2.5 ulp from the
# exact one: 5u; kernel5 steps through a 64-key tile 16 keys at a time at d 128 (STEP in the kernel)
BF16_KERNELS = {4: Bf16Kernel(4, TC_ROWS, {64: TC_KEYS, 128: TC_KEYS}, 4.0, False),
                5: Bf16Kernel(5, 128, {64: 64, 128: 16}, 5.0, True),
                6: Bf16Kernel(6, 128, {64: TC_KEYS, 128: TC_KEYS}, 5.0, True, threads=256, needs_cc=(9, 0))}
DEFAULT_BF16_VARIANT = 5  # the default where kernel6 cannot run (a GPU other than sm_90, the CPU build)
WGMMA_VARIANT = 6  # the default on an sm_90 GPU (H100, H200)


def default_bf16_variant(cc: tuple[int, int] | None) -> int:
    """The fastest kernel the device runs: kernel6 (wgmma) on compute capability 9.0; kernel5
    elsewhere, and in the CPU build (cc None), where speed is not the point and kernel5 is
    andrea's default everywhere but Hopper."""
    return WGMMA_VARIANT if cc is not None and BF16_KERNELS[WGMMA_VARIANT].runs_on(cc) else DEFAULT_BF16_VARIANT


def bf16_kernel(variant: int | None, cc: tuple[int, int] | None = None) -> Bf16Kernel:
    if variant is None:
        return BF16_KERNELS[default_bf16_variant(cc)]
    if variant not in BF16_KERNELS:
        raise AndreaError(f"the tensor-core kernels are attention_fused_kernel{', '.join(map(str, BF16_KERNELS))} "
                          f"(got {variant})")
    return BF16_KERNELS[variant]


def device_cc(dev) -> tuple[int, int] | None:
    """The device's compute capability (a cupy-backed device), None for the CPU build."""
    return getattr(dev, "compute_capability", None)


CONVERT_THREADS = 256
LOG2E = math.log2(math.e)


def check_bf16_shape(d_k: int, d_v: int) -> None:
    if d_k != d_v or d_k not in BF16_DIMS:
        raise AndreaError(f"--precision bf16 runs the tensor-core kernel, built for d_k = d_v = 64 or 128 "
                          f"(got d_k {d_k}, d_v {d_v}): use --d-k 64 or 128, or --precision fp32")


def shared_bytes_bf16(d: int, variant: int | None = None) -> int:
    """The dynamic shared memory of a kernel's block (Bf16Kernel.shared_bytes)."""
    return bf16_kernel(variant).shared_bytes(d)


def q_multiplier(d_k: int, scaled: bool) -> float:
    """Q's factor in its conversion: the softmax scale times log2(e), so the kernel uses exp2."""
    return scale_for(d_k, scaled) * LOG2E


def launch_to_bf16(dev: KernelDevice, x, out, n: int, multiplier: float) -> None:
    grid = max(1, min(cdiv(n, 2 * CONVERT_THREADS), 4096))
    dev.get_function("to_bf16_kernel1")((grid,), (CONVERT_THREADS,),
                                        (x, out, np.int64(n), np.float32(multiplier)))


def launch_fused_bf16(dev: KernelDevice, qb, kb, vb, out, H: int, T: int, d: int, *, mask: MaskSpec,
                      variant: int | None = None) -> None:
    """One launch on bf16 arrays already on the device (bench times exactly this)."""
    kernel = bf16_kernel(variant, device_cc(dev))
    dev.get_function(kernel.name(d))(
        (cdiv(T, kernel.rows), 1, H), (kernel.threads, 1, 1),
        (qb, kb, vb, out, np.int32(T), *mask.kernel_args()),
        shared_mem=kernel.shared_bytes(d),
    )


def convert_inputs(dev: KernelDevice, dq, dk, dv, shape: tuple[int, int, int], scaled: bool):
    """The bf16 copies of Q (pre-scaled), K and V, made on the device."""
    n = shape[0] * shape[1] * shape[2]
    copies = []
    for x, multiplier in ((dq, q_multiplier(shape[2], scaled)), (dk, 1.0), (dv, 1.0)):
        xb = dev.empty(shape, dtype=np.uint16)
        launch_to_bf16(dev, x, xb, n, multiplier)
        copies.append(xb)
    return copies


def run_fused_bf16(dev: KernelDevice, q, k, v, *, mask: MaskSpec, scaled: bool,
                   variant: int | None = None) -> FusedOutputs:
    """q, k, v: (H, T, d) float32 -> output (H, T, d) float32; timings of the conversion and the kernel."""
    H, T, d_k = q.shape
    check_bf16_shape(d_k, v.shape[-1])

    transfers = Transfers(dev)
    dq, dk, dv = transfers.upload(q, k, v)

    out = dev.empty((H, T, d_k))

    def launch(clock):
        clock.start("to_bf16")
        qb, kb, vb = convert_inputs(dev, dq, dk, dv, (H, T, d_k), scaled)
        clock.stop("to_bf16")
        clock.start("fused")
        launch_fused_bf16(dev, qb, kb, vb, out, H, T, d_k, mask=mask, variant=variant)
        clock.stop("fused")

    timings = timed_runs(dev, launch)
    timings["total"] = timings["to_bf16"] + timings["fused"]
    (host,) = transfers.download(out)
    return FusedOutputs(host, timings, transfers.elapsed_ms(), device_output=out,
                        kernel=bf16_kernel(variant, device_cc(dev)).name(d_k))
