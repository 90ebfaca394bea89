"""Which keys each query may see: the mask variants, parsed from the command line's `--mask`."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from andrea_cli.errors import AndreaError

# What --mask takes, for --help and the errors: terms joined by commas.
GRAMMAR = ("none, causal, window:W (W keys wide: p-W+1..p), window:L,R (two-sided: p-L..p+R), "
           "sinks:N with a window (keys 0..N-1 always seen), alibi (causal + ALiBi's per-head bias "
           "-m_h*(p-j); with a window: alibi,window:W), e.g. sinks:4,window:64")


def alibi_slopes(heads: int) -> np.ndarray:
    """ALiBi's slope per query head (Press et al. 2022, and their code's get_slopes): for H a power
    of two m_h = 2^(-8(h+1)/H); otherwise the slopes of n = the largest power of two below H,
    then every other slope of 2n heads."""
    n = 2 ** int(math.floor(math.log2(heads)))
    first = [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]
    rest = [2.0 ** (-8.0 * (h + 1) / (2 * n)) for h in range(2 * n)][0::2][:heads - n]
    return np.array(first + rest, dtype=np.float64)


@dataclass(frozen=True)
class MaskSpec:
    """`none`: every query sees every key. `causal`: query i sees keys 0..p, p = i + offset its
    position among the keys. `window`: query i sees keys p-window+1 .. p (a causal sliding window);
    with `right` R > 0 also p+1 .. p+R (window:L,R: window = L + 1). `sinks` N: keys 0..N-1 pass
    the window's left bound (StreamingLLM's attention sinks). `alibi`: ALiBi's bias -m_h·(p - j)
    added to query head h's scaled scores (on a causal mask or a window).

    With L queries and S keys, `align` says where the queries sit: "bottom_right" (the default,
    FlashAttention >= 2.1, torch's causal_lower_right): they are the last L positions, offset
    S - L, so the last query sees every key and, for L > S, the first L - S queries see none (their
    output is zeros, as FlashAttention's); "top_left" (SDPA's is_causal): offset 0. With L = S both
    are the square mask."""

    kind: str  # "none" | "causal" | "window" | "array"
    window: int = 0  # only for kind == "window": the left bound, window keys wide (the row's own included)
    align: str = "bottom_right"  # "bottom_right" | "top_left": where L queries sit among S keys
    # kind "array" (--mask-file, attn_mask): float32 (L, S) or (H, L, S) added to the scaled
    # scores, -inf where a key is hidden (a bool mask as 0 / -inf: mask_array); `name` says what it is
    bias: np.ndarray | None = field(default=None, compare=False, repr=False)
    name: str = ""
    right: int = 0  # kind "window": keys past the row's own position it still sees (window:L,R)
    sinks: int = 0  # kind "window": the first keys the left bound never hides
    alibi: bool = False  # kind "causal" or "window": ALiBi's per-head bias on the scores

    def offset(self, L: int, S: int) -> int:
        """The key position of query row 0."""
        return S - L if self.hides_future and self.align == "bottom_right" else 0

    @property
    def hides_future(self) -> bool:
        return self.kind in ("causal", "window")

    @property
    def is_array(self) -> bool:
        """A mask given as an array: the staged kernels (mask_kernel2) and the fused fp32 kernels read one."""
        return self.kind == "array"

    @property
    def flavours(self) -> list[str]:
        """What this mask asks beyond the two bounds (causal, window:W): the terms the kernels that
        take only (causal, window, offset) refuse."""
        return ([f"window:{self.window - 1},{self.right}"] if self.right else []) \
            + ([f"sinks:{self.sinks}"] if self.sinks else []) + (["alibi"] if self.alibi else [])

    def refuse_flavours(self, kernels: str,
                        fix: str = "run a forward kernel (staged, or --fused, fp32 or bf16)") -> None:
        """One line naming the flavour, for kernels that take only the two bounds (the bf16
        backward's forward, attention_fused_lse_kernel4)."""
        if self.flavours:
            raise AndreaError(f"--mask {self}: {kernels} take causal, none and window:W only, not "
                              f"{', '.join(self.flavours)}: {fix}")

    def kernel_args(self, L: int = 0, S: int = 0, heads: int | None = None) -> tuple[np.int32, ...]:
        """The scalars every kernel that masks takes, in its argument order, from which the kernel
        file builds its Mask (Mask::from_args). Without heads: (causal, window, offset), for the
        kernels that take only the two bounds (refusing right, sinks and ALiBi, in one line). With
        heads, the query heads H: (causal, window, offset, right, sinks, alibi), the whole Mask,
        alibi = H (the kernel works out head h's slope from it) or 0. causal != 0 hides the future;
        window 0 sets no limit on how far back a query sees; offset: the key position of query
        row 0 for L queries against S keys (0 where L = S)."""
        bounds = (np.int32(self.hides_future), np.int32(self.window if self.kind == "window" else 0),
                  np.int32(self.offset(L, S)))
        if heads is None:
            self.refuse_flavours("these kernels")
            return bounds
        return bounds + (np.int32(self.right), np.int32(self.sinks), np.int32(heads if self.alibi else 0))

    def decode_keys(self, length: int) -> int:
        """How many of `length` cached keys the newest query (position length - 1) sees: its
        window's (all without one) and the sinks before it (the kernel's Mask::last_row_keys)."""
        first = max(0, length - self.window) if self.kind == "window" else 0
        return min(self.sinks, first) + length - first

    def __str__(self) -> str:
        if self.is_array:
            return f"array:{self.name}" if self.name else "array"
        if self.kind == "window":
            text = f"window:{self.window - 1},{self.right}" if self.right else f"window:{self.window}"
            text = (f"sinks:{self.sinks}," if self.sinks else "") + text
        else:
            text = self.kind
        if self.alibi:
            text = "alibi" if self.kind == "causal" else f"alibi,{text}"
        return text if self.align == "bottom_right" or self.kind == "none" else f"{text} (top-left)"

    def top_left(self) -> "MaskSpec":
        """The same mask with SDPA's is_causal alignment (offset 0)."""
        return dataclasses.replace(self, align="top_left")

    def visible(self, L: int, rows: np.ndarray | None = None, S: int | None = None) -> np.ndarray:
        """(L, S) booleans (S = L unless given), True where query i (row) may attend to key j
        (column); with `rows`, only those query rows, (len(rows), S), without the whole matrix."""
        S = L if S is None else S
        if self.is_array:  # (L, S), or (H, L, S) for a per-head array
            seen = np.isfinite(self.bias)
            return seen if rows is None else seen[..., np.asarray(rows), :]
        i = (np.arange(L) if rows is None else np.asarray(rows))[:, None]
        j = np.arange(S)[None, :]
        if self.kind == "none":
            return np.ones((i.shape[0], S), dtype=bool)
        p = i + self.offset(L, S)  # the query's position among the keys
        seen = j <= p + self.right
        if self.kind == "window":
            seen &= ((p - j) < self.window) | (j < self.sinks)
        return seen

    def score_bias(self, heads: int, L: int, rows: np.ndarray | None = None, S: int | None = None) -> np.ndarray | None:
        """What ALiBi adds to the scaled scores, (heads, L or len(rows), S) float64: -m_h·(p - j);
        None without ALiBi."""
        if not self.alibi:
            return None
        S = L if S is None else S
        i = (np.arange(L) if rows is None else np.asarray(rows))[:, None]
        distance = (i + self.offset(L, S)) - np.arange(S)[None, :]
        return -alibi_slopes(heads)[:, None, None] * distance[None].astype(np.float64)


def _count(text: str, term: str, value: str, least: int, example: str) -> int:
    if not value.isdigit() or int(value) < least:
        raise AndreaError(f"--mask {text}: {term} must be a whole number >= {least}, e.g. --mask {example}")
    return int(value)


def parse_mask(text: str) -> MaskSpec:
    """--mask: terms joined by commas (GRAMMAR). window:L,R's second number is the term after
    its comma; sinks need a window; alibi stands alone (causal + ALiBi) or beside a window that
    hides the future (R = 0: ALiBi's bias -m·(p - j) is for keys at or before the query)."""
    text = text.strip().lower()
    terms = [t.strip() for t in text.split(",")]
    kind, window, right, sinks, alibi = None, 0, 0, 0, False
    n = 0
    while n < len(terms):
        term = terms[n]
        if term in ("causal", "none"):
            if kind is not None:
                _twice(text)
            kind = term
        elif term == "alibi":
            alibi = True
        elif term.startswith("sinks:"):
            sinks = _count(text, "the sinks", term.removeprefix("sinks:"), 1, "sinks:4,window:64")
        elif term.startswith("window:"):
            if kind is not None:
                _twice(text)
            kind = "window"
            if n + 1 < len(terms) and terms[n + 1].isdigit():  # window:L,R
                left = _count(text, "the window's left reach L", term.removeprefix("window:"), 0, "window:64,64")
                right = _count(text, "the window's right reach R", terms[n + 1], 0, "window:64,64")
                window, n = left + 1, n + 1
            else:
                window = _count(text, "the window", term.removeprefix("window:"), 1, "window:128")
        else:
            raise AndreaError(f"--mask {text!r} is not a mask: use causal, none, window:W, window:L,R, "
                              "sinks:N,window:W or alibi (see --help)")
        n += 1
    if sinks and kind != "window":
        raise AndreaError(f"--mask {text}: sinks pass a window's left bound, so they need one: "
                          f"e.g. --mask sinks:{sinks},window:64")
    if alibi and kind == "none":
        raise AndreaError(f"--mask {text}: alibi is causal (its bias -m*(p-j) is for keys before the query): "
                          "drop none")
    if alibi and right:
        raise AndreaError(f"--mask {text}: alibi's bias -m*(p-j) is for keys at or before the query, so not "
                          "with a right-hand window: use window:W or window:L,0")
    return MaskSpec(kind or "causal", window, right=right, sinks=sinks, alibi=alibi)


def _twice(text: str):
    raise AndreaError(f"--mask {text}: give one of none, causal or a window, not two")


def mask_array(array, L: int, S: int, what: str = "--mask-file", heads: int | None = None) -> MaskSpec:
    """A mask given as an array, checked: bool (True = take part, as torch's SDPA) or float (added
    to the scaled scores; -inf hides), shape (L, S), or (H, L, S) with H the query heads. Kept as
    the float32 bias mask_kernel2 adds: a bool mask becomes 0 where True, -inf where False."""
    a = np.asarray(array)
    shapes = f"({L}, {S})" + (f" or ({heads}, {L}, {S})" if heads else "")
    if a.shape != (L, S) and not (heads and a.shape == (heads, L, S)):
        raise AndreaError(f"{what}: shape {a.shape} is not {shapes} (queries, keys): give one row per query, "
                          "one column per key")
    if a.dtype == bool:
        return MaskSpec("array", bias=np.where(a, 0.0, -np.inf).astype(np.float32), name="bool")
    if a.dtype.kind not in "fiu":
        raise AndreaError(f"{what}: dtype {a.dtype} is neither bool (True = take part) nor float (added to the "
                          "scores): save it as bool or float32")
    if np.isnan(a).any():
        raise AndreaError(f"{what}: {int(np.isnan(a).sum())} NaN entries; use -inf to hide a key, 0 to keep it")
    if (a == np.inf).any():
        raise AndreaError(f"{what}: +inf entries; use -inf to hide a key, a finite bias otherwise")
    return MaskSpec("array", bias=np.ascontiguousarray(a, dtype=np.float32), name="bias")
