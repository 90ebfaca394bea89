"""Build a kernel file for the CPU: scan it, write the wrapper, compile it once into the cache."""

from __future__ import annotations

import functools
import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

from andrea_cli.backends.cache import cache_root
from andrea_cli.backends.cpu_runtime.errors import CompilerNotFoundError, CpuCompileError
from andrea_cli.kernel_file import kernel_parameters, packaged_cuda_file, strip_comments

HEADER = packaged_cuda_file("cuda_cpu_runtime.h")

MAX_DYNAMIC_SHARED = 228 * 1024  # bytes; the largest opt-in shared memory per block (H100)
BASE_FLAGS = ["-x", "c++", "-std=c++20", "-O2", "-fPIC", "-shared", "-fno-strict-aliasing",
              "-fvisibility=hidden", "-U_FORTIFY_SOURCE"]
SANITIZE_FLAGS = ["-g", "-fsanitize=address,undefined", "-fno-omit-frame-pointer",
                  "-fno-sanitize-recover=all"]


@dataclass(frozen=True)
class KernelSource:
    """What the wrapper needs to know about a kernel file."""

    path: pathlib.Path
    text: str
    kernels: dict[str, list[str]]  # kernel name -> parameter declarations, as written
    dynamic_shared: dict[str, str]  # `extern __shared__` array name -> element type


_DYN_SHARED = re.compile(r"extern\s+__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s*|alignas\s*\(\s*\d+\s*\)\s*)*"
                         r"([\w:\s]+?)\s+(\w+)\s*\[\s*\]\s*;")


def scan(path: pathlib.Path) -> KernelSource:
    """Find every `__global__` kernel (not templates) and every `extern __shared__` array."""
    text = path.read_text()
    code = strip_comments(text)
    dynamic = {m.group(2): " ".join(m.group(1).split()) for m in _DYN_SHARED.finditer(code)}
    return KernelSource(path, text, kernel_parameters(text), dynamic)


def wrapper_source(src: KernelSource) -> str:
    """The generated C++ file: the kernel file (its `extern __shared__` declarations pointed at the
    runtime's guarded bytes, line for line), then one export per kernel."""
    lines = [f'#line 1 "{src.path}"', rewrite_dynamic_shared(src.text), '#line 1 "andrea-wrapper"']
    for name in src.kernels:
        lines += [f"ANDREA_EXPORT void {name}__launch(void** a) {{ andrea::call(&{name}, a); }}",
                  f"ANDREA_EXPORT const char* {name}__sig() {{ return andrea::signature(&{name}); }}"]
    return "\n".join(lines) + "\n"


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


def flags_for(sanitize: bool) -> list[str]:
    return BASE_FLAGS + (SANITIZE_FLAGS if sanitize else [])


def build(src: KernelSource, *, sanitize: bool) -> pathlib.Path:
    """The compiled library for this kernel file, from the cache or compiled now."""
    cxx = find_compiler()
    wrapper = wrapper_source(src)
    flags = flags_for(sanitize)
    key = hashlib.sha256()
    for part in (src.text, HEADER.read_text(), wrapper, " ".join(flags), cxx, compiler_version(cxx)):
        key.update(part.encode())
        key.update(b"\0")
    out_dir = cache_dir()
    lib = out_dir / f"{src.path.stem}-{key.hexdigest()[:24]}{'-asan' if sanitize else ''}.so"
    if lib.exists():
        return lib
    out_dir.mkdir(parents=True, exist_ok=True)
    # Unique temporary names, then os.replace: concurrent builds of one key never see half a file.
    fd, tmp_cpp = tempfile.mkstemp(suffix=".cpp", prefix=lib.stem + ".", dir=out_dir)
    with os.fdopen(fd, "w") as f:
        f.write(wrapper)
    tmp_so = tmp_cpp[:-4] + ".so.tmp"
    cmd = [cxx, *flags, "-include", str(HEADER), "-I", str(src.path.parent), "-o", tmp_so, tmp_cpp]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise CpuCompileError(_first_error(proc.stderr, src.path), proc.stderr)
        os.replace(tmp_so, lib)
    finally:
        for leftover in (tmp_cpp, tmp_so):
            if os.path.exists(leftover):
                os.unlink(leftover)
    return lib


def _first_error(log: str, path: pathlib.Path) -> str:
    """The compiler's first `file:line:col: error: ...` line, naming the kernel file by name."""
    for line in log.splitlines():
        if re.search(r":\d+(:\d+)?: (fatal )?error:", line):
            return f"compiling {path.name} for the CPU failed: {line.strip()}"
    tail = log.strip().splitlines()[-1] if log.strip() else "no output"
    return f"compiling {path.name} for the CPU failed: {tail}"
