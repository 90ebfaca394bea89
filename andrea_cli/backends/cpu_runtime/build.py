"""Build a kernel file for the CPU: scan it, write the wrapper, compile it once into the cache."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import pathlib
import re
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field

from andrea_cli.backends.cpu_runtime.build_notice import compiling
from andrea_cli.backends.cpu_runtime.errors import CompilerNotFoundError, CpuCompileError
from andrea_cli.backends.toolchain.cache import cache_root
from andrea_cli.kernel_file import kernel_parameters, packaged_cuda_file, strip_comments, template_kernels

HEADER = packaged_cuda_file("cuda_cpu_runtime.h")
# The runtime's own sections (included by the header) and, under include/, the headers a kernel
# file includes (cuda_fp16.h, cooperative_groups.h, cuda/std/...): all part of the cache key.
RUNTIME_DIR = HEADER.parent / "cpu_runtime"
INCLUDE_DIR = RUNTIME_DIR / "include"

WORKER_SOURCE = RUNTIME_DIR / "worker.cpp"  # the launch worker's program (worker.py starts it)
WORKER_FLAGS = ["-x", "c++", "-std=c++17", "-O2", "-U_FORTIFY_SOURCE"]

MAX_DYNAMIC_SHARED = 228 * 1024  # bytes; the largest opt-in shared memory per block (H100)
# The kernel file's optimisation level: -O2, as bench and verify's large cases run the kernels for
# real. Read at each build (part of the flags, so of the cache key): the tests build broken copies,
# which only have to fail, at -O0 (tests/conftest.py's quick_builds: a third of -O2's compile time).
OPTIMIZATION = "-O2"
# -fno-extern-tls-init: an `extern __shared__` array declared inside a function is an extern
# thread_local, whose init function g++ would call (a null weak symbol here: a fault at nil).
BASE_FLAGS = ["-x", "c++", "-std=c++20", "-fPIC", "-shared", "-fno-strict-aliasing",
              "-fvisibility=hidden", "-U_FORTIFY_SOURCE", "-fno-extern-tls-init"]
# Every symbol resolved when linking: a function the CPU build lacks is a compile error, not a
# library that fails to load.
LINK_FLAGS = ["-Wl,-z,defs"]
SANITIZE_FLAGS = ["-g", "-fsanitize=address,undefined", "-fno-omit-frame-pointer",
                  "-fno-sanitize-recover=all"]
# racecheck: ThreadSanitizer (cpu_runtime/racecheck.h tells it CUDA's ordering rules); -g for the
# kernel file's lines in its reports
RACECHECK_FLAGS = ["-g", "-fsanitize=thread"]


@dataclass(frozen=True)
class KernelSource:
    """What the wrapper needs to know about a kernel file."""

    path: pathlib.Path
    text: str
    kernels: dict[str, list[str]]  # kernel name -> parameter declarations, as written
    dynamic_shared: dict[str, str]  # `extern __shared__` array name -> element type
    templates: dict[str, list[str]] = field(default_factory=dict)  # template kernels: no export of their own
    name_expressions: tuple[str, ...] = ()  # instantiations such as "reduce<float, 256>"

    def exports(self) -> dict[str, str]:
        """What the wrapper exports: launch name -> symbol prefix (a name expression gets a
        numbered symbol: it is no C identifier)."""
        out = {name: name for name in self.kernels}
        out.update({expr: f"andrea_ne{i}" for i, expr in enumerate(self.name_expressions)})
        return out

    def parameters(self, name: str) -> list[str]:
        return self.kernels.get(name) or self.templates.get(template_name(name), [])


_DYN_SHARED = re.compile(r"extern\s+__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s*|alignas\s*\(\s*\d+\s*\)\s*)*"
                         r"([\w:\s]+?)\s+(\w+)\s*\[\s*\]\s*;")


def template_name(expression: str) -> str:
    """"reduce6<float, 256, true>" -> "reduce6"."""
    return expression.split("<", 1)[0].strip()


def normalize_expression(expression: str) -> str:
    """One spelling per name expression: no spaces around punctuation ("f< float,3 >" -> "f<float,3>")."""
    return re.sub(r"\s*([<>,()*&:])\s*", r"\1", " ".join(expression.split()))


_LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def local_headers(path: pathlib.Path, text: str, include_dirs: tuple[pathlib.Path, ...] = ()) -> list[str]:
    """The text of every header the file includes with quotes, found beside the including file or
    on the -I path, and of the headers those include (each once): kernels may live there, as
    cuda-samples keeps them in *_kernel.cuh files."""
    out, seen, todo = [], {path.resolve()}, [(path, text)]
    while todo:
        where, body = todo.pop()
        for name in _LOCAL_INCLUDE.findall(strip_comments(body)):
            found = next((d / name for d in (where.parent, *include_dirs) if (d / name).is_file()), None)
            if found is None or found.resolve() in seen:
                continue
            seen.add(found.resolve())
            header = found.read_text(errors="replace")
            out.append(header)
            todo.append((found, header))
    return out


def scan(path: pathlib.Path, name_expressions: tuple[str, ...] = (),
         include_dirs: tuple[pathlib.Path, ...] = ()) -> KernelSource:
    """Find every `__global__` kernel, the templates apart (they are launched through name
    expressions, as with cupy), and every `extern __shared__` array. Kernels defined in a header
    the file includes with quotes are kernels of the module too (as with cupy); the file's own
    definitions win a name both have."""
    text = path.read_text()
    code = strip_comments(text)
    dynamic = {m.group(2): " ".join(m.group(1).split()) for m in _DYN_SHARED.finditer(code)}
    found, templates = {}, set()
    for header in local_headers(path, text, include_dirs):
        body = strip_comments(header)
        defined = {name: params for name, params in kernel_parameters(header).items()  # not a prototype
                   if re.search(r"__global__[^;{}]*\b" + re.escape(name) + r"\s*\([^)]*\)\s*\{", body)}
        found.update(defined)
        templates |= template_kernels(header) & set(defined)
    found.update(kernel_parameters(text))
    templates |= template_kernels(text)
    kernels = {name: params for name, params in found.items() if name not in templates}
    expressions = tuple(normalize_expression(e) for e in name_expressions)
    for expr in expressions:
        if template_name(expr) not in found:
            raise CpuCompileError(f"name expression {expr!r}: {path.name} has no __global__ kernel "
                                  f"{template_name(expr)!r} (templates: {', '.join(sorted(templates)) or 'none'})", "")
    return KernelSource(path, text, kernels, dynamic, {n: found[n] for n in templates}, expressions)


def wrapper_source(src: KernelSource, macros: tuple[str, ...] = ()) -> str:
    """The generated C++ file: the options' macros, the kernel file (its `extern __shared__`
    declarations pointed at the runtime's guarded bytes, line for line), then one export per kernel."""
    lines = [*macro_lines(macros), f'#line 1 "{src.path}"', rewrite_dynamic_shared(src.text),
             '#line 1 "andrea-wrapper"']
    for name, symbol in src.exports().items():
        lines += [f"ANDREA_EXPORT void {symbol}__launch(void** a) {{ andrea::call(&{name}, a); }}",
                  f"ANDREA_EXPORT const char* {symbol}__sig() {{ return andrea::signature(&{name}); }}"]
    return "\n".join(lines) + "\n"


