"""While the CPU build compiles (a first run: seconds), one transient line on stderr saying so;
it vanishes when the compile is done. Cached runs, and output that is not a terminal, get nothing."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from rich.console import Console
from rich.markup import escape

from andrea_cli.backends.cpu_runtime.build_notice import announce_builds


@contextmanager
def build_progress(console: Console) -> Iterator[None]:
    """console: stderr's. A status spinner per compile, stopped (and erased) when it ends."""
    if not console.is_terminal or console.is_dumb_terminal:
        yield
        return
    shown = []

    def start(line: str) -> None:
        status = console.status(escape(line))
        status.start()
        shown.append(status)

    def end() -> None:
        while shown:
            shown.pop().stop()

    with announce_builds(start, end):
        try:
            yield
        finally:
            end()
