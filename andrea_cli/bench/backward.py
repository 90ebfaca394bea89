"""The backward pass in `andrea bench`: dQ, dK, dV from dO (bench.upstream_gradient), timed after
a forward run done in `prepare` (what the backward needs of it: P for the staged path, O and the
row logsumexp for the fused one, torch's autograd graph), so only the backward is on the clock.
Costs by FlashAttention's convention: 2.5 × the forward's FLOPs (roofline.backward_flops)."""

from __future__ import annotations

from functools import partial

import numpy as np

from andrea_cli.bench.sweep import Impl, io_bytes, tt_bytes, upstream_gradient
from andrea_cli.masks import MaskSpec
from andrea_cli.scale import course_scale

IO_ARRAYS = 9  # Q, K, V, O, dO, dQ, dK, dV and the copy of dO: (H, T, d_k) each


def numpy_backward_impl() -> Impl:
    """The staged backward in float32 NumPy (BLAS matmuls), P from a forward done in prepare."""

    def prepare(q, k, v, mask: MaskSpec):
        T, d_k = q.shape[1], q.shape[2]
        scale = np.float32(course_scale(d_k).factor)
        s = np.matmul(q, k.transpose(0, 2, 1)) * scale  # (H, T, T)
        if mask.hides_future:
            s[:, ~mask.visible(T)] = -np.inf
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        del s
        d_out = upstream_gradient(q)

        def run():
            run.dv = np.matmul(p.transpose(0, 2, 1), d_out)  # kept on the function: timed, not returned
            dp = np.matmul(d_out, v.transpose(0, 2, 1))  # (H, T, T)
            dp -= (dp * p).sum(axis=-1, keepdims=True)
            dp *= p  # dS, in place
            run.dk = np.matmul(dp.transpose(0, 2, 1), q) * scale
            return np.matmul(dp, k) * scale  # dQ

        return run

    # P and dP, the product dP ∘ P of the rowsum, and a transposed view's copy: (H, T, T) each
    return Impl("numpy_backward", prepare, direction="backward",
                peak_bytes=lambda H, T, d_k, mask: tt_bytes(H, T, 4) + (10.0 * T * T if mask.hides_future else 0)
                + io_bytes(H, T, d_k, IO_ARRAYS))


def staged_backward_impl(backend, gemm_variant: int = 2) -> Impl:
    """The staged backward kernels (dv, dp, ds, dq, dk), P from the staged forward in prepare;
    gemm_variant 2: dv/dp/dq/dk_kernel2 (register-tiled), 1: their kernel1 (one output per thread)."""
    from andrea_cli.backends.launch.backward import launch_staged_backward
    from andrea_cli.backends.launch.staged import allocate_stages, launch_stages

    dev = backend.device()

    def prepare_on(dev, q, k, v, mask: MaskSpec):
        H, T, d_k = q.shape
        gq, gk, gv, gdo = (dev.to_device(a) for a in (q, k, v, upstream_gradient(q)))
        buf = allocate_stages(dev, H, T, d_k, mask=mask, scaled=True)
        launch_stages(dev, gq, gk, gv, buf, T=T, d_k=d_k, d_v=d_k, H=H, mask=mask, scale=course_scale(d_k))
        dp, ds = buf.scores, dev.empty((H, T, T))  # the forward's scores are spent: dP takes their place
        dq, dk, dv = (dev.empty((H, T, d_k)) for _ in range(3))

        def run():
            run.kernels = launch_staged_backward(dev, buf.weights, gq, gk, gv, gdo, dp, ds, dq, dk, dv, T=T, d_k=d_k, d_v=d_k,
                                   H=H, mask=mask, scale=course_scale(d_k), gemm_variant=gemm_variant)
            return dq

        return run

    # the forward's scores, scaled, weights (and masked when causal), and dS: (H, T, T) each
    return Impl("staged_backward" if gemm_variant == 2 else f"staged_backward_kernel{gemm_variant}", partial(prepare_on, dev), prepare_on=prepare_on, to_host=dev.to_host, direction="backward",
                peak_bytes=lambda H, T, d_k, mask: tt_bytes(H, T, 4 + mask.hides_future) + io_bytes(H, T, d_k, IO_ARRAYS))