def macro_lines(flags: tuple[str, ...]) -> list[str]:
    """-DNAME[=VALUE] and -UNAME as #define and #undef lines at the top of the kernel file, after the
    runtime header: NVRTC's macros reach the user's code only, and one named like a name of the
    runtime's own (PolyBench's -DN=4096 against a `template <int N>`) must not reach the runtime."""
    out = []
    for flag in flags:
        if flag.startswith("-D"):
            name, _, value = flag[2:].partition("=")
            out.append(f"#define {name} {value if '=' in flag else '1'}")
        elif flag.startswith("-U"):
            out.append(f"#undef {flag[2:]}")
    return out


def rewrite_dynamic_shared(text: str) -> str:
    """`extern __shared__ T x[];` -> `T* const& x = reinterpret_cast<T* const&>(andrea::dyn_shared_base);`,
    keeping the line count, so every such array starts where the runtime puts the launch's bytes
    (against a guard page) and compiler and sanitizer messages keep the kernel file's lines."""
    def replace(m: re.Match) -> str:
        ctype = " ".join(m.group(1).split())
        return (f"{ctype}* const& {m.group(2)} = reinterpret_cast<{ctype}* const&>(andrea::dyn_shared_base);"
                + "\n" * m.group(0).count("\n"))
    return _DYN_SHARED.sub(replace, text)


def compiler_candidates() -> list[str]:
    """$CXX, else g++, else c++."""
    return [os.environ["CXX"]] if os.environ.get("CXX") else ["g++", "c++"]


def find_compiler() -> str:
    """The C++ compiler the CPU build uses: the one place that decides it (the cpu backend's
    availability and `andrea info` ask here too, so they never say yes to a build that fails)."""
    names = compiler_candidates()
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    raise CompilerNotFoundError(
        f"no C++ compiler found (tried {', '.join(names)}): install g++ (e.g. `apt-get install g++`) "
        "or set CXX to a C++20 compiler")


