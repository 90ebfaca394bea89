"""ThreadSanitizer's data-race reports, said in CUDA's terms: one line per hazard, naming the kind
(read after write, write after read, write after write), the memory (a kernel parameter and its
element, or a shared variable and its byte offset), both threads by thread and block index, both
lines of the kernel file, and the ordering rule the two accesses lack. Pure: text in, lines out."""

from __future__ import annotations

import re
from dataclasses import dataclass

SHOWN = 3  # hazards spelled out per launch; the rest are counted

_HEAD = re.compile(r"^WARNING: ThreadSanitizer: data race")
_ACCESS = re.compile(r"^\s*(Previous )?(atomic )?(read|write) of size (\d+) at (0x[0-9a-f]+) "
                     r"by (?:thread (T\d+)|main thread)", re.IGNORECASE)
_FRAME = re.compile(r"^\s*#\d+ .*?(\S+\.cuh?):(\d+)")
_THREAD = re.compile(r"^\s*Thread (T\d+) '([^']*)'")
_NAME = re.compile(r"block \((\d+), (\d+), (\d+)\) thread \((\d+), (\d+), (\d+)\)")


@dataclass(frozen=True)
class Access:
    write: bool
    atomic: bool
    size: int
    address: int
    thread: str  # TSan's "T12"
    line: str  # "kernel.cu:58", or "?" when TSan's history no longer holds it


@dataclass(frozen=True)
class Race:
    now: Access  # the later access in this run
    before: Access
    names: dict  # TSan thread id -> "block (x, y, z) thread (x, y, z)"


@dataclass(frozen=True)
class Memory:
    """What the launch's addresses are: device arrays by parameter, shared memory, symbols."""

    arrays: list  # (parameter name, start, nbytes, itemsize)
    static_shared: tuple[int, int]  # (start, size) of the static __shared__ variables' block
    shared_symbols: list  # (offset in that block, size, name) of each static __shared__ variable
    dynamic_shared: tuple[int, int]  # (start, size) of the launch's extern __shared__ bytes
    fences: list  # ((block, thread) indices, "file:line") of fences no atomic followed


def parse(report: str) -> list[Race]:
    """Every data race in ThreadSanitizer's text output."""
    races = []
    for chunk in re.split(r"^={10,}$", report, flags=re.MULTILINE):
        lines = chunk.strip().splitlines()
        if not lines or not _HEAD.match(lines[0]):
            continue
        accesses, names, current = [], {}, None
        for line in lines[1:]:
            m = _ACCESS.match(line)
            if m:
                current = Access(m.group(3).lower() == "write", bool(m.group(2)), int(m.group(4)), int(m.group(5), 16),
                                 m.group(6) or "main", "?")
                accesses.append(current)
                continue
            t = _THREAD.match(line)
            if t:
                names[t.group(1)] = t.group(2)
                current = None
                continue
            f = _FRAME.match(line)
            if f and current is not None and current.line == "?":
                accesses[-1] = current = Access(current.write, current.atomic, current.size, current.address,
                                                current.thread, f"{f.group(1).rsplit('/', 1)[-1]}:{f.group(2)}")
            elif line.strip().startswith("Location is") or line.strip().startswith("Mutex"):
                current = None
        if len(accesses) >= 2:
            races.append(Race(accesses[0], accesses[1], names))
    return races


def kind(race: Race) -> str:
    later = "write" if race.now.write else "read"
    earlier = "write" if race.before.write else "read"
    return f"{later} after {earlier}"


def indices(name: str) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """"block (1, 0, 0) thread (5, 0, 0)" -> ((1, 0, 0), (5, 0, 0))."""
    m = _NAME.search(name or "")
    if not m:
        return None
    v = tuple(int(x) for x in m.groups())
    return v[:3], v[3:]


def where(address: int, memory: Memory) -> str:
    for param, start, nbytes, itemsize in memory.arrays:
        if start <= address < start + nbytes:
            return f"{param}[{(address - start) // itemsize}]"
    lo, size = memory.static_shared
    if lo <= address < lo + size:
        offset = address - lo
        for at, n, name in memory.shared_symbols:
            if at <= offset < at + max(n, 1):
                return f"__shared__ {name} byte {offset - at}"
        return f"static __shared__ memory byte {offset}"
    lo, size = memory.dynamic_shared
    if lo <= address < lo + size:
        return f"extern __shared__ memory byte {address - lo}"
    return f"address {address:#x}"


def _thread_text(ids, dims: tuple[int, int] = (3, 3)) -> str:
    """"thread (5) of block (1)": as many indices as the launch's block and grid use."""
    block, thread = ids
    return f"thread {_short(thread, dims[0])} of block {_short(block, dims[1])}"


