"""`attend --fused` reports as Rich tables."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from andrea_cli.render.common import (fmt as _fmt, fmt_shape, lengths_note, lengths_text, print_header, scale_text,
                                     timings_table)
from andrea_cli.render.kernels import print_kernels, print_verdict
from andrea_cli.runs.fused import FusedReport


def render_fused(console: Console, r: FusedReport) -> None:
    print_header(console, r.notices,
                 f"[bold]Attention(Q, K, V), fused kernel[/bold] {r.kernel}, {r.precision}  {lengths_text(r.T, r.S)} d_k={r.d_k} "
                 f"d_v={r.d_v} mask={r.mask} scale={scale_text(r.d_k, r.scaled, r.scale)}",
                 r.backend, r.device, r.source)
    print_kernels(console, r)
    print_verdict(console, r)
    note = lengths_note(r.T, r.S, r.mask)
    if note:
        console.print(note)
    shapes = Table(title=f"Shapes (no {'T×T' if r.S == r.T else 'L×S'} matrix is stored)", title_justify="left")
    shapes.add_column("array")
    shapes.add_column("shape", justify="right")
    for name, shape in r.shapes.items():
        shapes.add_row(name, fmt_shape(shape))
    console.print(shapes)

    if r.sample is not None:
        s, w = r.sample, r.sample.weight_stats
        table = Table(title=f"Sampled rows ({len(s.rows)} of {r.T}), recomputed with the reference",
                      title_justify="left")
        table.add_column("measure")
        table.add_column("value", justify="right")
        if w.rows_seeing_no_key:
            table.add_row("rows that see no key (left out below)", f"{w.rows_seeing_no_key:,}")
        table.add_row("score std, unscaled / scaled", f"{_fmt(w.magnitude_unscaled.std)} / {_fmt(w.magnitude_scaled.std)}")
        table.add_row("max |row sum - 1|", _fmt(w.row_sums.max_abs_dev))
        if w.hidden_weight_max is not None:
            table.add_row("largest weight on a masked position", _fmt(w.hidden_weight_max))
        table.add_row("mean largest weight per row", _fmt(w.softmax.mean_max_weight))
        table.add_row("mean row entropy (nats)", _fmt(w.softmax.mean_entropy))
        table.add_row("max |fused output - reference|", _fmt(s.output_max_abs_err))
        console.print(table)

    stages = [("to_bf16 (Q, K, V)", r.timings_ms["to_bf16"])] if "to_bf16" in r.timings_ms else []
    console.print(timings_table(stages + [("fused", r.timings_ms["fused"])], r.transfer_ms, r.load_ms))