@functools.lru_cache(maxsize=None)
def compiler_version(cxx: str) -> str:
    return subprocess.run([cxx, "--version"], capture_output=True, text=True, check=False, timeout=30).stdout


def cache_dir() -> pathlib.Path:
    return cache_root() / "cpu"


def flags_for(sanitize: bool, racecheck: bool = False) -> list[str]:
    # -z defs would need the sanitizer's runtime linked into the library, which its worker preloads.
    base = BASE_FLAGS + [OPTIMIZATION]
    if racecheck:
        return base + RACECHECK_FLAGS
    return base + (SANITIZE_FLAGS if sanitize else LINK_FLAGS)


def runtime_text() -> str:
    """The header and every file it or a kernel file can include from the runtime's folders."""
    files = [HEADER, *sorted(p for p in RUNTIME_DIR.rglob("*") if p.is_file())]
    return "\0".join(f"{p.relative_to(HEADER.parent)}\0{p.read_text()}" for p in files)


def build(src: KernelSource, *, sanitize: bool, racecheck: bool = False,
          extra_flags: tuple[str, ...] = ()) -> pathlib.Path:
    """The compiled library for this kernel file, from the cache or compiled now. extra_flags:
    -D/-U/-I options a RawModule passes on (the macros as lines of the wrapper, -I to g++);
    sanitize (ASan) and racecheck (TSan) are flavours.

    The cache key covers the kernel file, the runtime, the flags and the compiler, and then every
    header the last build of that key read (g++'s -MMD list, kept beside the library): an edited
    `#include`d file changes the key and rebuilds."""
    cxx = find_compiler()
    macros = tuple(f for f in extra_flags if f.startswith(("-D", "-U")))
    wrapper = wrapper_source(src, macros)
    flags = flags_for(sanitize, racecheck) + [f for f in extra_flags if f not in macros]
    key = hashlib.sha256()
    for part in (src.text, runtime_text(), wrapper, " ".join(flags), cxx, compiler_version(cxx)):
        key.update(part.encode())
        key.update(b"\0")
    out_dir = cache_dir()
    flavour = "-tsan" if racecheck else "-asan" if sanitize else ""
    stem = f"{src.path.stem}-{key.hexdigest()[:24]}{flavour}"
    deps_file = out_dir / f"{stem}.deps"
    lib = _cached_library(deps_file, out_dir, stem)
    if lib is not None:
        return lib
    out_dir.mkdir(parents=True, exist_ok=True)
    # One compile per key at a time, across processes and threads: whoever asks for a key being
    # built waits for that library instead of compiling the same source again (pytest -n 2's
    # workers share a cache; the kernel file's -O2 build is seconds of CPU).
    with _key_lock(out_dir / f"{stem}.lock"):
        lib = _cached_library(deps_file, out_dir, stem)
        if lib is not None:
            return lib
        return _compile(src, cxx, flags, wrapper, out_dir, stem, deps_file)


def _cached_library(deps_file: pathlib.Path, out_dir: pathlib.Path, stem: str) -> pathlib.Path | None:
    """The library a build of this key left, if every header it read is as it was then."""
    if deps_file.exists():
        lib = out_dir / f"{stem}-{_dependencies_key(deps_file.read_text().splitlines())}.so"
        if lib.exists():
            return lib
    return None


@contextlib.contextmanager
def _key_lock(path: pathlib.Path):
    """An exclusive flock on the key's lock file (each holder opens its own, so threads of one
    process wait for each other too); released when the build is done or fails."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _compile(src: KernelSource, cxx: str, flags: list[str], wrapper: str, out_dir: pathlib.Path, stem: str,
             deps_file: pathlib.Path) -> pathlib.Path:
    """Compile the wrapper into the cache: the library under its dependencies' key, then the list."""
    # Unique temporary names, then os.replace: concurrent builds of one key never see half a file.
    fd, tmp_cpp = tempfile.mkstemp(suffix=".cpp", prefix=stem + ".", dir=out_dir)
    with os.fdopen(fd, "w") as f:
        f.write(wrapper)
    tmp_so, tmp_d = tmp_cpp[:-4] + ".so.tmp", tmp_cpp[:-4] + ".d"
    cmd = [cxx, *flags, "-MMD", "-MF", tmp_d, "-include", str(HEADER), "-I", str(src.path.parent),
           "-I", str(INCLUDE_DIR), "-o", tmp_so, tmp_cpp]
    try:
        with compiling(src.path.name, len(src.text)):
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode == -signal.SIGINT:  # Ctrl-C reaches the compiler too (the terminal's process group)
            raise KeyboardInterrupt
        if proc.returncode != 0:
            raise CpuCompileError(_first_error(proc.stderr, src.path), proc.stderr)
        deps = [d for d in _read_depfile(pathlib.Path(tmp_d)) if d != tmp_cpp]
        lib = out_dir / f"{stem}-{_dependencies_key(deps)}.so"
        os.replace(tmp_so, lib)
        tmp_deps = deps_file.with_suffix(f".{os.getpid()}.tmp")
        tmp_deps.write_text("\n".join(deps) + "\n")
        os.replace(tmp_deps, deps_file)
    finally:
        for leftover in (tmp_cpp, tmp_so, tmp_d):
            if os.path.exists(leftover):
                os.unlink(leftover)
    return lib


