"""The multi-head layer's report as Rich tables: shapes, statistics per head, timings."""

from __future__ import annotations


from rich.console import Console
from rich.table import Table

from andrea_cli.backends.base import STAGES
from andrea_cli.layer import LayerReport
from andrea_cli.render.common import fmt as _fmt, print_header, scale_text, shapes_table


def render_layer(console: Console, report: LayerReport) -> None:
    r = report.attention
    print_header(console, r.notices,
                 f"[bold]output = concat(head_1 .. head_{report.n_head}) · W_O,  "
                 f"head_h = softmax(mask(Q_h·K_h^T / sqrt(d_k))) · V_h,  Q = x·W_Q[/bold]\n"
                 f"T={r.T} d_model={report.d_model} n_head={report.n_head} d_k={r.d_k} mask={r.mask} "
                 f"scale={scale_text(r.d_k, r.scaled, r.scale)}",
                 r.backend, r.device, r.source)
    console.print(shapes_table("Shapes (head h owns columns h·d_k .. (h+1)·d_k)", r.shapes))

    per_head = Table(title="Per head: row sums, mean row entropy (nats), mean largest weight, score std",
                     title_justify="left", show_edge=False)
    for column in ("head", "columns", "max|Σ-1|", "entropy", "max w", "std s", f"std s/√{r.d_k}", "masked"):
        per_head.add_column(column, justify="left" if column in ("head", "columns") else "right")

    def row(label, columns, sums, peaky, raw, scaled, hidden, style=""):
        cells = [label, columns, _fmt(sums.max_abs_dev, 2), _fmt(peaky.mean_entropy), _fmt(peaky.mean_max_weight), _fmt(raw.std), _fmt(scaled.std), "-" if hidden is None else _fmt(hidden)]
        per_head.add_row(*[f"[{style}]{c}[/{style}]" if style else c for c in cells])

    for h in report.heads:
        row(str(h.head), f"{h.columns[0]}:{h.columns[1]}", h.row_sums, h.softmax,
            h.magnitude_unscaled, h.magnitude_scaled, h.hidden_weight_max)
    row("all", f"0:{report.d_model}", r.row_sums, r.softmax, r.magnitude_unscaled, r.magnitude_scaled,
        r.hidden_weight_max, style="bold")
    console.print(per_head)

    timing = Table(title="Timings (ms)", title_justify="left")
    timing.add_column("step")
    timing.add_column("ms", justify="right")
    t = report.layer_timings_ms
    timing.add_row("projections x·W_Q, x·W_K, x·W_V (host NumPy)", f"{t['projections']:.3f}")
    timing.add_row("split into heads (host)", f"{t['split']:.3f}")
    for stage in STAGES:
        if stage in r.timings_ms:
            timing.add_row(f"  {stage} (all heads at once)", f"{r.timings_ms[stage]:.3f}")
    timing.add_row("attention total", f"{r.timings_ms['total']:.3f}")
    timing.add_row("concat heads (host)", f"{t['concat']:.3f}")
    timing.add_row("concat · W_O (host NumPy)", f"{t['w_o']:.3f}")
    timing.add_row("[bold]layer total[/bold]", f"[bold]{t['total']:.3f}[/bold]")
    for name, ms in r.transfer_ms.items():
        timing.add_row(f"copy {name} (apart)", f"{ms:.3f}")
    if r.load_ms:
        timing.add_row("kernel module load/compile (apart)", f"{r.load_ms:.1f}")
    console.print(timing)
