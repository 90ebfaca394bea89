"""Telling whoever waits that the CPU build is compiling: a first build takes seconds (the
packaged kernel file about 10 s on 2 cores), a cached one nothing. build() announces each
compile it starts; a caller that shows progress listens for the duration of a command."""

from __future__ import annotations

import contextlib
import time
from typing import Callable, Iterator

# Seconds of g++ -O2 per byte of kernel file, measured: the packaged file (190 kB) compiled in
# 9.6 s on 2 cores (`rm -rf $ANDREA_CACHE_DIR; time andrea attend --T 64 --backend cpu`).
# Rewritten by each build this process finishes, so the estimate follows this machine.
_seconds_per_byte = 9.6 / 190_000

_listeners: list[tuple[Callable[[str], None], Callable[[], None]]] = []


@contextlib.contextmanager
def announce_builds(start: Callable[[str], None], end: Callable[[], None] = lambda: None) -> Iterator[None]:
    """Within the block, start(line) is called when a compile begins (a cache miss) and end()
    when it is over; cached builds call neither."""
    entry = (start, end)
    _listeners.append(entry)
    try:
        yield
    finally:
        _listeners.remove(entry)


def estimate_seconds(source_bytes: int) -> int:
    return max(1, round(source_bytes * _seconds_per_byte))


@contextlib.contextmanager
def compiling(what: str, source_bytes: int) -> Iterator[None]:
    """Around one compile: the listeners told "compiling X for the CPU (once; about N s)"."""
    global _seconds_per_byte
    line = f"compiling {what} for the CPU (once, then cached; about {estimate_seconds(source_bytes)} s)"
    for start, _ in list(_listeners):
        start(line)
    began = time.perf_counter()
    try:
        yield
        if source_bytes > 10_000:  # a small file's time is mostly g++ starting: no rate to learn
            _seconds_per_byte = (time.perf_counter() - began) / source_bytes
    finally:
        for _, end in list(_listeners):
            end()