def _read_depfile(path: pathlib.Path) -> list[str]:
    """g++'s make rule (`out.o: a.cpp b.h \\` ...) -> the files it names (spaces escaped as `\\ `)."""
    text = path.read_text().replace("\\\n", " ")
    body = text.split(": ", 1)[1] if ": " in text else ""
    return [name.replace("\0", " ") for name in body.replace("\\ ", "\0").split()]


def _dependencies_key(files: list[str]) -> str:
    """The hash of every file a build read (a file gone since counts as its absence)."""
    key = hashlib.sha256()
    for name in files:
        path = pathlib.Path(name)
        key.update(name.encode() + b"\0" + (path.read_bytes() if path.is_file() else b"\1missing") + b"\0")
    return key.hexdigest()[:12]


def build_worker() -> pathlib.Path:
    """The launch worker's program, from the cache or compiled now (once per compiler)."""
    cxx = find_compiler()
    source = WORKER_SOURCE.read_text()
    key = hashlib.sha256("\0".join((source, " ".join(WORKER_FLAGS), cxx, compiler_version(cxx))).encode())
    out_dir = cache_dir()
    exe = out_dir / f"andrea-worker-{key.hexdigest()[:24]}"
    if exe.exists():
        return exe
    out_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".tmp", prefix=exe.name + ".", dir=out_dir)
    os.close(fd)
    try:
        with compiling("the launch worker", len(source)):
            proc = subprocess.run([cxx, *WORKER_FLAGS, "-o", tmp, str(WORKER_SOURCE), "-ldl"],
                                  capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise CpuCompileError(f"compiling the CPU build's launch worker failed: {_first_line(proc.stderr)}",
                                  proc.stderr)
        os.chmod(tmp, 0o755)
        os.replace(tmp, exe)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return exe


def _first_line(log: str) -> str:
    lines = [line for line in log.splitlines() if "error" in line] or log.strip().splitlines() or ["no output"]
    return lines[0].strip()


_ASM_STRING = re.compile(r'\basm\s*(?:volatile\s*|__volatile__\s*|goto\s*)*\(\s*"\s*([\w.:]+)')
_ASM_ERROR = re.compile(r"^(?P<file>[^\s:]+):(?P<line>\d+):(?:\d+:)? (?:Error: |error: .*\basm\b|error: "
                        r"(?:impossible constraint|output constraint|invalid .*constraint|matching constraint))")


def _inline_ptx(log: str, path: pathlib.Path) -> str | None:
    """An assembler or constraint error at an `asm` statement: inline PTX the CPU cannot run."""
    lines = path.read_text().splitlines()
    for entry in log.splitlines():
        m = _ASM_ERROR.match(entry.strip())
        if not m or pathlib.Path(m["file"]).name != path.name:
            continue
        line = int(m["line"])
        found = _ASM_STRING.search("\n".join(lines[line - 1:line + 3]))
        instruction = found.group(1) if found else "?"
        return (f"compiling {path.name} for the CPU failed: {path.name}:{line}: inline PTX `{instruction}` "
                "is not supported by the CPU build: keep it under #ifdef __CUDA_ARCH__ with a portable "
                "#else branch (see `andrea info`)")
    return None


def _first_error(log: str, path: pathlib.Path) -> str:
    """The compiler's first `file:line:col: error: ...` line, naming the kernel file by name; an
    undefined function or inline PTX said as such."""
    ptx = _inline_ptx(log, path)
    if ptx:
        return ptx
    undefined = re.search(r"undefined reference to [`'‘]([^'’`]+)['’]", log)
    if undefined:
        name = undefined.group(1).split("(")[0]
        return (f"compiling {path.name} for the CPU failed: {name} is not defined: neither the kernel file nor "
                "the CPU build's runtime has it (`andrea info` lists what the CPU build supports)")
    for line in log.splitlines():
        if re.search(r":\d+(:\d+)?: (fatal )?error:", line):
            return f"compiling {path.name} for the CPU failed: {line.strip()}"
    tail = log.strip().splitlines()[-1] if log.strip() else "no output"
    return f"compiling {path.name} for the CPU failed: {tail}"
