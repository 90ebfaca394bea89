"""Which keys each query may see: the mask variants, parsed from the command line's `--mask`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from andrea_cli.errors import AndreaError


@dataclass(frozen=True)
class MaskSpec:
    """`none`: every query sees every key. `causal`: query i sees keys 0..p, p = i + offset its
    position among the keys. `window`: query i sees keys p-window+1 .. p (a causal sliding window).

    With L queries and S keys, `align` says where the queries sit: "bottom_right" (the default,
    FlashAttention >= 2.1, torch's causal_lower_right): they are the last L positions, offset
    S - L, so the last query sees every key and, for L > S, the first L - S queries see none (their
    output is zeros, as FlashAttention's); "top_left" (SDPA's is_causal): offset 0. With L = S both
    are the square mask."""

    kind: str  # "none" | "causal" | "window" | "array"
    window: int = 0  # only for kind == "window"
    align: str = "bottom_right"  # "bottom_right" | "top_left": where L queries sit among S keys
    # kind "array" (--mask-file, attn_mask): float32 (L, S) or (H, L, S) added to the scaled
    # scores, -inf where a key is hidden (a bool mask as 0 / -inf: mask_array); `name` says what it is
    bias: np.ndarray | None = field(default=None, compare=False, repr=False)
    name: str = ""

    def offset(self, L: int, S: int) -> int:
        """The key position of query row 0."""
        return S - L if self.hides_future and self.align == "bottom_right" else 0

    @property
    def hides_future(self) -> bool:
        return self.kind in ("causal", "window")

    @property
    def is_array(self) -> bool:
        """A mask given as an array: only the staged kernels read one (mask_kernel2)."""
        return self.kind == "array"

    def kernel_args(self, L: int = 0, S: int = 0) -> tuple[np.int32, np.int32, np.int32]:
        """The scalars every kernel that masks takes, in its argument order: (causal, window,
        offset), from which the kernel file builds its Mask (Mask::from_args). causal != 0 hides
        the future; window 0 sets no limit on how far back a query sees; offset: the key position
        of query row 0 for L queries against S keys (0 where L = S)."""
        return (np.int32(self.hides_future), np.int32(self.window if self.kind == "window" else 0),
                np.int32(self.offset(L, S)))

    def square_args(self) -> tuple[np.int32, np.int32]:
        """(causal, window) for the kernels that take one sequence only, L = S (the tensor-core
        forward and the backward, for now): their Mask's offset is 0."""
        return self.kernel_args()[:2]

    def __str__(self) -> str:
        if self.is_array:
            return f"array:{self.name}" if self.name else "array"
        text = f"window:{self.window}" if self.kind == "window" else self.kind
        return text if self.align == "bottom_right" or self.kind == "none" else f"{text} (top-left)"

    def top_left(self) -> "MaskSpec":
        """The same mask with SDPA's is_causal alignment (offset 0)."""
        return MaskSpec(self.kind, self.window, "top_left")

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
        seen = j <= p
        if self.kind == "window":
            seen &= (p - j) < self.window
        return seen


def parse_mask(text: str) -> MaskSpec:
    text = text.strip().lower()
    if text in ("causal", "none"):
        return MaskSpec(text)
    if text.startswith("window:"):
        size = text.removeprefix("window:")
        if not size.isdigit() or int(size) < 1:
            raise AndreaError(
                f"--mask {text}: the window must be a whole number >= 1, e.g. --mask window:128"
            )
        return MaskSpec("window", int(size))
    raise AndreaError(f"--mask {text!r} is not a mask: use causal, none or window:W (e.g. window:128)")


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
