"""The mutants of a kernel file: universalmutator's C rules applied line by line to the code of the
chosen kernels, minus the mutants that only rename something; plus the two cheap checks run
before verify (does it compile, does it compile to the original's PTX) and the reasoned list of
equivalent mutants."""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass
from pathlib import Path

RULES = ["universal.rules", "c_like.rules", "c.rules"]  # what universalmutator applies to C
_FUNCTION = re.compile(r"__(?:global|device)__\b[^;{]*?\b(\w+)\s*\([^)]*\)\s*(?:const\s*)?\{", re.S)  # const: a method
_TOKEN = re.compile(r"0[xX][0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?[fF]?|[A-Za-z_]\w*")
# a mutant may turn one of these names into another (max ==> min); any other changed name is a
# rename, which either does not compile or unplugs a kernel from its launcher
_SWAPPABLE = {"min", "max", "fminf", "fmaxf"}


@dataclass(frozen=True)
class Mutant:
    line: int  # 1-based
    kernel: str  # the function the line belongs to ("" outside every function)
    original: str
    mutated: str  # the whole new line (a rule may add a line: break; continue;)
    rule: str

    def apply(self, text: str) -> str:
        lines = text.splitlines(keepends=True)
        lines[self.line - 1] = self.mutated
        return "".join(lines)

    def where(self) -> str:
        return f"{self.kernel or 'file'}:{self.line}"

    def shown(self) -> str:
        """The mutated code on one line, comments left out; a rule that adds a statement shows it
        after a ⏎."""
        return code_only(self.mutated)

    def original_code(self) -> str:
        return code_only(self.original)

    def to_json(self) -> dict:
        return {"line": self.line, "kernel": self.kernel, "original": self.original_code(),
                "mutated": self.shown(), "rule": self.rule}


def code_only(lines: str) -> str:
    return " ⏎ ".join(re.sub(r"\s*//.*", "", part).strip() for part in lines.rstrip("\n").split("\n"))


def kernel_spans(text: str) -> dict[str, tuple[int, int]]:
    """Every __global__ and __device__ function -> (first, last) line of its body, by brace matching
    (the parameter list is left out: a mutated declaration either does not compile or changes nothing)."""
    code = _blank_comments(text)
    spans = {}
    for m in _FUNCTION.finditer(code):
        depth, pos = 0, m.end() - 1
        while pos < len(code):
            depth += {"{": 1, "}": -1}.get(code[pos], 0)
            if depth == 0:
                break
            pos += 1
        spans[m.group(1)] = (code.count("\n", 0, m.end()) + 2, code.count("\n", 0, pos) + 1)
    return spans


def _blank_comments(text: str) -> str:
    """Comments replaced by spaces, newlines kept: offsets and line numbers stay the same."""
    return re.sub(r"//[^\n]*|/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)


def _renames(original: str, mutated: str) -> bool:
    """Does the mutant change a name (or a digit inside one, as in float4 or kernel1)? Literals are
    left to the compiler: a mangled one simply does not compile."""
    start = 0
    while start < min(len(original), len(mutated)) and original[start] == mutated[start]:
        start += 1
    end_o, end_m = len(original), len(mutated)
    while end_o > start and end_m > start and original[end_o - 1] == mutated[end_m - 1]:
        end_o, end_m = end_o - 1, end_m - 1
    for tok in _TOKEN.finditer(original):
        touches = tok.start() < max(end_o, start + 1) and tok.end() > start
        if not touches:
            continue
        name = tok.group(0)
        if name[0].isalpha() or name[0] == "_":
            new = _TOKEN.match(mutated, tok.start())
            if name in _SWAPPABLE and new and new.group(0) in _SWAPPABLE:
                continue
            return True
    return False


def generate(text: str, spans: dict[str, tuple[int, int]], *, kernels: list[str] | None = None,
             lines: tuple[int, int] | None = None) -> list[Mutant]:
    """universalmutator's mutants of the chosen functions' lines, renames left out."""
    from universalmutator import mutator

    source = text.splitlines(keepends=True)
    # universalmutator takes "{-" for the start of a Haskell/Elm block comment and skips every
    # line until "-}": one `{-INFINITY, ...}` initialiser would end the mutants there. It gets
    # "{ -" instead (the same line numbers), and the mutants get their "{-" back.
    masked = [line.replace("{-", "{ -") for line in source]
    with contextlib.redirect_stdout(io.StringIO()):  # it prints its progress
        raw = mutator.mutants_regexp(masked, RULES, ignorePatterns=[])
    raw = [(line, mutated.replace("{ -", "{-") if "{-" in source[line - 1] else mutated, rule, rest)
           for line, mutated, rule, rest in raw]
    owner = {}
    for name, (first, last) in spans.items():
        if kernels is None or name in kernels:
            for n in range(first, last + 1):
                owner[n] = name
    code_lines = _blank_comments(text).splitlines()
    out = []
    for line, mutated, (rule, _where), _ in raw:
        if line not in owner or (lines and not lines[0] <= line <= lines[1]):
            continue
        if not code_lines[line - 1].strip() or _renames(source[line - 1], mutated):
            continue
        out.append(Mutant(line, owner[line], source[line - 1], mutated, rule))
    return out


def ptx_of(path: Path) -> tuple[str | None, str | None]:
    """(PTX for sm_90a, None) or (None, the first compile error). NVRTC needs no GPU. sm_90a: the
    one architecture where every kernel's body is live; for sm_80 the wgmma kernel (kernel6) traps
    at its first wgmma, and every mutant after it would compile to the original's PTX."""
    try:
        from cupy.cuda import nvrtc
    except Exception as exc:  # noqa: BLE001 - any import failure means the same: no NVRTC here
        return None, f"NVRTC unavailable ({type(exc).__name__})"
    program = nvrtc.createProgram(path.read_text(), path.name, [], [])
    try:
        nvrtc.compileProgram(program, ["--gpu-architecture=compute_90a", "--std=c++17"])
        return nvrtc.getPTX(program).decode(errors="replace"), None
    except nvrtc.NVRTCError:
        log = nvrtc.getProgramLog(program)
        log = log.decode(errors="replace") if isinstance(log, bytes) else log
        first = next((ln for ln in log.splitlines() if "error" in ln), log.strip()[:200])
        return None, f"does not compile: {first.strip()}"
    finally:
        nvrtc.destroyProgram(program)


def load_equivalents(path: Path) -> dict[tuple[str, str, str], str]:
    """(kernel, original line, mutated line) -> why the mutant is equivalent. The file holds blocks of
    `kernel:` (optional: blank = any), `original:`, `mutant:`, `why:` lines, blank-line separated."""
    found: dict[tuple[str, str, str], str] = {}
    if not path.is_file():
        return found
    block: dict[str, str] = {}
    for raw in path.read_text().splitlines() + [""]:
        if raw.startswith("#"):
            continue
        if not raw.strip():
            if block:
                found[(block.get("kernel", ""), block["original"], block["mutant"])] = block["why"]
            block = {}
            continue
        key, _, value = raw.partition(":")
        if key in ("why",) and "why" in block:
            block["why"] += " " + value.strip()
        else:
            block[key.strip()] = value.strip()
    return found
