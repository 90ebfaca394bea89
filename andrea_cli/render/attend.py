"""`andrea attend` for people: which renderer draws which report (one head, fused, layer)."""

from __future__ import annotations

from rich.console import Console


def render_attend(console: Console, report, *, show_weights: bool = False) -> None:
    from andrea_cli.runs.fused import FusedReport
    from andrea_cli.runs.layer import LayerReport

    if isinstance(report, LayerReport):
        from andrea_cli.render.layer import render_layer

        render_layer(console, report)
    elif isinstance(report, FusedReport):
        from andrea_cli.render.fused import render_fused

        render_fused(console, report)
    else:
        from andrea_cli.render.head import render_head

        render_head(console, report)
        if show_weights:
            from andrea_cli.render.weights import render_weights

            render_weights(console, report.weights, report.mask)


def print_attend(report, *, show_weights: bool = False) -> None:
    """The report on stdout as `andrea attend` prints it (the Python API's show_weights=True)."""
    render_attend(Console(highlight=False, emoji=False), report, show_weights=show_weights)
