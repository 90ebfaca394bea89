"""What the kernel file's launchers take, asked in one place: given an attention call's shapes,
mask and dtype, can the kernels run it, and if not, why. scaled_dot_product_attention routes
what they cannot take to the NumPy path (backends/numpy_sdpa.py) and says why; widening what
the kernels do is an edit of kernels_take() below, and of run_kernels in runs/sdpa.py."""

from __future__ import annotations

from dataclasses import dataclass

from andrea_cli.backends.launch.fused import FUSED_MAX_D


@dataclass(frozen=True)
class AttentionCase:
    """One call, as the launchers see it: q (B, H_q, L, d_k), k (B, H_k, S, d_k), v (B, H_v, S, d_v)."""

    L: int  # query positions
    S: int  # key (and value) positions
    d_k: int
    d_v: int
    q_heads: int  # H_q: the size of dim -3 of q (1 for 2-D inputs)
    k_heads: int
    v_heads: int
    same_leading: bool  # q, k, v share every dim but the last two (no broadcasting between them)
    mask: str  # "none", "causal" (top-left, torch's is_causal) or "array" (a bool or float attn_mask)
    dtype: str  # what it computes in: "float32" (fp16 and bf16 inputs widened) or "float64"
    scale: float
    same_batch: bool = False  # q, k, v share every dim before the heads (-3): grouped K/V heads can run


def kernels_take(case: AttentionCase) -> str | None:
    """None when the staged or fused kernels run this call as it is; else the reason, one line.

    Today's kernels: L queries against S keys (is_causal top-left: MaskSpec align "top_left"),
    K/V heads grouped (as many K as V heads, the query heads a multiple of them, query head h on
    K/V head h / group), the causal mask, none, or an attn_mask array (bool or float: the fused
    fp32 kernels add it beside each K tile, the staged ones in mask_kernel2), float32, a positive factor (scale_kernel1 reads 0 as "the
    course's 1/sqrt(d_k)")."""
    if case.dtype != "float32":
        return f"the kernels compute in float32 ({case.dtype} runs the {case.dtype} NumPy path)"
    grouped = case.same_batch and case.k_heads == case.v_heads and case.q_heads % case.k_heads == 0
    if not (case.same_leading or grouped):
        return (f"the kernels take q, k, v with the same leading dims (heads {case.q_heads}/{case.k_heads}/"
                f"{case.v_heads}, or broadcast batch dims)")
    if not case.scale > 0:
        return f"the kernels take a positive scale (got {case.scale})"
    return None


def fused_takes(case: AttentionCase) -> bool:
    """The fused fp32 kernels (no L×S matrix built) take it, mask arrays included; wider heads run
    the staged kernels."""
    return case.d_k <= FUSED_MAX_D and case.d_v <= FUSED_MAX_D
