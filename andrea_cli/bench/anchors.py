"""Published attention speeds the tensor-core kernel's GPU targets divide by (issue 22).

Data, not measurements: these figures were published for another machine (an H100 SXM5) and
were never measured by this project; every place that shows one says so (LABEL)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

LABEL = "published, H100 SXM, not measured here"
# The forward-pass figures of FlashAttention-3's paper (16-bit inputs, head dim 64 and 128,
# with and without the causal mask, sequence lengths 512 to 16k): its runs keep batch × T at
# 16k tokens and heads × d at 2048, and count FLOPs as bench does (roofline.attention_flops).
SOURCE = ("Shah et al. 2024, \"FlashAttention-3: Fast and Accurate Attention with Asynchrony and "
          "Low-precision\" (arXiv:2407.08608), forward-pass figures on H100 80GB SXM5")
ANCHOR_T = 16384  # the sequence length of every figure below


@dataclass(frozen=True)
class Anchor:
    impl: str  # FlashAttention-2, cuDNN or FlashAttention-3, as the paper names them
    d_k: int
    causal: bool
    tflops: float  # at T = ANCHOR_T, by FlashAttention's FLOP count


# The figures issue 22 quotes from the paper, no more: cuDNN and FlashAttention-3 without the mask
PUBLISHED = (
    Anchor("FlashAttention-2", 64, False, 324.0), Anchor("FlashAttention-2", 128, False, 370.0),
    Anchor("FlashAttention-2", 64, True, 299.0), Anchor("FlashAttention-2", 128, True, 335.0),
    Anchor("cuDNN", 128, False, 595.0),
    Anchor("FlashAttention-3", 64, False, 497.0), Anchor("FlashAttention-3", 128, False, 648.0),
)


def published(impl: str, d_k: int, causal: bool) -> float | None:
    """The published TFLOP/s of impl at T = ANCHOR_T, or None where the table has no figure."""
    return next((a.tflops for a in PUBLISHED if (a.impl, a.d_k, a.causal) == (impl, d_k, causal)), None)


def anchors_json() -> dict:
    return {"label": LABEL, "source": SOURCE, "T": ANCHOR_T, "figures": [asdict(a) for a in PUBLISHED]}
