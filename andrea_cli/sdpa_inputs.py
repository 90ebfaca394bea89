"""scaled_dot_product_attention's arguments checked as torch checks them, each bad one an
AndreaError of one line naming the parameter (never the array itself), and the call they make:
the shapes, the mask, the factor, and the caller's array type to hand the result back as."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from andrea_cli.array_types import FLOAT_TYPES, ArrayKind, detached, dtype_name, library_of, to_host
from andrea_cli.errors import AndreaError, shown

NAMES = ("query", "key", "value")


@dataclass
class SdpaCall:
    """One checked call: q (..., H_q, L, E), k (..., H_k, S, E), v (..., H_v, S, E_v) as given
    (torch tensors detached), the mask on the host, the factor resolved."""

    q: Any
    k: Any
    v: Any
    attn_mask: np.ndarray | None  # bool (True: takes part) or float (added), broadcastable to the scores
    is_causal: bool  # top-left: query i sees keys 0..i
    scale: float  # 1/sqrt(E) when not given
    enable_gqa: bool
    kind: ArrayKind  # the query's: the result goes back as it
    out_shape: tuple[int, ...]  # (broadcast leading dims..., L, E_v)

    @property
    def L(self) -> int:
        return self.q.shape[-2]

    @property
    def S(self) -> int:
        return self.k.shape[-2]

    def heads(self, a) -> int:
        return a.shape[-3] if len(a.shape) >= 3 else 1

    @property
    def same_leading(self) -> bool:
        return tuple(self.q.shape[:-2]) == tuple(self.k.shape[:-2]) == tuple(self.v.shape[:-2])


def check_array(a, name: str):
    """A real array of at least 2 dims, none of them empty, finite; anything np.asarray takes."""
    if a is None:
        raise AndreaError(f"{name} is None: pass an array (..., L, E) for query, (..., S, E) for key and value")
    if library_of(a) == "numpy" and not isinstance(a, np.ndarray):
        try:
            a = np.asarray(a)
        except (TypeError, ValueError):
            raise AndreaError(f"{name}={shown(a)}: not an array of numbers; pass a NumPy array or a tensor") from None
    a = detached(a)
    if dtype_name(a) not in FLOAT_TYPES:
        raise AndreaError(f"{name}: dtype {dtype_name(a)} is not a float type; pass float16, bfloat16, float32 "
                          "or float64, as torch's SDPA takes")
    if len(a.shape) < 2:
        raise AndreaError(f"{name}: shape {tuple(a.shape)} has fewer than 2 dims; pass (..., length, features)")
    if 0 in tuple(a.shape):
        raise AndreaError(f"{name}: shape {tuple(a.shape)} has an empty dim; every size must be >= 1")
    if not bool((abs(a) < math.inf).all()):  # NaN compares False: one test, on any library, where a is
        raise AndreaError(f"{name} holds NaN or Inf: clean the input (andrea computes finite numbers only)")
    return a


def check_flags(dropout_p, is_causal, scale, enable_gqa) -> float | None:
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, (int, float, np.integer, np.floating)) \
            or dropout_p != 0:
        raise AndreaError(f"dropout_p={shown(dropout_p)}: andrea has no dropout (it computes attention exactly "
                          "as in inference); pass dropout_p=0.0")
    for name, flag in (("is_causal", is_causal), ("enable_gqa", enable_gqa)):
        if not isinstance(flag, (bool, np.bool_)):
            raise AndreaError(f"{name}={shown(flag)}: pass True or False")
    if scale is None:
        return None
    if isinstance(scale, (bool, np.bool_)) or not isinstance(scale, (int, float, np.integer, np.floating)) \
            or not math.isfinite(scale):
        raise AndreaError(f"scale={shown(scale)}: pass None (1/sqrt(E), E = query's last dim) or a finite number")
    return float(scale)


def leading_dims(q, k, v, enable_gqa: bool) -> tuple[int, ...]:
    """The output's leading dims: q's, k's and v's broadcast (with enable_gqa, the head dim -3 of
    k and v dividing q's instead)."""
    shapes = {name: tuple(a.shape[:-2]) for name, a in zip(NAMES, (q, k, v))}
    if enable_gqa:
        if any(len(a.shape) < 3 for a in (q, k, v)):
            raise AndreaError("enable_gqa=True groups heads, dim -3: pass query, key, value of at least 3 dims "
                              "(..., heads, length, features)")
        h_q = q.shape[-3]
        for name, a in (("key", k), ("value", v)):
            if h_q % a.shape[-3]:
                raise AndreaError(f"enable_gqa: {name} has {a.shape[-3]} heads (dim -3), which does not divide "
                                  f"query's {h_q}; pass H_q a multiple of H_kv")
        shapes = {name: shape[:-1] + (h_q,) for name, shape in shapes.items()}
    try:
        return tuple(np.broadcast_shapes(*shapes.values()))
    except ValueError:
        shown = ", ".join(f"{name} {tuple(a.shape)}" for name, a in zip(NAMES, (q, k, v)))
        fix = "" if enable_gqa else " (fewer K/V heads: enable_gqa=True)"
        raise AndreaError(f"{shown}: the leading (batch, head) dims do not broadcast{fix}") from None


def check_mask(attn_mask, scores_shape: tuple[int, ...]) -> np.ndarray | None:
    """A bool or float array (not ints: torch refuses them too) that broadcasts to the scores'
    (..., L, S) without growing them; on the host, float masks without NaN or +inf."""
    if attn_mask is None:
        return None
    mask = check_mask_array(attn_mask)
    if mask.ndim < 2 or mask.ndim > len(scores_shape):
        raise AndreaError(f"attn_mask: shape {mask.shape} must have 2 to {len(scores_shape)} dims, broadcastable "
                          f"to the scores' {scores_shape} (..., L, S)")
    try:
        grown = np.broadcast_shapes(mask.shape, scores_shape)
    except ValueError:
        grown = None
    if grown != scores_shape:
        raise AndreaError(f"attn_mask: shape {mask.shape} does not broadcast to the scores' {scores_shape} "
                          "(..., L, S)")
    return mask


def check_mask_array(attn_mask) -> np.ndarray:
    kind = dtype_name(detached(attn_mask)) if hasattr(attn_mask, "dtype") else np.asarray(attn_mask).dtype.name
    if kind != "bool" and kind not in FLOAT_TYPES:
        raise AndreaError(f"attn_mask: dtype {kind}; pass a bool mask (True: takes part) or a float one "
                          "(added to the scores)")
    mask = to_host(attn_mask)
    if mask.dtype != bool and not bool((mask < math.inf).all()):
        raise AndreaError("attn_mask holds NaN or +inf: a float mask is added to the scores; hide a key with -inf")
    return mask


def check_call(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa) -> SdpaCall:
    """Every argument checked, in the order of the signature; the call they make."""
    q, k, v = (check_array(a, name) for a, name in zip((query, key, value), NAMES))
    libraries = {name: library_of(a) for name, a in zip(NAMES, (q, k, v))}
    if len(set(libraries.values())) > 1:
        shown = ", ".join(f"{name} {lib}" for name, lib in libraries.items())
        raise AndreaError(f"{shown}: pass all three as one array type")
    dtypes = [dtype_name(a) for a in (q, k, v)]
    if len(set(dtypes)) > 1:
        raise AndreaError(f"query {dtypes[0]}, key {dtypes[1]}, value {dtypes[2]}: pass one dtype, as torch's "
                          "SDPA needs")
    factor = check_flags(dropout_p, is_causal, scale, enable_gqa)
    if q.shape[-1] != k.shape[-1]:
        raise AndreaError(f"query {tuple(q.shape)}, key {tuple(k.shape)}: their last dims (E) must agree, since "
                          "scores = Q · K^T")
    if k.shape[-2] != v.shape[-2]:
        raise AndreaError(f"key {tuple(k.shape)}, value {tuple(v.shape)}: one value per key, so dim -2 (S) "
                          "must agree")
    lead = leading_dims(q, k, v, bool(enable_gqa))
    L, S = q.shape[-2], k.shape[-2]
    if is_causal and attn_mask is not None:
        raise AndreaError("is_causal=True with an attn_mask: pass one of them, as torch's reference refuses "
                          "(to combine them, pass the mask & the lower triangle)")
    mask = check_mask(attn_mask, (*lead, L, S))
    return SdpaCall(q, k, v, mask, bool(is_causal), 1.0 / math.sqrt(q.shape[-1]) if factor is None else factor,
                    bool(enable_gqa), ArrayKind.of(q), (*lead, L, v.shape[-1]))
