"""PyTorch's scaled_dot_product_attention as a bench peer, on either side, when torch imports."""

from __future__ import annotations

from andrea_cli.bench.sweep import Impl, io_bytes, upstream_gradient


def torch_peak_bytes(H, T, d_k, causal):
    """A bound for SDPA's unfused math backend, the most it can take when no fused kernel applies:
    scores, then _safe_softmax's softmax, -inf test (bool), zeros and where: 18 bytes per score;
    causal adds a (T, T) bool and float mask."""
    return 18.0 * H * T * T + (5.0 * T * T if causal else 0) + io_bytes(H, T, d_k, 6)


def torch_reason(device: str = "cpu") -> str | None:
    """Why torch SDPA cannot be measured on this device, or None when it can."""
    try:
        import torch
    except Exception as exc:
        return f"torch is not importable ({type(exc).__name__})"
    if device == "cuda" and not torch.cuda.is_available():
        return f"torch {torch.__version__} has no usable CUDA"
    return None


def torch_impl(device: str, precision: str = "fp32") -> Impl:
    """precision bf16: inputs converted before timing, the peer of the tensor-core kernel."""

    def prepare(q, k, v, causal):
        import torch
        import torch.nn.functional as F

        # (1, H, T, d): the batch-and-heads layout SDPA's fused (flash / memory-efficient)
        # kernels expect; with 3-D inputs it may fall back to its unfused math path
        dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        tq, tk, tv = (torch.as_tensor(a, device=device).to(dtype)[None] for a in (q, k, v))

        def run():
            with torch.no_grad():
                return F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)

        return run

    return Impl("torch_sdpa" if precision == "fp32" else f"torch_sdpa_{precision}", prepare,
                to_host=lambda t: t[0].float().cpu().numpy(), peak_bytes=torch_peak_bytes, precision=precision)


def torch_backward_impl(device: str, precision: str = "fp32") -> Impl:
    """torch SDPA's backward through autograd: the forward in prepare, the graph kept for every
    repeat. precision bf16: bf16 leaves and dO, the peer of the tensor-core backward."""

    def prepare(q, k, v, causal):
        import torch
        import torch.nn.functional as F

        # (1, H, T, d) as the forward's peer; leaves that require grad, so autograd returns dQ
        dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        tq, tk, tv = (torch.as_tensor(a[None], device=device).to(dtype).requires_grad_() for a in (q, k, v))
        t_do = torch.as_tensor(upstream_gradient(q)[None], device=device).to(dtype)
        out = F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)

        def run():
            return torch.autograd.grad(out, (tq, tk, tv), t_do, retain_graph=True)[0]

        return run

    # what the forward keeps for autograd, and as much again for the backward's temporaries
    name = "torch_sdpa_backward" if precision == "fp32" else f"torch_sdpa_{precision}_backward"
    return Impl(name, prepare, to_host=lambda t: t[0].float().cpu().numpy(), direction="backward",
                peak_bytes=lambda H, T, d_k, causal: 2 * torch_peak_bytes(H, T, d_k, causal), precision=precision)
