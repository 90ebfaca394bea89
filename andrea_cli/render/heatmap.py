"""The (T, T) weight matrix pooled down to a picture's size: each cell is one block of weights.

Max-pooling keeps structure visible: a block holding any visible key shows up, so the lower
triangle, the diagonal and a sliding window's band survive any amount of shrinking, and a block
that is entirely masked stays exactly 0."""

from __future__ import annotations

import numpy as np


def block_edges(n: int, cells: int) -> np.ndarray:
    """Start of each of `cells` nearly equal blocks over range(n) (cells <= n)."""
    return np.linspace(0, n, cells + 1).round().astype(int)[:-1]


def block_sizes(n: int, cells: int) -> tuple[int, int]:
    """The fewest and most entries one of block_edges' blocks holds: (8, 9) for 1000 over 115."""
    sizes = np.diff(np.append(block_edges(n, cells), n))
    return int(sizes.min()), int(sizes.max())


def pool(weights: np.ndarray, rows: int, cols: int, how: str = "max") -> np.ndarray:
    """(T, T') -> (min(rows, T), min(cols, T')), each cell the max (or mean) of its block."""
    rows, cols = min(rows, weights.shape[0]), min(cols, weights.shape[1])
    r, c = block_edges(weights.shape[0], rows), block_edges(weights.shape[1], cols)
    w = weights.astype(np.float64, copy=False)
    if how == "max":
        return np.maximum.reduceat(np.maximum.reduceat(w, r, axis=0), c, axis=1)
    if how == "mean":
        sums = np.add.reduceat(np.add.reduceat(w, r, axis=0), c, axis=1)
        heights = np.diff(np.append(r, weights.shape[0]))
        widths = np.diff(np.append(c, weights.shape[1]))
        return sums / np.outer(heights, widths)
    raise ValueError(f"pool how={how!r}: use 'max' or 'mean'")


def course_rows(weights: np.ndarray, n_rows: int = 4, n_cols: int = 6) -> list[str]:
    """The first rows as the course prints them: 'row 0: [1.0, 0, 0, 0, ...]'."""
    def fmt(w: float) -> str:
        return "0" if w == 0 else "1.0" if w == 1 else f"{w:.3g}"

    lines = []
    for i in range(min(n_rows, weights.shape[0])):
        cells = [fmt(float(w)) for w in weights[i, :n_cols]]
        more = ", ..." if weights.shape[1] > n_cols else ""
        lines.append(f"row {i}: [{', '.join(cells)}{more}]")
    return lines
