"""The cases that put each tile-skipping rule of the kernels on its edge, derived from the tile
sizes the launchers use, and the list of those edges with whether a sweep reaches each (the test
of the sweep, and a reader's map of which rule needs which case).

The rules, as the kernel file writes them (TILE 16; FUSED_KEYS 32 keys per tile; ROWS query rows
per block of the fused forward, FUSED_BWD_ROWS of the fused backward's key blocks):
  staged   partial 16-tiles along T, d_k and d_v (`r < T`, `c < d`); av and the backward skip the
           tiles past the diagonal (j_end = last_row + 1, i_begin = row0)
  fused    partial key tiles (`j < T`, n_keys = min(32, T - j0)) and query blocks (`i < T`); causal:
           no tile past the block's last row, no tile whose first key is past the row (`j0 <= i`);
           window W: the first tile is the one holding key row0 - W + 1 (clamped at 0), a row
           skips a tile whose last key is i - W or earlier, and the backward's key block walks
           query rows up to j0 + 31 + W
The window rules meet their edges when those keys fall on a tile's first or last key, i.e. on
residues mod 32 that depend on W mod ROWS: see window_cases.
"""

from __future__ import annotations

import math

from andrea_cli.backends.launch.backward import DKDV
from andrea_cli.backends.launch.fused import FUSED, FUSED_KEYS, FUSED_MAX_D, ROWS_PER_BLOCK
from andrea_cli.backends.launch.staged import SCALE, SCALE_GRID, TILE
from andrea_cli.masks import MaskSpec
from andrea_cli.verification.case import H_VERIFY, Case

FUSED_BWD_ROWS = DKDV.tile_size()  # query rows the fused backward's key block walks at a time
BLOCK_ROWS = math.lcm(ROWS_PER_BLOCK, FUSED_BWD_ROWS)  # query blocks start at multiples of this
SCALE_GRID_STRIDE = SCALE_GRID * SCALE.block_threads()  # scale_kernel1's most threads: more scores take a second trip
NARROW_WINDOW = 5  # narrower than a block: its rows see parts of different tiles
WIDE_WINDOW = 100  # over three tiles: rows skip whole tiles at both ends


def window_lengths() -> list[int]:
    """One window per residue mod BLOCK_ROWS, from one key short of a tile upwards (31 .. 38 for
    32 keys and 8 rows), a narrow one and a wide one."""
    return [NARROW_WINDOW, *range(FUSED_KEYS - 1, FUSED_KEYS - 1 + BLOCK_ROWS), WIDE_WINDOW]


def window_cases(quick: bool) -> list[Case]:
    """A block starting at row0 loads key tiles from the one holding key row0 - W + 1. Blocks
    start at multiples of BLOCK_ROWS, so one W puts that key on the residues mod 32 congruent to
    1 - W mod BLOCK_ROWS; a W for every residue mod BLOCK_ROWS, each over T = W + 32 + BLOCK_ROWS
    + 1 (FUSED_KEYS / BLOCK_ROWS block starts past the clamp at key 0, and every row i with
    i - W on every residue), reaches every residue: the window starting on a tile's first key
    and on its last, the clamp at 0 and one key either side of it. d_k and d_v are multiples of
    4, so both fused kernels run. --quick: the two windows whose start lands on a tile's first key
    (W = 33) and one past its last (W = 34), the rule an off-by-one in row0 - W + 1 breaks."""
    lengths = [FUSED_KEYS + 1, FUSED_KEYS + 2] if quick else window_lengths()
    widths = [(16, 16), (12, 20)]
    return [Case(W + FUSED_KEYS + BLOCK_ROWS + 1, *widths[n % 2], MaskSpec("window", W), True)
            for n, W in enumerate(lengths)]


def edges_reached(cases: list[Case], families) -> dict[str, bool]:
    """Each rule's edge -> whether some case of `cases` puts it there, for the family that runs
    that rule. `families(case)` names the families that run on a case."""
    staged = [c for c in cases if "staged" in families(c)]
    fused = [c for c in cases if "fused" in families(c) and max(c.d_k, c.d_v) <= FUSED_MAX_D]
    fused2 = [c for c in fused if FUSED[2].takes(c.d_k, c.d_v)]  # attention_fused_kernel2 too
    windows = [c for c in fused2 if c.mask.kind == "window" and "backward" in families(c)]
    edges: dict[str, bool] = {}
    for name, size in (("T", TILE), ("d_k", TILE), ("d_v", TILE)):
        found = {getattr(c, name) % size for c in staged}
        for r in (0, 1, size - 1):
            edges[f"staged: {name} % {size} == {r}"] = r in found
    for label, group in (("fused", fused), ("fused2", fused2)):
        for size in (FUSED_KEYS, ROWS_PER_BLOCK):
            found = {c.T % size for c in group if c.T > size}
            for r in (0, 1, size - 1):
                edges[f"{label}: T % {size} == {r} (T > {size})"] = r in found
        edges[f"{label}: causal, a row on a tile's first key (T > {FUSED_KEYS})"] = any(
            c.mask.kind != "none" and c.T > FUSED_KEYS for c in group)
        edges[f"{label}: d_v == {FUSED_MAX_D} (every lane owns columns)"] = any(c.d_v == FUSED_MAX_D for c in group)
    starts = {(row0 - c.mask.window + 1) for c in windows for row0 in range(0, c.T, BLOCK_ROWS)}
    for r in range(FUSED_KEYS):
        edges[f"window: first key of a block's window % {FUSED_KEYS} == {r}"] = any(
            s >= 0 and s % FUSED_KEYS == r for s in starts)
    for s in (-1, 0, 1):
        edges[f"window: a block's first key row0 - W + 1 == {s} (the clamp at 0)"] = s in starts
    last_rows = {(j0 + FUSED_KEYS - 1 + c.mask.window - 1) % FUSED_BWD_ROWS
                 for c in windows for j0 in range(0, c.T, FUSED_KEYS) if j0 + FUSED_KEYS - 1 + c.mask.window - 1 < c.T}
    edges["window: the backward's last row j0 + 31 + W - 1 starts a row block"] = 0 in last_rows
    edges[f"window: W < {ROWS_PER_BLOCK} and W > {2 * FUSED_KEYS}"] = (
        any(c.mask.window < ROWS_PER_BLOCK for c in windows) and any(c.mask.window > 2 * FUSED_KEYS for c in windows))
    edges["scale: a second grid-stride trip"] = any(H_VERIFY * c.T * c.T > SCALE_GRID_STRIDE for c in staged)
    return edges
