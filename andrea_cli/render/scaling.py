"""compare-scaling's report as a Rich table with its conclusion, for people."""

from __future__ import annotations

from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table

from andrea_cli.render.common import fmt as _fmt, print_header, with_note
from andrea_cli.runs.scaling import ScalingReport, percent

DIST_NOTES = {
    "normal": "Q, K entries drawn N(0, 1): unit-variance entries, the course's \"unit vectors\". "
              "Then q·k sums d_k unit-variance products: std sqrt(d_k).",
    "unit": "Q, K rows of unit length (--dist unit). Then q·k of two random directions has std 1/sqrt(d_k), "
            "and dividing by sqrt(d_k) shrinks it to 1/d_k. The course's \"unit vectors\" are unit-variance "
            "entries (length about sqrt(d_k)): run --dist normal to see its case.",
}

# (header, attribute path on a ScalingRun): the softmax table's columns
SOFTMAX_COLUMNS = (
    ("mean\nmax p", "softmax.mean_max_weight"),
    ("entropy\n(nats)", "softmax.mean_entropy"),
    ("exp(H)", "softmax.mean_effective_positions"),
    ("rows with\nmax p > 0.99", "softmax.share_rows_over_99"),
    ("‖J‖\nmean", "softmax.mean_jacobian_norm"),
    ("‖J‖\nmedian", "median_jacobian_norm"),
)


def _get(run, path: str) -> float:
    value = run
    for name in path.split("."):
        value = getattr(value, name)
    return value


def render_scaling(console: Console, r: ScalingReport) -> None:
    print_header(console, r.notices,
                 f"[bold]softmax(mask(Q·K^T)) against softmax(mask(Q·K^T / sqrt(d_k)))[/bold]  "
                 f"T={r.T} mask={r.mask} seed={r.seed}", r.backend, r.device)
    console.print(f"inputs: {escape(DIST_NOTES[r.distribution])}")

    scores = Table(title="Scores Q·K^T, all T×T before masking", title_justify="left")
    scores.add_column("d_k", justify="right")
    scores.add_column("run")
    for label in ("std (expected)", "mean |s|", "max |s|"):
        scores.add_column(label, justify="right")
    for i, row in enumerate(r.rows):
        for which, run in (("unscaled", row.unscaled), ("scaled", row.scaled)):
            m = run.magnitude
            scores.add_row(str(row.d_k) if which == "unscaled" else "", which,
                           f"{_fmt(m.std)} ({_fmt(run.expected_std, 3)})", _fmt(m.mean_abs), _fmt(m.max_abs),
                           style="" if which == "unscaled" else "cyan",
                           end_section=which == "scaled" and i < len(r.rows) - 1)
    console.print(scores)

    table = Table(title="Softmax weights, per row, averaged over the T rows", title_justify="left")
    table.add_column("d_k", justify="right")
    table.add_column("run")
    for label, _ in SOFTMAX_COLUMNS:
        table.add_column(label, justify="right")
    for i, row in enumerate(r.rows):
        for which, run in (("unscaled", row.unscaled), ("scaled", row.scaled)):
            cells = [_fmt(_get(run, path)) for _, path in SOFTMAX_COLUMNS]
            cells[3] = percent(run.softmax.share_rows_over_99)
            table.add_row(str(row.d_k) if which == "unscaled" else "", which, *cells,
                          style="" if which == "unscaled" else "cyan",
                          end_section=which == "scaled" and i < len(r.rows) - 1)
    console.print(table)
    console.print(
        "[dim]mean max p: the largest weight of a row, "
        "averaged. exp(H): how many positions a row really mixes. ‖J‖: Frobenius norm of the softmax Jacobian "
        "diag(p) − p·p^T per row, the gradient that flows back to the scores (0 when one weight is 1).[/dim]"
    )
    if any(row.gradients for row in r.rows):
        console.print(_gradient_table(r))
    console.print()
    console.print(escape(r.conclusion))
    console.print(f"[dim]{2 * len(r.rows)} runs in {r.wall_s:.2f} s[/dim]")


def _gradient_table(r: ScalingReport) -> Group:
    """The backward pass, measured beside the Jacobian: what reaches Q and K, in total and per row.
    One line per run (unscaled, then scaled), like the softmax table: five columns fit 80."""
    table = Table(title=f"The backward pass (backend {escape(r.backend)}), dO drawn N(0, 1)",
                  title_justify="left")
    table.add_column("d_k", justify="right")
    table.add_column("run")
    for label in ("‖dQ‖", "‖dK‖", "median\n‖dQ_i‖", "quiet\nrows", "‖J‖\nmedian"):
        table.add_column(label, justify="right")
    shown = [row for row in r.rows if row.gradients]
    for i, row in enumerate(shown):
        for which, run in (("unscaled", row.unscaled), ("scaled", row.scaled)):
            g = row.gradients[which]
            table.add_row(str(row.d_k) if which == "unscaled" else "", which, _fmt(g.dq_norm), _fmt(g.dk_norm),
                          _fmt(g.median_row_dq_norm), percent(g.quiet_rows), _fmt(run.median_jacobian_norm),
                          style="" if which == "unscaled" else "cyan", end_section=which == "scaled" and i < len(shown) - 1)
    return with_note(table, "median ‖dQ_i‖: what the typical query row receives. quiet rows: ‖dS_i‖ < 1% of "
                            "‖P_i ∘ dP_i‖, a softmax that passes back almost nothing")
