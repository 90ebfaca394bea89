"""The shapes every launcher takes, checked once before a launch: L queries against S keys, and
grouped K/V heads (H query heads over H_kv K/V heads, H a multiple of H_kv)."""

from __future__ import annotations

from andrea_cli.errors import AndreaError


def check_shapes(q, k, v) -> None:
    """The shapes every launcher takes: q (H, L, d_k), k (H_kv, S, d_k), v (H_kv, S, d_v), H a
    multiple of H_kv; a mistake here would read past an array, so it is refused before a launch."""
    (H, L, d_k), (H_kv, S, d_kk), (H_v, S_v, _) = q.shape, k.shape, v.shape
    if d_kk != d_k or (H_v, S_v) != (H_kv, S) or H_kv < 1 or H % H_kv:
        raise AndreaError(f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}: k and v need the same "
                          "heads and keys, k the same d_k as q, and q's heads a multiple of k's")


def require_square(q, k, v, kernels: str) -> None:
    """The kernels that take one sequence only (L = S, a K/V head per query head), for now."""
    check_shapes(q, k, v)
    if k.shape[-2] != q.shape[-2] or k.shape[0] != q.shape[0]:
        raise AndreaError(f"{kernels} take L = S and one K/V head per query head (got q {tuple(q.shape)}, "
                          f"k {tuple(k.shape)}): use the staged or fp32 fused kernels (--precision fp32)")
