"""Launch the bf16 backward on tensor cores: Q, K, V and dO converted to bf16 on the device
(to_bf16_kernel1, Q pre-scaled by scale·log2 e), the forward with its logsumexp
(attention_fused_lse_kernel4_d64/_d128), the rowsum term (attention_backward_delta_kernel1),
then attention_backward_dkdv_kernel2 and attention_backward_dq_kernel2. Drives cupy or the CPU
build through the same `KernelDevice` as the other launchers."""

from __future__ import annotations

import numpy as np

from andrea_cli.backends.launch.backward import BackwardOutputs, launch_delta
from andrea_cli.backends.launch.catalogue import kernel
from andrea_cli.backends.launch.device import KernelDevice, NoClock, Transfers, cdiv, timed_runs
from andrea_cli.backends.launch.shapes import check_shapes
from andrea_cli.backends.launch.fused_bf16 import check_bf16_shape, convert_inputs, launch_to_bf16
from andrea_cli.masks import MaskSpec
from andrea_cli.scale import Scale

# The forward that saves the logsumexp: attention_fused_lse_kernel4, kernel4's body (kernel5 has no
# lse twin yet); then dK, dV and dQ
LSE_FORWARD, DKDV, DQ = (kernel("fused_bf16_backward", stage, variant)
                         for stage, variant in (("forward", 4), ("dkdv", 2), ("dq", 2)))
LSE_FORWARD_VARIANT = LSE_FORWARD.variant
# What one run of it times, in launch order
BF16_BACKWARD_STAGES = ("to_bf16", "forward", "delta", "dkdv", "dq")


def dkdv_queries(d: int) -> int:
    """Query rows per tile of the dK/dV kernel: its template argument QT (64 at d = 64; 32 at
    d = 128, where 64 would spill): TC_BWD_QUERIES_D64, _D128 in the kernel file."""
    return DKDV.tile_size(d)


def dkdv_shared_bytes_bf16(d: int) -> int:
    """k_s, v_s (64, d+8) + q_s, o_s (2, QT, d+8), bf16, + lse_s, delta_s (2, QT) float:
    56,320 bytes at d = 64, 70,144 at d = 128 (the cuda device opts in above 48 KiB)."""
    return DKDV.shared_bytes(d)


def dq_shared_bytes_bf16(d: int) -> int:
    """q_s, o_s (64, d+8) + k_s, v_s (2, 64, d+8), bf16: 55,296 bytes at d = 64, 104,448 at d = 128."""
    return DQ.shared_bytes(d)


