"""One scaled_dot_product_attention call run: the backend chosen, the capability check asked
once (backends/launch/capabilities.py), then the kernels (fused fp32, or staged for heads wider
than it takes) or the NumPy path in float32 (float64 for float64 inputs). A backend named that
cannot take the call runs the NumPy path and says why, as a warning."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from andrea_cli.array_types import to_host, widened
from andrea_cli.backends import BACKEND_NAMES, make_backend, require_available
from andrea_cli.backends.cuda import cuda_availability
from andrea_cli.backends.launch.capabilities import AttentionCase, fused_takes, kernels_take
from andrea_cli.backends.launch.catalogue import resolve_kernel_path
from andrea_cli.backends.numpy_sdpa import attention as numpy_attention
from andrea_cli.errors import AndreaError, KernelFallbackWarning
from andrea_cli.masks import MaskSpec
from andrea_cli.sdpa_inputs import SdpaCall


_BACKENDS: dict = {}  # (name, kernel file) -> backend: the kernel file is loaded once per process


def backend_for(name: str, kernel: Path | None):
    """The kernel backend (cuda, cpu), or None for the NumPy path; auto: cuda where a GPU answers."""
    if name not in BACKEND_NAMES:
        raise AndreaError(f"backend={name!r} is not a backend: use one of {', '.join(BACKEND_NAMES)}")
    if name == "numpy" or (name == "auto" and not cuda_availability().ok):
        return None
    name = "cuda" if name == "auto" else name
    key = (name, resolve_kernel_path(kernel))
    if key not in _BACKENDS:
        _BACKENDS[key] = require_available(make_backend(name, key[1]), f"backend={name!r}")
    return _BACKENDS[key]


def case_of(call: SdpaCall) -> AttentionCase:
    return AttentionCase(L=call.L, S=call.S, d_k=call.q.shape[-1], d_v=call.v.shape[-1],
                         q_heads=call.heads(call.q), k_heads=call.heads(call.k), v_heads=call.heads(call.v),
                         same_leading=call.same_leading,
                         same_batch=tuple(call.q.shape[:-3]) == tuple(call.k.shape[:-3]) == tuple(call.v.shape[:-3]),
                         mask="array" if call.attn_mask is not None else "causal" if call.is_causal else "none",
                         dtype="float64" if call.kind.dtype == "float64" else "float32", scale=call.scale)


def run_numpy(call: SdpaCall, dtype) -> np.ndarray:
    q, k, v = (to_host(a, dtype) for a in (call.q, call.k, call.v))
    return numpy_attention(q, k, v, call.attn_mask, call.is_causal, call.scale, call.enable_gqa, dtype)


def array_spec(attn_mask: np.ndarray, lead: tuple[int, ...], L: int, S: int) -> MaskSpec:
    """attn_mask (checked: bool or float, broadcastable to the scores) as the bias mask_kernel2
    adds: a bool mask 0 where True, -inf where False; one (L, S) array where it is the same for
    every head, else broadcast to q's leading dims and folded as q is, (heads, L, S)."""
    bias = np.where(attn_mask, 0.0, -np.inf) if attn_mask.dtype == bool else attn_mask
    bias = np.asarray(bias, dtype=np.float32)
    if bias.size == L * S:
        bias = bias.reshape(L, S)
    else:
        bias = np.broadcast_to(bias, (*lead, L, S)).reshape(-1, L, S)
    return MaskSpec("array", bias=np.ascontiguousarray(bias), name="bool" if attn_mask.dtype == bool else "bias")


def run_kernels(backend, call: SdpaCall, case: AttentionCase):
    """q, k, v folded to (heads, L, d) (kernels_take asked for one leading shape), in float32 where
    they are, through the fused kernels (or the staged ones for wide heads);
    (..., L, E_v) back."""
    folded = []
    for a in (call.q, call.k, call.v):
        a = widened(a) if backend.name == "cuda" else to_host(a, np.float32)
        folded.append(a.reshape((-1, *a.shape[-2:])))
    q, k, v = folded
    # SDPA's is_causal is top-left: query i sees keys 0..i, whatever L and S
    spec = MaskSpec("causal", align="top_left") if case.mask == "causal" else MaskSpec("none")
    if case.mask == "array":
        spec = array_spec(call.attn_mask, call.q.shape[:-2], case.L, case.S)
    if fused_takes(case):
        result = backend.attention_fused(q, k, v, mask=spec, scaled=call.scale)
    else:
        result = backend.attention(q, k, v, mask=spec, scaled=call.scale)
    out = result.device_output if backend.name == "cuda" and call.kind.gpu else result.output
    return out.reshape(call.out_shape)


def run_sdpa(call: SdpaCall, backend: str, kernel: Path | None):
    """The output (..., L, E_v) in float32 (float64 for float64 inputs): NumPy, or where the cuda
    kernels wrote it for GPU inputs."""
    chosen = backend_for(backend, kernel)
    case = case_of(call)
    dtype = np.float64 if case.dtype == "float64" else np.float32
    if chosen is None:
        return run_numpy(call, dtype)
    why_not = kernels_take(case)
    if why_not is not None:
        warnings.warn(f"backend {chosen.name}: {why_not}; ran the NumPy path in {case.dtype}",
                      KernelFallbackWarning, stacklevel=4)
        return run_numpy(call, dtype)
    return run_kernels(chosen, call, case)
