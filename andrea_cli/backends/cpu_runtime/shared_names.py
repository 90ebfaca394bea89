"""Static shared memory named in a launch's error: the runtime says where a barrier is as
"shared+OFFSET" (its offset in the library's thread-local block, which holds every static
__shared__ array of the CPU build); this adds the variable and the byte inside it
("shared+9248 (bars in mbarrier_ring_check, byte 32)"), from the library's symbol table."""

from __future__ import annotations

import re

_PLACE = re.compile(r"(?<!dynamic )shared\+(\d+)")


def name_shared(text: str, symbols: list[tuple[int, int, str]]) -> str:
    """text with each "shared+N" followed by the variable that holds byte N, where one does.
    symbols: (offset, size, name) of each static __shared__ variable (racecheck.static_shared_symbols)."""
    def named(m: re.Match) -> str:
        off = int(m.group(1))
        for start, size, name in symbols:
            if start <= off < start + size:
                return f"{m.group(0)} ({name}, byte {off - start})"
        return m.group(0)
    return _PLACE.sub(named, text)