def launch_backward_bf16(dev: KernelDevice, qb, kb, vb, dob, out, d_out, lse, delta, dq, dk, dv, *, H: int,
                         T: int, d: int, mask: MaskSpec, scale: Scale, clock=None, S: int | None = None,
                         H_kv: int | None = None) -> dict[str, str]:
    """delta, dkdv, dq on arrays already on the device: bf16 qb (pre-scaled), kb, vb, dob; the
    forward's out and lse; float32 d_out for the rowsum term. T: the query rows (L), S the keys
    (T unless given), H_kv K/V heads (H unless given): a dK/dV block sums its group's query heads.
    Returns {stage: the kernel it ran}."""
    clock = clock or NoClock()
    i32 = np.int32
    L, S = T, T if S is None else S
    H_kv = H if H_kv is None else H_kv
    sizes = (i32(L), i32(S), i32(H // H_kv))
    mask_args = mask.kernel_args(L, S, heads=H)  # the whole Mask: ALiBi's bias in each recomputed P
    ran = launch_delta(dev, d_out, out, delta, T=L, d_v=d, H=H, clock=clock)
    name = ran["dkdv"] = DKDV.entry(d)
    clock.start("dkdv")
    dev.get_function(name)(
        (cdiv(S, DKDV.block_rows(d)), 1, H_kv), (DKDV.block_threads(d), 1, 1),
        (qb, kb, vb, dob, lse, delta, dk, dv, *sizes, *mask_args),
        shared_mem=dkdv_shared_bytes_bf16(d))
    clock.stop("dkdv")
    name = ran["dq"] = DQ.entry(d)
    clock.start("dq")
    dev.get_function(name)(
        (cdiv(L, DQ.block_rows(d)), 1, H), (DQ.block_threads(d), 1, 1),
        (qb, kb, vb, dob, lse, delta, dq, *sizes, np.float32(scale.factor), *mask_args),
        shared_mem=dq_shared_bytes_bf16(d))
    clock.stop("dq")
    return ran


def launch_fused_lse_bf16(dev: KernelDevice, qb, kb, vb, out, lse, *, H: int, T: int, d: int,
                          mask: MaskSpec, S: int | None = None, H_kv: int | None = None) -> dict[str, str]:
    S = T if S is None else S
    group = H // (H if H_kv is None else H_kv)
    # kernel4's body takes every flavour, but its lse entry points pass right, sinks and alibi as 0
    # (their launch, and a check of the bf16 backward on its own forward, still to come)
    mask.refuse_flavours("the bf16 forward the bf16 backward runs (attention_fused_lse_kernel4)",
                         "run the fp32 backward (drop --precision bf16)")
    name = LSE_FORWARD.entry(d)
    dev.get_function(name)(
        (cdiv(T, LSE_FORWARD.block_rows(d)), 1, H), (LSE_FORWARD.block_threads(d), 1, 1),
        (qb, kb, vb, out, lse, np.int32(T), np.int32(S), np.int32(group), *mask.kernel_args(T, S)),
        shared_mem=LSE_FORWARD.shared_bytes(d))
    return {"forward": name}


def run_backward_bf16(dev: KernelDevice, q, k, v, d_out, *, mask: MaskSpec, scale: Scale) -> BackwardOutputs:
    """q, d_out (H, L, d), k, v (H_kv, S, d) float32, d = 64 or 128 -> dQ (H, L, d), dK, dV
    (H_kv, S, d) float32, with the forward's output and logsumexp; no (L, S) array anywhere."""
    check_shapes(q, k, v)
    H, T, d = q.shape
    H_kv, S = k.shape[:2]
    check_bf16_shape(d, v.shape[-1])
    transfers = Transfers(dev)
    gq, gk, gv, gdo = transfers.upload(*(np.ascontiguousarray(a, dtype=np.float32) for a in (q, k, v, d_out)))

    out, lse, delta = dev.empty((H, T, d)), dev.empty((H, T)), dev.empty((H, T))
    dq, dk, dv = dev.empty((H, T, d)), dev.empty((H_kv, S, d)), dev.empty((H_kv, S, d))
    dob = dev.empty((H, T, d), dtype=np.uint16)

    def launch(clock):
        clock.start("to_bf16")
        qb, kb, vb = convert_inputs(dev, gq, gk, gv, (H, T, d), scale, kv_shape=(H_kv, S, d))
        ran = launch_to_bf16(dev, gdo, dob, H * T * d, 1.0)
        clock.stop("to_bf16")
        clock.start("forward")
        ran.update(launch_fused_lse_bf16(dev, qb, kb, vb, out, lse, H=H, T=T, d=d, mask=mask, S=S, H_kv=H_kv))
        clock.stop("forward")
        return {**ran, **launch_backward_bf16(dev, qb, kb, vb, dob, out, gdo, lse, delta, dq, dk, dv, H=H, T=T, d=d,
                                              mask=mask, scale=scale, clock=clock, S=S, H_kv=H_kv)}

    stage_ms, ran = timed_runs(dev, launch)
    timings = {name: stage_ms[name] for name in BF16_BACKWARD_STAGES}
    timings["total"] = sum(timings.values())
    host = transfers.download(dq, dk, dv, lse, out)
    return BackwardOutputs(*host[:3], timings, lse=host[3], output=host[4], transfer_ms=transfers.elapsed_ms(),
                           kernels=ran)
