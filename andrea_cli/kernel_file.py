"""Where the kernel file is, and what it holds."""

from __future__ import annotations

import re
from pathlib import Path

from andrea_cli.errors import AndreaError

KERNEL_FILE_NAME = "microgpt_cuda.cu"
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
# extern "C" (optional here, so a kernel without it can be named in an error), __global__, an
# optional __launch_bounds__ on either side of void, the name, the parameter list
_KERNEL = re.compile(r'(?P<linkage>extern\s+"C"\s+)?__global__\s+(?:__launch_bounds__\s*\((?P<before>[^)]*)\)\s*)?'
                     r"void\s+(?:__launch_bounds__\s*\((?P<after>[^)]*)\)\s*)?(?P<name>\w+)\s*\((?P<params>[^)]*)\)")


def strip_comments(text: str) -> str:
    """The kernel file's opening comment block names every kernel: only code counts."""
    return _COMMENTS.sub(" ", text)


def kernel_parameters(text: str) -> dict[str, list[str]]:
    """Every __global__ kernel in the source -> its parameter declarations, as written."""
    return {m["name"]: [p.strip() for p in m["params"].split(",") if p.strip() and p.strip() != "void"]
            for m in _KERNEL.finditer(strip_comments(text))}


def template_kernels(text: str) -> set[str]:
    """Kernels declared after a `template <...>` head: each instantiation is a kernel of its own."""
    code = strip_comments(text)
    found = set()
    for m in _KERNEL.finditer(code):
        head = code[:m.start(0)].rstrip()
        depth = 0
        for i in range(len(head) - 1, -1, -1):  # back over the balanced <...> before __global__
            depth += {">": 1, "<": -1}.get(head[i], 0)
            if depth == 0:
                if i < len(head) - 1 and head[:i].rstrip().endswith("template"):
                    found.add(m["name"])
                break
    return found


def _c_linkage(text: str) -> set[str]:
    """Kernels declared extern "C": cupy finds a kernel by its plain name only then."""
    return {m["name"] for m in _KERNEL.finditer(strip_comments(text)) if m["linkage"]}


def packaged_cuda_file(name: str) -> Path:
    """A file of the cuda/ folder: the wheel carries it inside the package; a source checkout
    has it at the repository's cuda/."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "cuda" / name, here.parent / "cuda" / name):
        if candidate.is_file():
            return candidate
    raise AndreaError(f"the packaged file cuda/{name} is missing: reinstall andrea (pip install .)")


def packaged_kernel_path() -> Path:
    return packaged_cuda_file(KERNEL_FILE_NAME)


def resolve_kernel_path(user_path: Path | None, required: tuple[str, ...] = ()) -> Path:
    """--kernel FILE, checked, or the packaged file. required: the kernels the launchers call
    (the kernel table's): an edited copy must keep every one of them (its bodies are the user's)."""
    if user_path is None:
        return packaged_kernel_path()
    if not user_path.is_file():
        raise AndreaError(f"--kernel {user_path}: no such file; pass a copy of {KERNEL_FILE_NAME}")
    try:
        text = user_path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise AndreaError(f"--kernel {user_path}: cannot read it as text ({exc.__class__.__name__})") from None
    missing = [name for name in required if name not in _c_linkage(text)]
    if missing:
        raise AndreaError(f'--kernel {user_path}: no extern "C" __global__ {", ".join(missing)} in it; '
                          f"an edited copy of {KERNEL_FILE_NAME} must keep every kernel")
    return user_path


def kernel_names(path: Path) -> list[str]:
    return list(kernel_parameters(path.read_text()))


# A catalogue entry of the opening comment starts "//   name" (or "//   name1, name2") and a gap.
_ENTRY = re.compile(r"^//   (\w+(?:, \w+)*)(?:\s{2,}|$)", re.M)


def register_budgets(text: str) -> dict[str, int]:
    """{kernel: register budget} from the opening comment: each catalogue entry ends with
    "registers <= a, <= b", one number per kernel it names, in the same order."""
    header = "\n".join(line for line in _leading_comment(text))
    entries = list(_ENTRY.finditer(header))
    budgets: dict[str, int] = {}
    for n, entry in enumerate(entries):
        body = header[entry.start():entries[n + 1].start() if n + 1 < len(entries) else len(header)]
        after = re.split(r"registers\s*(?=<=)", body, maxsplit=1)
        numbers = [int(x) for x in re.findall(r"<=\s*(\d+)", after[1])] if len(after) == 2 else []
        budgets.update(zip((name.strip() for name in entry.group(1).split(",")), numbers))
    return budgets


def _leading_comment(text: str):
    for line in text.splitlines():
        if not line.startswith("//"):
            return
        yield line


_DEFINE = re.compile(r"^[ \t]*#define[ \t]+(\w+)[ \t]+([^\n]+)$", re.M)
_INTEGER_EXPRESSION = re.compile(r"[\d\s()+\-*/]+")


def _evaluate(expression: str, names: dict[str, int]) -> int | None:
    """An integer expression of digits, + - * / ( ) and names already known; None if it is not one."""
    expression = re.sub(r"\b[A-Z_][A-Z0-9_]*\b", lambda m: str(names.get(m.group(0), m.group(0))), expression)
    if not _INTEGER_EXPRESSION.fullmatch(expression):
        return None
    return int(eval(expression.replace("/", "//"), {"__builtins__": {}}))  # digits and + - * / ( ) only


def integer_defines(text: str) -> dict[str, int]:
    """{NAME: value} of every `#define NAME <integer expression>` (other such names allowed in
    it, e.g. `(16 * TC_WARPS)`): the sizes the launchers must use as the kernels do. A name
    defined twice (under #if/#else) keeps its first value; a non-integer define is left out."""
    found: dict[str, int] = {}
    for name, body in _DEFINE.findall(strip_comments(text)):
        value = _evaluate(body, found)
        if name not in found and value is not None:
            found[name] = value
    return found


def launch_bounds(text: str) -> dict[str, int]:
    """{kernel: its __launch_bounds__' threads per block} for every kernel that declares them (the
    block size it is compiled for, e.g. `__launch_bounds__(32 * TC_WARPS)` -> 128)."""
    defines = integer_defines(text)
    found = {}
    for m in _KERNEL.finditer(strip_comments(text)):
        bounds = m["before"] or m["after"]
        threads = _evaluate(bounds.split(",")[0], defines) if bounds else None
        if threads is not None:
            found[m["name"]] = threads
    return found
