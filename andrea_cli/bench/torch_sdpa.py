"""PyTorch's scaled_dot_product_attention as a bench peer, on either side, when torch imports:
its default choice of backend, or one backend pinned (FlashAttention-2's kernels, cuDNN's), the
peers the tensor-core kernel's targets name."""

from __future__ import annotations

import warnings

from andrea_cli.bench.sweep import Impl, io_bytes, upstream_gradient
from andrea_cli.errors import AndreaError
from andrea_cli.masks import MaskSpec

# pinned backends: name suffix -> torch.nn.attention.SDPBackend member
PINNED = {"flash": "FLASH_ATTENTION", "cudnn": "CUDNN_ATTENTION"}


def torch_peak_bytes(H, T, d_k, mask: MaskSpec):
    """A bound for SDPA's unfused math backend, the most it can take when no fused kernel applies:
    scores, then _safe_softmax's softmax, -inf test (bool), zeros and where: 18 bytes per score;
    causal adds a (T, T) bool and float mask."""
    return 18.0 * H * T * T + (5.0 * T * T if mask.hides_future else 0) + io_bytes(H, T, d_k, 6)


def is_causal(mask: MaskSpec) -> bool:
    """SDPA's is_causal: bench sweeps no mask and causal; a window would need an attn_mask."""
    if mask.kind == "window":
        raise AndreaError(f"torch SDPA is timed without a mask or causal, not with {mask}")
    return mask.kind == "causal"


def torch_reason(device: str = "cpu") -> str | None:
    """Why torch SDPA cannot be measured on this device, or None when it can."""
    try:
        import torch
    except Exception as exc:
        return f"torch is not importable ({type(exc).__name__})"
    if device == "cuda" and not torch.cuda.is_available():
        return f"torch {torch.__version__} has no usable CUDA"
    return None


def torch_environment(device: str = "cpu") -> dict:
    """What the torch rows ran on: torch's version, the CUDA it was built with and cuDNN's version
    (None where it has none), or {"reason": why torch cannot be measured on this device}."""
    reason = torch_reason(device)
    if reason is not None:
        return {"reason": reason}
    import torch

    return {"torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version()}


def torch_impl_name(precision: str = "fp32", backend: str | None = None) -> str:
    """torch_sdpa, torch_sdpa_bf16, torch_sdpa_bf16_flash, ..."""
    return "torch_sdpa" + ("" if precision == "fp32" else f"_{precision}") + (f"_{backend}" if backend else "")


def sdpa_backend_of(op_names) -> str | None:
    """Which SDPA backend ran, from the aten operators a profile saw: the dispatcher's choice is one
    of these operators whatever the device, while CUDA kernel names vary with every library version."""
    kinds = (("cudnn", "cudnn"), ("efficient", "efficient"), ("flash", "flash"), ("attention_math", "math"),
             ("overrideable", "overrideable"))
    for name in op_names:
        if name.startswith("aten::_scaled_dot_product_"):
            for key, kind in kinds:
                if key in name:
                    return kind
    return None


def sdpa_chooser(run) -> str:
    """Run once under torch.profiler and name the backend SDPA's default dispatched to."""
    try:  # the row is timed already: a profiler that fails costs this annotation, not the row
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as prof:
            run()
        names = [event.name for event in prof.events()]
    except Exception as exc:
        return f"unknown (the profiler failed: {type(exc).__name__})"
    return sdpa_backend_of(names) or "unknown (no aten SDPA operator in the profile)"


def why_no_kernel(exc: BaseException, caught: list) -> str:
    """SDPA's "No available kernel" error says nothing; the warnings it raised just before say why
    each backend refused (e.g. cuDNN on a CPU tensor, flash with an unsupported head size)."""
    said = [str(w.message).strip().splitlines()[0] for w in caught]
    # "<backend> kernel not used because:" heads the warning that follows it, which has the reason
    said = [line for line in said if line and not line.endswith("because:")]
    return "; ".join(dict.fromkeys(said[:2])) or str(exc).splitlines()[0]


def torch_impl(device: str, precision: str = "fp32", backend: str | None = None, on_request: bool = False) -> Impl:
    """precision bf16: inputs converted before timing, the peer of the tensor-core kernel.
    backend None: SDPA's own choice (recorded per point, `chose`); "flash" or "cudnn": that backend
    alone (torch.nn.attention.sdpa_kernel), a point it cannot run is a row with torch's reason."""

    def prepare(q, k, v, mask: MaskSpec):
        import torch
        import torch.nn.functional as F

        causal = is_causal(mask)
        # (1, H, T, d): the batch-and-heads layout SDPA's fused (flash / memory-efficient)
        # kernels expect; with 3-D inputs it may fall back to its unfused math path
        dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        tq, tk, tv = (torch.as_tensor(a, device=device).to(dtype)[None] for a in (q, k, v))

        def run():
            with torch.no_grad():
                return F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)

        if backend is None:
            return run
        try:  # torch.nn.attention came with torch 2.3, SDPBackend.CUDNN_ATTENTION with 2.4
            from torch.nn.attention import SDPBackend, sdpa_kernel

            pinned = getattr(SDPBackend, PINNED[backend])
        except (ImportError, AttributeError):
            raise AndreaError(f"torch {torch.__version__} cannot pin SDPA to {backend}: "
                              f"no torch.nn.attention.SDPBackend.{PINNED[backend]}") from None

        def run_pinned():
            # entering sdpa_kernel sets a few flags on the host, microseconds against the kernel's
            # milliseconds at the sizes the targets name
            with sdpa_kernel(pinned):
                return run()

        # one try before the timing: a backend that refuses this shape or device costs its row
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                run_pinned()
            except RuntimeError as exc:
                if isinstance(exc, torch.cuda.OutOfMemoryError):
                    raise
                raise AndreaError(f"SDPA's {backend} backend cannot run this on {device}: "
                                  f"{why_no_kernel(exc, caught)}") from None
        return run_pinned

    # a pinned fused backend never falls back to the math path's (H, T, T) temporaries
    peak = torch_peak_bytes if backend is None else lambda H, T, d_k, mask: io_bytes(H, T, d_k, 6)
    return Impl(torch_impl_name(precision, backend), prepare, to_host=lambda t: t[0].float().cpu().numpy(),
                peak_bytes=peak, precision=precision, chooser=sdpa_chooser if backend is None else None,
                on_request=on_request)


def torch_backward_impl(device: str, precision: str = "fp32") -> Impl:
    """torch SDPA's backward through autograd: the forward in prepare, the graph kept for every
    repeat. precision bf16: bf16 leaves and dO, the peer of the tensor-core backward."""

    def prepare(q, k, v, mask: MaskSpec):
        import torch
        import torch.nn.functional as F

        causal = is_causal(mask)
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
                peak_bytes=lambda H, T, d_k, mask: 2 * torch_peak_bytes(H, T, d_k, mask), precision=precision)
