"""Cut a CUDA program into its two halves without rewriting a line of device code.

The suite runners hand a benchmark's file to andrea_cli.RawModule as written, except the host
functions that call the CUDA runtime API or launch with <<<...>>> (and main): those are blanked,
line for line, so the kernel file's line numbers still name the suite's lines. The host half
(the benchmark's own main, its CPU reference and its check) is compiled apart by host.py, with
each <<<...>>> launch turned into a call back into Python that launches through RawModule, and
every device function body left out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_DEVICE_ONLY = re.compile(r"\b__global__\b|\b__device__\b")
_HOST_QUALIFIER = re.compile(r"\b__host__\b")


def masked(text: str) -> str:
    """The text with comments, string and character literals and preprocessor lines turned to
    spaces (newlines kept): braces and parentheses in them no longer count."""
    out = list(text)
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == "#":
            j = i
            while j < n and text[j] != "\n":  # a directive, with its backslash continuations
                if text[j] == "\\" and j + 1 < n and text[j + 1] == "\n":
                    j += 2
                    continue
                j += 1
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
            continue
        if c in " \t":
            i += 1
            continue
        line_start = c == "\n"
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif c == "'" and _in_number(text, i):  # a digit separator (1'000), no character literal
            i += 1
            continue
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j += 1
        else:
            i += 1
            continue
        for k in range(i, min(j, n)):
            if out[k] != "\n":
                out[k] = " "
        i = j
    return "".join(out)


def _in_number(text: str, i: int) -> bool:
    """Whether text[i] sits inside a numeric literal: its token, read back, starts with a digit."""
    j = i
    while j > 0 and (text[j - 1].isalnum() or text[j - 1] in "_.'"):
        j -= 1
    return j < i and text[j].isdigit()


@dataclass(frozen=True)
class Definition:
    """A function definition at namespace scope: [start, end) covers its head and body."""

    name: str
    head: str  # masked text from the end of the previous declaration to the opening brace
    body: str  # masked text of the body, braces included
    start: int
    body_start: int
    end: int


_NAME = re.compile(r"([~\w:]+)\s*(?:<[^<>]*>)?\s*\($")


def definitions(text: str) -> list[Definition]:
    """Every function defined at namespace scope (inside namespace and extern "C" blocks too;
    class bodies are passed over whole)."""
    code = masked(text)
    found: list[Definition] = []

    def scan(lo: int, hi: int) -> None:
        i, decl_start = lo, lo
        while i < hi:
            c = code[i]
            if c in ";}":
                decl_start = i + 1
            elif c == "{":
                head = code[decl_start:i]
                close = _matching(code, i)
                if re.match(r"\s*(namespace\b[\w\s:]*|extern\s*)$", head) or head.strip() == 'extern':
                    scan(i + 1, close)
                elif re.search(r"\)\s*(const|override|noexcept|final|\s)*$", head) and not re.search(
                        r"\b(class|struct|union|enum)\b[^(]*$", head) and "=" not in head.split("(")[0]:
                    name = _function_name(head)
                    if name:
                        start = decl_start + len(head) - len(head.lstrip())
                        found.append(Definition(name, head, code[i:close + 1], start, i, close + 1))
                i = close
                decl_start = i + 1
            i += 1

    scan(0, len(code))
    return found


def _matching(code: str, open_at: int) -> int:
    depth = 0
    for j in range(open_at, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    raise ValueError(f"unbalanced brace at offset {open_at}")


def _function_name(head: str) -> str | None:
    """`__global__ void k(float* a, int n)` -> "k"; the name before the parameter list."""
    depth = 0
    for j in range(len(head) - 1, -1, -1):  # back to the parenthesis that opens the parameters
        depth += {")": 1, "(": -1}.get(head[j], 0)
        if depth == 0 and head[j] == "(":
            m = _NAME.search(head[:j + 1])
            return m.group(1) if m else None
    return None


def _blank(text: str, start: int, end: int) -> str:
    return text[:start] + "".join("\n" if ch == "\n" else " " for ch in text[start:end]) + text[end:]


def is_host_only(d: Definition) -> bool:
    """A function without __device__ or __global__: host code (main, launches, API calls, CPU
    references, member functions whose class lives in other files)."""
    return not _DEVICE_ONLY.search(d.head)


def device_half(text: str) -> str:
    """The file as written, less its host-only function definitions (blanked, so the lines stay
    where they were): the kernels, device functions, types and macros a kernel needs, and the
    includes, as the suite has them."""
    blanked = set()
    for d in sorted(definitions(text), key=lambda d: -d.start):
        if is_host_only(d):
            text = _blank(text, d.start, d.end)
            blanked.add(d.name.split("::")[-1])
    # an explicit instantiation (`template void reduce<int>(...);`) of a blanked host template
    for name in blanked:
        pattern = re.compile(r"(?:\bextern\s+)?\btemplate\s+[^;{}<]*\b" + re.escape(name) + r"\s*<[^;{}]*;")
        for m in reversed(list(pattern.finditer(masked(text)))):
            text = _blank(text, m.start(), m.end())
    return text


_LAUNCH = re.compile(r"([A-Za-z_]\w*(?:\s*<[^<>;]*>)?)\s*<<<(.*?)>>>\s*\(", re.S)


def host_half(text: str) -> str:
    """The file for the host compile: each kernel body cut to a declaration, device functions
    gone, each `k<<<grid, block[, shared[, stream]]>>>(args)` a call of andrea_host::launcher."""
    for d in sorted(definitions(text), key=lambda d: -d.start):
        if _DEVICE_ONLY.search(d.head) and not _HOST_QUALIFIER.search(d.head):
            if "__global__" in d.head:
                text = text[:d.body_start] + ";" + "".join("\n" for ch in text[d.body_start:d.end] if ch == "\n") \
                    + text[d.end:]
            else:
                text = _blank(text, d.start, d.end)

    def launch(m: re.Match) -> str:
        name = " ".join(m.group(1).split())
        return f'andrea_host::launcher<decltype(&{name})>("{name}", {m.group(2)})('

    return _LAUNCH.sub(launch, text)
