"""One head's report (`andrea attend`): shapes, score magnitudes, softmax weights, timings."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from andrea_cli.backends.base import STAGES
from andrea_cli.render.common import (fmt as _fmt, lengths_note, lengths_text, print_header, scale_text, shapes_table,
                                     stage_label, timings_table)
from andrea_cli.render.kernels import print_kernels, print_verdict
from andrea_cli.runs.head import AttentionReport


def render_head(console: Console, r: AttentionReport) -> None:
    print_header(console, r.notices,
                 f"[bold]Attention(Q, K, V) = softmax(mask(Q·K^T / sqrt(d_k))) · V[/bold]  {lengths_text(r.T, r.S)} d_k={r.d_k} "
                 f"d_v={r.d_v} mask={r.mask} scale={scale_text(r.d_k, r.scaled, r.scale)}",
                 r.backend, r.device, r.source)
    print_kernels(console, r)
    print_verdict(console, r)
    note = lengths_note(r.T, r.S, r.mask)
    if note:
        console.print(note)
    console.print(shapes_table("Shapes", r.shapes))
    console.print(f"{r.T} × {r.S} = {r.T * r.S:,} scores per head")

    sizes = "T×T" if r.S == r.T else "L×S"
    mag = Table(title=f"Score magnitudes (all {sizes} scores, before masking)", title_justify="left")
    mag.add_column("")
    mag.add_column("unscaled Q·K^T", justify="right")
    mag.add_column(f"scaled ÷ sqrt({r.d_k})", justify="right")
    w = r.weight_stats
    for key, label in (("mean_abs", "mean |s|"), ("std", "std"), ("max_abs", "max |s|")):
        mag.add_row(label, _fmt(getattr(w.magnitude_unscaled, key)), _fmt(getattr(w.magnitude_scaled, key)))
    console.print(mag)

    sm = Table(title="Softmax weights", title_justify="left")
    sm.add_column("measure")
    sm.add_column("value", justify="right")
    if w.rows_seeing_no_key:
        sm.add_row("rows that see no key (weights 0, left out below)", f"{w.rows_seeing_no_key:,}")
    sm.add_row("row sums min / max", f"{w.row_sums.min:.7f} / {w.row_sums.max:.7f}")
    sm.add_row("max |row sum - 1|", _fmt(w.row_sums.max_abs_dev))
    if w.hidden_weight_max is not None:
        sm.add_row("largest weight on a masked position", _fmt(w.hidden_weight_max))
    sm.add_row("mean largest weight per row", _fmt(w.softmax.mean_max_weight))
    sm.add_row("mean row entropy (nats)", _fmt(w.softmax.mean_entropy))
    sm.add_row("mean positions attended, exp(H)", _fmt(w.softmax.mean_effective_positions))
    console.print(sm)

    if r.masked_corner:
        console.print(corner_table(f"Scores after the mask, first {len(r.masked_corner)} rows and columns "
                                   "(-inf: hidden)", r.masked_corner, lambda s: "-inf" if s == float("-inf") else f"{s:.3g}"))
    n = len(r.corner)
    corner = Table(title=f"Weights, first {n} rows and columns", title_justify="left")
    corner.add_column("row")
    for j in range(len(r.corner[0]) if n else 0):
        corner.add_column(str(j), justify="right")
    for i, row in enumerate(r.corner):
        corner.add_row(str(i), *[("0" if w == 0 else f"{w:.3f}") for w in row])
    console.print(corner)

    rows = [(stage_label(stage), r.timings_ms[stage]) for stage in STAGES if stage in r.timings_ms]
    console.print(timings_table(
        rows, r.transfer_ms, r.load_ms, total=("total", r.timings_ms["total"]),
        caption="the CPU build emulates each CUDA thread: these times say nothing about a GPU"
        if r.backend == "cpu" else None))


def corner_table(title: str, rows: list[list[float]], cell) -> Table:
    """The top-left corner of a (T, T) matrix, as the course draws its triangle."""
    table = Table(title=title, title_justify="left")
    table.add_column("row")
    for j in range(len(rows[0]) if rows else 0):
        table.add_column(str(j), justify="right")
    for i, row in enumerate(rows):
        table.add_row(str(i), *[cell(x) for x in row])
    return table
