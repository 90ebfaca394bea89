"""Which keys each query may see: the mask variants, parsed from the command line's `--mask`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from andrea_cli.errors import AndreaError


@dataclass(frozen=True)
class MaskSpec:
    """`none`: every query sees every key. `causal`: query i sees keys 0..i.
    `window`: query i sees keys i-window+1 .. i (a causal sliding window)."""

    kind: str  # "none" | "causal" | "window"
    window: int = 0  # only for kind == "window"

    @property
    def hides_future(self) -> bool:
        return self.kind != "none"

    def kernel_args(self) -> tuple[np.int32, np.int32]:
        """The scalars every kernel that masks takes, in its argument order: (causal, window), from
        which the kernel file builds its Mask (Mask::from_args). causal != 0 hides the future;
        window 0 sets no limit on how far back a query sees."""
        return np.int32(self.hides_future), np.int32(self.window if self.kind == "window" else 0)

    def __str__(self) -> str:
        return f"window:{self.window}" if self.kind == "window" else self.kind

    def visible(self, T: int, rows: np.ndarray | None = None) -> np.ndarray:
        """(T, T) booleans, True where query i (row) may attend to key j (column); with `rows`,
        only those query rows, (len(rows), T), without building the whole matrix."""
        i = (np.arange(T) if rows is None else np.asarray(rows))[:, None]
        j = np.arange(T)[None, :]
        if self.kind == "none":
            return np.ones((i.shape[0], T), dtype=bool)
        seen = j <= i
        if self.kind == "window":
            seen &= (i - j) < self.window
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
