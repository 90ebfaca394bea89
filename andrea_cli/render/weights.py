"""The weight matrix drawn in the terminal: max-pooled blocks as coloured half-block characters
(two matrix rows per text line), or without colour one character per block, a log scale, masked
blocks left dark (blank)."""

from __future__ import annotations

import math

import numpy as np
from rich.color import Color
from rich.console import Console
from rich.style import Style
from rich.text import Text

from andrea_cli.render.heatmap import block_sizes, course_rows, pool

FLOOR = 1e-4  # weights from FLOOR to 1 span the colour scale, on a log axis
MASKED = Color.from_rgb(28, 28, 28)
# viridis, sampled: dark blue (small weight) to yellow (weight 1)
STOPS = ((68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37))


def _log_position(w: float) -> float:
    """Where a weight above 0 sits on the log scale: 0 at FLOOR (or below), 1 at 1."""
    return min((math.log10(max(w, FLOOR)) - math.log10(FLOOR)) / -math.log10(FLOOR), 1.0)


def colour(w: float) -> Color:
    if w <= 0:
        return MASKED
    pos = _log_position(w) * (len(STOPS) - 1)
    i = min(int(pos), len(STOPS) - 2)
    f = pos - i
    rgb = (round(a + (b - a) * f) for a, b in zip(STOPS[i], STOPS[i + 1]))
    return Color.from_rgb(*rgb)


ONE_ROW_PER_LINE = 64  # characters: up to this T every query row gets a line of its own


def render_weights(console: Console, weights: np.ndarray, mask: str) -> None:
    """Colours: two pooled rows per text line (half blocks), square cells. Characters (piped,
    NO_COLOR): one query row per line up to T = 64, beyond that each line pools rows; the header
    says what one cell or character stands for, so the legend matches what is drawn."""
    T = weights.shape[0]
    cells = max(2, min(T, console.width - 2, 128))
    characters = console.color_system is None or console.no_color  # piped, a dumb terminal, or NO_COLOR
    rows = (T if T <= ONE_ROW_PER_LINE else max(1, cells // 2)) if characters else cells
    pooled = pool(weights, rows, cells)
    per_row, per_key = block_sizes(T, pooled.shape[0]), block_sizes(T, pooled.shape[1])
    what = "character" if characters else "cell"
    if per_row == per_key == (1, 1):
        detail = f"; each {what} one weight" + ("" if not characters else ", each line one query row")
    else:
        detail = (f"; each {what} the largest weight of {_count(per_row, 'query', 'queries')} "
                  f"× {_count(per_key, 'key', 'keys')}")
    console.print(f"[bold]Weights (T×T = {T}×{T}), mask={mask}[/bold]: query i down (top: 0), key j across "
                  f"(left: 0){detail}")
    if characters:
        _draw_characters(console, pooled)
    else:
        _draw_colours(console, pooled)
    console.print("First rows, as in the course:")
    for line in course_rows(weights):
        console.print(f"  {line}", highlight=False)


def _count(sizes: tuple[int, int], one: str, many: str) -> str:
    """Whole rows or keys per block: "8 queries", or "8–9 queries" where T does not divide evenly."""
    low, high = sizes
    return f"{low} {one if high == 1 else many}" if low == high else f"{low}–{high} {many}"


def _draw_colours(console: Console, pooled: np.ndarray) -> None:
    """'▀' paints its upper half in the foreground colour and its lower half in the background:
    two pooled rows per line, so the cells come out about square."""
    for top in range(0, pooled.shape[0], 2):
        line = Text()
        for j in range(pooled.shape[1]):
            upper = colour(pooled[top, j])
            lower = colour(pooled[top + 1, j]) if top + 1 < pooled.shape[0] else None
            line.append("▀", Style(color=upper, bgcolor=lower))
        console.print(line, no_wrap=True, overflow="crop")
    legend = Text("scale: ")
    for w in (FLOOR, 1e-3, 1e-2, 1e-1, 1.0):
        legend.append("██", Style(color=colour(w)))
        legend.append(f" {w:g}  ")
    legend.append("██", Style(color=MASKED))
    legend.append(" exactly 0 (masked)")
    console.print(legend)


RAMP = ".:-=+*#%@"  # FLOOR .. 1 on the same log axis; a space is exactly 0 (masked)


def _char(w: float) -> str:
    if w <= 0:
        return " "
    return RAMP[min(int(_log_position(w) * len(RAMP)), len(RAMP) - 1)]


def _draw_characters(console: Console, pooled: np.ndarray) -> None:
    """One pooled row per line, as the header says."""
    for row in pooled:
        console.print("|" + "".join(_char(w) for w in row) + "|", no_wrap=True, overflow="crop",
                      highlight=False, markup=False)
    console.print(f"scale: '{RAMP[0]}' {FLOOR:g} .. '{RAMP[-1]}' 1 (log); blank: exactly 0 (masked)",
                  highlight=False, markup=False)
