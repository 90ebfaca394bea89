"""Which keys each query may see: the mask variants, parsed from the command line's `--mask`."""

from __future__ import annotations

from dataclasses import dataclass

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

    kind: str  # "none" | "causal" | "window"
    window: int = 0  # only for kind == "window"
    align: str = "bottom_right"  # "bottom_right" | "top_left": where L queries sit among S keys

    def offset(self, L: int, S: int) -> int:
        """The key position of query row 0."""
        return S - L if self.kind != "none" and self.align == "bottom_right" else 0

    @property
    def hides_future(self) -> bool:
        return self.kind != "none"

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
        text = f"window:{self.window}" if self.kind == "window" else self.kind
        return text if self.align == "bottom_right" or self.kind == "none" else f"{text} (top-left)"

    def top_left(self) -> "MaskSpec":
        """The same mask with SDPA's is_causal alignment (offset 0)."""
        return MaskSpec(self.kind, self.window, "top_left")

    def visible(self, L: int, rows: np.ndarray | None = None, S: int | None = None) -> np.ndarray:
        """(L, S) booleans (S = L unless given), True where query i (row) may attend to key j
        (column); with `rows`, only those query rows, (len(rows), S), without the whole matrix."""
        S = L if S is None else S
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
