"""The Python API's results shown as the terminal shows them: HTML for Jupyter, a Rich
renderable for Rich's own print (each draws through the command's renderer)."""

from __future__ import annotations

import io
from typing import Callable

from rich.console import Console
from rich.text import Text

HTML_WIDTH = 110  # columns: the tables' width in a notebook cell
_PRE = '<pre style="font-family: Menlo, Consolas, monospace; line-height: 1.25; font-size: 12px">{code}</pre>'


def as_html(draw: Callable[[Console], None]) -> str:
    console = Console(record=True, file=io.StringIO(), width=HTML_WIDTH, force_terminal=True,
                      color_system="truecolor", highlight=False, emoji=False)
    draw(console)
    return console.export_html(inline_styles=True, code_format=_PRE)


def as_renderable(draw: Callable[[Console], None], outer: Console, width: int) -> Text:
    """What `draw` prints, captured at the width and colours of the console printing it."""
    inner = Console(file=io.StringIO(), width=width, force_terminal=outer.color_system is not None,
                    color_system=outer.color_system or "auto", no_color=outer.no_color, highlight=False,
                    emoji=False)
    with inner.capture() as captured:
        draw(inner)
    return Text.from_ansi(captured.get())


def render_attend_result(console: Console, report) -> None:
    from andrea_cli.render.attend import render_attend

    render_attend(console, report)


def render_verify_result(console: Console, report) -> None:
    from andrea_cli.render.verify import render_verify

    render_verify(console, report)


def render_generate_result(console: Console, report) -> None:
    from andrea_cli.render.generate import render_generate

    render_generate(console, report)


def render_scaling_result(console: Console, report) -> None:
    from andrea_cli.render.scaling import render_scaling

    render_scaling(console, report)


def render_grad_result(console: Console, report) -> None:
    from andrea_cli.render.grad import render_grad

    render_grad(console, report)


def render_bench_result(console: Console, result) -> None:
    from andrea_cli.render.bench import render_bench

    render_bench(console, result)


def render_info_result(console: Console, document) -> None:
    from andrea_cli.render.info import render_info

    render_info(console, document)