def _short(v: tuple[int, ...], n: int) -> str:
    return "(" + ",".join(str(x) for x in v[:n]) + ")"


def _dims(shape: tuple[int, ...]) -> int:
    """(64, 1, 1) -> 1, (32, 8, 1) -> 2: the dimensions in use."""
    return 3 if shape[2] > 1 else 2 if shape[1] > 1 else 1


def rule(a, b, block_threads: int, block_x: int, block_y: int) -> str:
    """Why nothing orders the two threads, by where they are: other blocks, one warp, one block."""
    if a is None or b is None:
        return "nothing orders the two accesses"
    if a[0] != b[0]:
        return ("blocks of one launch are never ordered (only a __threadfence() then an atomic the other "
                "block's atomic reads would be)")

    def linear(t):
        return (t[2] * block_y + t[1]) * block_x + t[0]

    if linear(a[1]) // 32 == linear(b[1]) // 32:
        return ("lanes of one warp are ordered only by a __syncwarp naming both (or __syncthreads): "
                "shuffles and votes order no memory")
    # Hopper's kernels order their threads by more than the one barrier: a hint naming only
    # __syncthreads() sent a reader of kernel6 looking for a barrier it had on purpose replaced
    return ("threads of one block are ordered only by __syncthreads(), a named barrier (bar.sync id, n) "
            "both join, or an mbarrier phase one arrives on and the other waits for")


PROXY = " async proxy"  # racecheck.h names a thread's async proxy "block (..) thread (..) async proxy"

# The rules when one side is the tensor cores' read through a wgmma descriptor (the async proxy)
PROXY_READ_RULE = ("the tensor cores (async proxy) see another proxy's write only through fence.proxy.async: "
                   "fence_proxy_async() after the write and before the __syncthreads() (or after it, before the "
                   "wgmma); a barrier alone orders nothing for them: the fence is missing (for a write meant "
                   "after the wgmma: its wgmma_wait, then __syncthreads(), then the write)")
PROXY_WAR_RULE = ("the tensor cores read until the wgmma_wait that retires the wgmma: wgmma_wait, then "
                  "__syncthreads(), then the write")


def proxy_rule(race: Race) -> str | None:
    """The ordering rule when the async proxy made one of the two accesses, else None."""
    now, before = (race.names.get(x.thread, "").endswith(PROXY) for x in (race.now, race.before))
    if now and not race.now.write:
        return PROXY_READ_RULE
    if before and not race.before.write:
        return PROXY_WAR_RULE
    return None


def describe(race: Race, memory: Memory, block: tuple[int, int, int]) -> str:
    """One line: kind, memory, both threads and lines, the rule."""
    a, b = indices(race.names.get(race.now.thread, "")), indices(race.names.get(race.before.thread, ""))
    blocks = [ids[0] for ids in (a, b) if ids]
    dims = (_dims(block), max([_dims(tuple(x + 1 for x in v)) for v in blocks] or [1]))

    def who(access, ids):
        text = _thread_text(ids, dims) if ids else f"TSan thread {access.thread}"
        return f"{text}'s tensor cores" if race.names.get(access.thread, "").endswith(PROXY) else text

    now, before = who(race.now, a), who(race.before, b)
    verb_now = ("atomically " if race.now.atomic else "") + ("writes" if race.now.write else "reads")
    verb_before = ("atomically " if race.before.atomic else "") + ("wrote" if race.before.write else "read")
    why = proxy_rule(race) or rule(a, b, block[0] * block[1] * block[2], block[0], block[1])
    text = (f"{kind(race)} on {where(race.now.address, memory)}: {now} {verb_now} at {race.now.line}, "
            f"{before} {verb_before} at {race.before.line}; {why}")
    notes = [f"{_thread_text(ids, dims)} ran __threadfence() at {site} with no atomic after it, so it orders nothing"
             for ids, site in memory.fences if ids in (a, b)]
    return text + "".join(f" ({note})" for note in notes[:1])


def summarize(races: list[Race], memory: Memory, block: tuple[int, int, int]) -> list[str]:
    """The first SHOWN hazards, one line each (the same pair of lines said once), and a count of
    the rest."""
    lines, seen = [], set()
    for race in races:
        key = (kind(race), race.now.line, race.before.line)
        if key in seen:
            continue
        seen.add(key)
        lines.append(describe(race, memory, block))
    if len(lines) > SHOWN:
        rest = len(lines) - SHOWN
        lines = lines[:SHOWN] + [f"and {rest} more race{'s' if rest > 1 else ''}"]
    return lines