def fused_backward_impl(backend, *, name: str = "fused_backward", speed_path: bool = True, **limits) -> Impl:
    """The fused backward (delta, dkdv, dq), O and the logsumexp from the fused forward in prepare."""
    from andrea_cli.backends.launch.backward import default_lse_variant, launch_fused_backward, launch_fused_lse
    from andrea_cli.backends.launch.fused import FUSED_MAX_D, WHY_MAX_D

    dev = backend.device()

    def prepare_on(dev, q, k, v, mask: MaskSpec):
        H, T, d_k = q.shape
        gq, gk, gv, gdo = (dev.to_device(a) for a in (q, k, v, upstream_gradient(q)))
        out, lse, delta = dev.empty((H, T, d_k)), dev.empty((H, T)), dev.empty((H, T))
        launch_fused_lse(dev, gq, gk, gv, out, lse, T=T, d_k=d_k, d_v=d_k, H=H, mask=mask, scale=course_scale(d_k),
                         variant=default_lse_variant(d_k, d_k))
        dq, dk, dv = (dev.empty((H, T, d_k)) for _ in range(3))

        def run():
            run.kernels = launch_fused_backward(dev, gq, gk, gv, out, gdo, lse, delta, dq, dk, dv, T=T, d_k=d_k, d_v=d_k, H=H,
                                  mask=mask, scale=course_scale(d_k))
            return dq

        return run

    return Impl(name, partial(prepare_on, dev), prepare_on=prepare_on, to_host=dev.to_host, direction="backward", speed_path=speed_path,
                max_d_k=FUSED_MAX_D, why_max_d_k=WHY_MAX_D, **limits,
                peak_bytes=lambda H, T, d_k, mask: io_bytes(H, T, d_k, IO_ARRAYS) + 8.0 * H * T)


def fused_bf16_backward_impl(backend, *, name: str = "fused_bf16_backward", speed_path: bool = True,
                             peer: str | None = "torch_sdpa_bf16_backward", **limits) -> Impl:
    """The bf16 backward on tensor cores (delta, dkdv_kernel2, dq_kernel2) on bf16 copies of Q, K,
    V and dO made in prepare, O and the logsumexp from attention_fused_lse_kernel4 there too (torch's
    bf16 backward is timed the same way: its inputs bf16 before the clock starts)."""
    from andrea_cli.backends.launch.backward_bf16 import launch_backward_bf16, launch_fused_lse_bf16
    from andrea_cli.backends.launch.fused_bf16 import BF16_DIMS, convert_inputs, launch_to_bf16

    dev = backend.device()

    def prepare_on(dev, q, k, v, mask: MaskSpec):
        H, T, d_k = q.shape
        gq, gk, gv, gdo = (dev.to_device(a) for a in (q, k, v, upstream_gradient(q)))
        qb, kb, vb = convert_inputs(dev, gq, gk, gv, (H, T, d_k), course_scale(d_k))
        dob = dev.empty((H, T, d_k), dtype=np.uint16)
        launch_to_bf16(dev, gdo, dob, H * T * d_k, 1.0)
        out, lse, delta = dev.empty((H, T, d_k)), dev.empty((H, T)), dev.empty((H, T))
        launch_fused_lse_bf16(dev, qb, kb, vb, out, lse, H=H, T=T, d=d_k, mask=mask)
        dq, dk, dv = (dev.empty((H, T, d_k)) for _ in range(3))

        def run():
            run.kernels = launch_backward_bf16(dev, qb, kb, vb, dob, out, gdo, lse, delta, dq, dk, dv, H=H, T=T, d=d_k,
                                 mask=mask, scale=course_scale(d_k))
            return dq

        return run

    # float32 Q, K, V, dO, O, dQ, dK, dV and four bf16 copies (two float32 arrays' worth)
    return Impl(name, partial(prepare_on, dev), prepare_on=prepare_on, to_host=dev.to_host, direction="backward", speed_path=speed_path,
                only_d_ks=BF16_DIMS, precision="bf16", peer=peer, **limits,
                peak_bytes=lambda H, T, d_k, mask: io_bytes(H, T, d_k, IO_ARRAYS + 1) + 8.0 * H * T)

