"""Pieces every report's rendering shares: number and shape formats, the run's header lines."""

from __future__ import annotations

from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from andrea_cli.reference import scale_for


# The stages as a table names them: the course's words. The keys stay the kernels' stems
# (av_kernel1, and the "av" a script reads in the JSON); a table says "weighted sum (av)", so one
# row holds the course's word and the name to grep for in the kernel file and the JSON.
STAGE_LABELS = {"scores": "scores", "scale": "scale", "mask": "mask", "softmax": "softmax", "av": "weighted sum (av)"}


def stage_label(stage: str) -> str:
    return STAGE_LABELS.get(stage, stage)


def fmt(x: float, digits: int = 4) -> str:
    """Short numbers for tables: scientific notation only for the very large and very small."""
    if x == 0:
        return "0"
    if abs(x) >= 1e4 or abs(x) < 1e-3:
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}" if abs(x) >= 1 else f"{x:.{digits}f}"


def fmt_shape(s: list[int]) -> str:
    return "(" + ", ".join(str(n) for n in s) + ")"


def lengths_text(T: int, S: int) -> str:
    """T=64 for one sequence; L=8 S=64 for L queries against S keys."""
    return f"T={T}" if S == T else f"L={T} S={S}"


def lengths_note(T: int, S: int, mask: str) -> str | None:
    """Where L queries sit among S keys, said once under the header (None for L = S)."""
    if S == T:
        return None
    if mask == "none":
        return f"{T} queries against {S} keys: every query sees every key"
    if mask.endswith("(top-left)"):
        return f"{T} queries against {S} keys, top-left: query i sees keys up to i"
    offset = S - T
    where = f"query i sees keys up to i + {offset}" if offset >= 0 else \
        f"queries 0..{-offset - 1} see no key (output 0)"
    return f"{T} queries against {S} keys: the queries are the last {T} positions (bottom-right); {where}"


def scale_text(d_k: int, scaled, scale: float) -> str:
    """scale=1/sqrt(64) = 0.125; a factor given (the Python API's) that is 1/sqrt(d_k) reads the same."""
    if scaled is True or (scaled and scale == scale_for(d_k, True)):
        return f"1/sqrt({d_k}) = {scale:.6g}"
    return f"{scale:.6g} (given)" if scaled else "off (--no-scale)"


def print_header(console: Console, notices: list[str], title: str, backend: str, device: str,
                 source: str | None = None) -> None:
    """The notices (e.g. which backend auto chose, and why), what runs, and where."""
    for notice in notices:
        console.print(f"[yellow]{escape(notice)}[/yellow]")
    console.print(title)
    where = f"backend [bold]{escape(backend)}[/bold] on {escape(device)}"
    console.print(where + (f"; inputs: {escape(source)}" if source else ""))


def with_note(table: Table, note: str | None) -> Table | Group:
    """A table and the sentence under it. Not Rich's caption, which wraps at the table's width and
    centres what it wraps (a lone word under a narrow table): the note wraps at the console's."""
    return table if note is None else Group(table, Text(note, style="table.caption"))


def timings_table(rows: list[tuple[str, float]], transfer_ms: dict[str, float], load_ms: float, *,
                  total: tuple[str, float] | None = None, after_total: list[tuple[str, float]] = (),
                  first_column: str = "stage", caption: str | None = None) -> Table | Group:
    """Every report's timings: its own (label, ms) rows and its total in bold (then rows timed
    apart from that total), then the copies and the module load, apart from the kernels' time;
    the caption as a note under the table."""
    table = Table(title="Timings (ms)", title_justify="left")
    table.add_column(first_column)
    table.add_column("ms", justify="right")
    for label, ms in rows:
        table.add_row(label, f"{ms:.3f}")
    if total is not None:
        table.add_row(f"[bold]{total[0]}[/bold]", f"[bold]{total[1]:.3f}[/bold]")
    for label, ms in after_total:
        table.add_row(label, f"{ms:.3f}")
    for name, ms in transfer_ms.items():
        table.add_row(f"copy {name} (apart)", f"{ms:.3f}")
    if load_ms:
        table.add_row("kernel module load/compile (apart)", f"{load_ms:.1f}")
    return with_note(table, caption)


def shapes_table(title: str | None, shapes: dict[str, list[int]]) -> Table:
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
