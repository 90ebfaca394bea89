"""Pieces every report's rendering shares: number and shape formats, the run's header lines."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table


def fmt(x: float, digits: int = 4) -> str:
    """Short numbers for tables: scientific notation only for the very large and very small."""
    if x == 0:
        return "0"
    if abs(x) >= 1e4 or abs(x) < 1e-3:
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}" if abs(x) >= 1 else f"{x:.{digits}f}"


def fmt_shape(s: list[int]) -> str:
    return "(" + ", ".join(str(n) for n in s) + ")"


def scale_text(d_k: int, scaled: bool, scale: float) -> str:
    return f"1/sqrt({d_k}) = {scale:.6g}" if scaled else "off (--no-scale)"


def print_header(console: Console, notices: list[str], title: str, backend: str, device: str,
                 source: str | None = None) -> None:
    """The notices (e.g. which backend auto chose, and why), what runs, and where."""
    for notice in notices:
        console.print(f"[yellow]{escape(notice)}[/yellow]")
    console.print(title)
    where = f"backend [bold]{escape(backend)}[/bold] on {escape(device)}"
    console.print(where + (f"; inputs: {escape(source)}" if source else ""))


def shapes_table(title: str, shapes: dict[str, list[int]]) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("array")
    table.add_column("shape", justify="right")
    table.add_column("entries", justify="right")
    for name, shape in shapes.items():
        entries = 1
        for n in shape:
            entries *= n
        table.add_row(name, fmt_shape(shape), f"{entries:,}")
    return table
