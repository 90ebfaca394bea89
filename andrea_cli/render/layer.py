"""The multi-head layer's report as Rich tables: shapes, statistics per head, timings."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from andrea_cli.backends.base import STAGES
from andrea_cli.render.common import fmt as _fmt, print_header, scale_text, shapes_table, stage_label, timings_table
from andrea_cli.render.kernels import print_kernels, print_verdict
from andrea_cli.runs.layer import LayerReport


def kib(n: int) -> str:
    """Bytes as KiB, or MiB from 1 MiB (the preset's cache is MiB, a test layer's KiB)."""
    return f"{n / 2**20:,.1f} MiB" if n >= 2**20 else f"{n / 1024:,.1f} KiB"


def kv_cache_line(report: LayerReport) -> str:
    """The K/V head count and what the K/V cache (float32 K and V for the T tokens) comes to."""
    c = report.kv_cache
    if c.n_kv_head == c.n_head:
        return f"K/V heads {c.n_kv_head} (one per query head): K/V cache {kib(c.bytes)} for T={c.T}, none saved"
    return (f"K/V heads {c.n_kv_head} ({c.n_head // c.n_kv_head} query heads each): K/V cache "
            f"{kib(c.bytes)} for T={c.T},\n  {kib(c.saved)} saved ({c.saved / c.bytes_for(c.n_head):.0%}) "
            f"against {c.n_head} K/V heads")


def render_layer(console: Console, report: LayerReport) -> None:
    r = report
    c = report.kv_cache
    group = c.n_head // c.n_kv_head
    kv, kv_where = ("h", "") if group == 1 else ("g", f", g = h // {group}")  # the K/V head query head h reads
    # heads count from 0 here as in the per-head table and --head N
    print_header(console, r.notices,
                 f"[bold]output = concat(head_0 .. head_{report.n_head - 1}) · W_O,  "
                 f"head_h = softmax(mask(Q_h·K_{kv}^T / sqrt(d_k))) · V_{kv}{kv_where},  Q = x·W_Q[/bold]\n"
                 f"T={r.T} d_model={report.d_model} n_head={report.n_head} d_k={r.d_k} mask={r.mask} "
                 f"scale={scale_text(r.d_k, r.scaled, r.scale)}",
                 r.backend, r.device, r.source)
    print_kernels(console, r)
    print_verdict(console, r)
    console.print(kv_cache_line(report))
    # The note goes on its own line: as the table's title it wrapped to the table's width (38 columns)
    console.print("Shapes (head h owns columns h·d_k .. (h+1)·d_k)")
    console.print(shapes_table(None, r.shapes))

    per_head = Table(title="Per head: row sums, mean row entropy (nats), mean largest weight, score std",
                     title_justify="left", show_edge=False)
    for column in ("head", "columns", "max|Σ-1|", "entropy", "max w", "std s", f"std s/√{r.d_k}", "masked"):
        per_head.add_column(column, justify="left" if column in ("head", "columns") else "right")

    def row(label, columns, w, style=""):
        hidden = w.hidden_weight_max
        cells = [label, columns, _fmt(w.row_sums.max_abs_dev, 2), _fmt(w.softmax.mean_entropy),
                 _fmt(w.softmax.mean_max_weight), _fmt(w.magnitude_unscaled.std), _fmt(w.magnitude_scaled.std),
                 "-" if hidden is None else _fmt(hidden)]
        per_head.add_row(*[f"[{style}]{c}[/{style}]" if style else c for c in cells])

    for h in report.heads:
        row(str(h.head), f"{h.columns[0]}:{h.columns[1]}", h.weight_stats)
    row("all", f"0:{report.d_model}", r.weight_stats, style="bold")
    console.print(per_head)

    t = report.host_timings_ms
    rows = [("projections x·W_Q, x·W_K, x·W_V (host NumPy)", t["projections"]), ("split into heads (host)", t["split"]),
            *((f"  {stage_label(stage)} (all heads at once)", r.timings_ms[stage]) for stage in STAGES if stage in r.timings_ms),
            ("attention total", r.timings_ms["total"]), ("concat heads (host)", t["concat"]),
            ("concat · W_O (host NumPy)", t["w_o"])]
    console.print(timings_table(rows, r.transfer_ms, r.load_ms, total=("layer total", t["total"]), first_column="step"))
