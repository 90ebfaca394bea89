"""Progress lines while a command works (verify's cases, bench's sizes): on a terminal one
transient line that Rich redraws in place and erases at the end, so only the report stays on
screen; elsewhere (a log, a pipe) one plain line each, where a hang can be traced."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

from rich.console import Console
from rich.markup import escape
from rich.table import Column
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn


@contextmanager
def progress_lines(console: Console, echo: Callable[[str], None]) -> Iterator[Callable[[str], None]]:
    """A callback taking each progress line. console: stderr's; echo: how a plain line goes out."""
    if not console.is_terminal or console.is_dumb_terminal:
        yield echo
        return
    columns = (SpinnerColumn(), TimeElapsedColumn(), TextColumn("{task.description}", markup=True,
                                                                         table_column=Column(no_wrap=True, overflow="ellipsis")))
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("starting", total=None)
        yield lambda line: progress.update(task, description=escape(line))
