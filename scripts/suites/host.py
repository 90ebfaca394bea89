"""Run a CUDA program's own host code (its main, CPU reference and check) with its kernels on
andrea_cli.RawModule: the host half compiled by g++ against andrea_host.h, each <<<...>>> launch a
call back into Python, device memory andrea's guarded arrays (one address for host and kernel).

    kernels = RawModule(code=device_half(text), options=...)   # the kernels as written
    result = run_program(kernels, [HostSource(...)], defines, include_dirs, argv)

The program runs in a forked child (its exit(), a crash or an endless loop end only the child);
its stdout and stderr come back as text, with the first error andrea raised in a launch.
"""

from __future__ import annotations

import bisect
import ctypes
import hashlib
import os
import pathlib
import select
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass

import numpy as np

from andrea_cli.backends.cpu_runtime.guarded_memory import guarded_empty
from andrea_cli.backends.cpu_runtime.native import SCALARS
from cuda_source import host_half

HERE = pathlib.Path(__file__).resolve().parent
_LAUNCH_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint),
                              ctypes.POINTER(ctypes.c_uint), ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p),
                              ctypes.c_int)
_ALLOC_FN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t)
_FREE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_GLUE = r"""
#include "andrea_host.h"
// The program's own main, kept under its name: only main returns 0 when it falls off its end.
int main(int, char**);
extern "C" __attribute__((visibility("default"))) int andrea_host_run(void* launch, void* alloc, void* release,
                                                                      int argc, char** argv) {
    setvbuf(stdout, nullptr, _IONBF, 0);
    andrea_host::launch_callback = reinterpret_cast<andrea_host::launch_fn>(launch);
    andrea_host::alloc_callback = reinterpret_cast<void* (*)(size_t)>(alloc);
    andrea_host::free_callback = reinterpret_cast<void (*)(void*)>(release);
    return main(argc, argv);
}
"""


@dataclass(frozen=True)
class HostSource:
    """One translation unit of the program: cuda=True for a .cu file (its host half is compiled)."""

    path: pathlib.Path
    cuda: bool = False
    fixes: tuple[tuple[str, str], ...] = ()  # (text, replacement): host code nvcc rejects too, made C++


@dataclass
class Result:
    rc: int  # the program's exit status; -signal if a signal ended it; None if it ran past its limit
    output: str
    launch_error: str | None  # the first error andrea raised in a launch
    seconds: float


class HostBuildError(RuntimeError):
    pass


def build_host(sources: list[HostSource], include_dirs: list[pathlib.Path], defines: list[str],
               work: pathlib.Path, prelude: str = "") -> pathlib.Path:
    """The program's host half as a shared library (cached in work/ by the sources' text).
    prelude: declarations put in front of every source (a fix a suite's host code needs)."""
    key = hashlib.sha256((HERE / "andrea_host.h").read_bytes() + prelude.encode())
    texts = []
    for s in sources:
        text = s.path.read_text(errors="replace")
        if s.cuda:
            text = host_half(text)
        for old, new in s.fixes:
            if old not in text:
                raise HostBuildError(f"{s.path.name}: the host fix for {old!r} no longer applies")
            text = text.replace(old, new)
        texts.append(text)
        key.update(text.encode())
    extra = os.environ.get("ANDREA_HOST_CXXFLAGS", "")  # e.g. -fsanitize=address, to debug a suite's host code
    key.update(" ".join(defines + [str(d) for d in include_dirs] + ["-O1 -g", extra]).encode())
    lib = work / f"host-{key.hexdigest()[:16]}.so"
    if lib.exists():
        return lib
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        files = []
        for i, (s, text) in enumerate(zip(sources, texts)):
            f = pathlib.Path(tmp) / f"{i}_{s.path.stem}.cpp"
            f.write_text(f'#line 1 "{s.path}"\n' + text)
            files.append(f)
        (pathlib.Path(tmp) / "prelude.h").write_text(prelude)
        glue = pathlib.Path(tmp) / "glue.cpp"
        glue.write_text(_GLUE)
        files.append(glue)
        flags = ["-std=c++17", "-O1", "-g", "-fPIC", "-shared", "-w", "-fpermissive",
                 "-include", str(HERE / "andrea_host.h"), "-I", str(HERE),
                 "-I", str(HERE / "host_include"),
                 "-include", str(pathlib.Path(tmp) / "prelude.h")]
        for s in sources:
            flags += ["-I", str(s.path.parent)]
        for d in include_dirs:
            flags += ["-I", str(d)]
        flags += [f"-D{d}" for d in defines] + extra.split()
        proc = subprocess.run(["g++", *flags, "-o", str(lib) + ".tmp", *map(str, files), "-lm", "-lpthread"],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            first = next((ln for ln in proc.stderr.splitlines() if "error" in ln), proc.stderr.strip()[-300:])
            raise HostBuildError(f"the host half did not compile: {first}")
        os.replace(str(lib) + ".tmp", lib)
    return lib


class DeviceMemory:
    """cudaMalloc's arrays (andrea's guarded arrays, bytes) and the view a kernel parameter needs.
    cudaMalloc knows no type, so an out-of-bounds access is named by its byte offset."""

    def __init__(self):
        self.arrays: dict[int, np.ndarray] = {}
        self.starts: list[int] = []

    def alloc(self, nbytes: int) -> int:
        a = guarded_empty(max(int(nbytes), 1), np.uint8)
        a[...] = 0
        start = a.ctypes.data
        self.arrays[start] = a
        bisect.insort(self.starts, start)
        return start

    def free(self, address: int) -> None:
        if address in self.arrays:
            del self.arrays[address]
            self.starts.remove(address)

    def view(self, address: int | None, pointee: str | None):
        """The array a pointer argument points into, as the parameter's element type."""
        if not address:
            return None
        i = bisect.bisect_right(self.starts, address) - 1
        if i < 0 or address >= self.starts[i] + self.arrays[self.starts[i]].nbytes:
            raise ValueError(f"a pointer argument ({address:#x}) is not device memory (cudaMalloc)")
        whole = self.arrays[self.starts[i]][address - self.starts[i]:]
        dtype = np.dtype(SCALARS[pointee]) if pointee in SCALARS else np.dtype(np.uint8)
        return whole[:whole.nbytes // dtype.itemsize * dtype.itemsize].view(dtype)


def _arguments(kernel, argv, nargs: int, memory: DeviceMemory) -> tuple:
    if nargs != len(kernel.signature):
        raise ValueError(f"{kernel.name}: the host passes {nargs} arguments, the kernel takes {len(kernel.signature)}")
    out = []
    for i, kind in enumerate(kernel.signature):
        if kind == "p8":
            out.append(memory.view(ctypes.c_void_p.from_address(argv[i]).value, kernel.pointee[i]))
        elif kind in SCALARS:
            out.append(np.frombuffer(ctypes.string_at(argv[i], np.dtype(SCALARS[kind]).itemsize),
                                     dtype=SCALARS[kind])[0])
        else:  # a struct by value: its bytes
            size = int(kind[1:])
            out.append(np.frombuffer(ctypes.string_at(argv[i], size), dtype=f"V{size}")[0])
    return tuple(out)


def run_program(kernels, library: pathlib.Path, argv: list[str], *, cwd: pathlib.Path | None = None,
                limit_s: float = 600.0) -> Result:
    """Run the program's main in a forked child; kernels: the RawModule its launches go to."""
    out_fd, out_path = tempfile.mkstemp(prefix="andrea-suite-", suffix=".log")
    err_r, err_w = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: run main, report the first launch error on the pipe
        os.close(err_r)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        if cwd:
            os.chdir(cwd)
        rc = _child(kernels, library, argv, err_w)
        os._exit(rc & 0xFF)
    os.close(err_w)
    rc = None
    chunks = []
    while True:
        ready, _, _ = select.select([err_r], [], [], 0.5)
        if ready:
            data = os.read(err_r, 4096)
            if data:
                chunks.append(data)
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            rc = os.waitstatus_to_exitcode(status)
            break
        if time.monotonic() - start > limit_s:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            break
    while True:
        data = os.read(err_r, 4096)
        if not data:
            break
        chunks.append(data)
    os.close(err_r)
    os.close(out_fd)
    output = pathlib.Path(out_path).read_text(errors="replace")
    os.unlink(out_path)
    error = b"".join(chunks).decode(errors="replace").strip() or None
    return Result(rc, output, error, time.monotonic() - start)


def _child(kernels, library: pathlib.Path, argv: list[str], err_w: int) -> int:
    memory = DeviceMemory()
    reported = []

    def launch(name, grid, block, shared, args, nargs):
        try:
            kernel = kernels.get_function(name.decode())
            kernel(tuple(grid[:3]), tuple(block[:3]), _arguments(kernel, args, nargs, memory), shared_mem=int(shared))
            return 0
        except BaseException as exc:  # noqa: BLE001 - nothing may unwind through C; the first is reported
            if not reported:
                reported.append(f"{type(exc).__name__}: {exc}")
                os.write(err_w, reported[0].encode()[:4000])
            return 1

    callbacks = (_LAUNCH_FN(launch), _ALLOC_FN(memory.alloc), _FREE_FN(memory.free))
    lib = ctypes.CDLL(str(library))
    args = [b"program", *(a.encode() for a in argv)]
    c_argv = (ctypes.c_char_p * (len(args) + 1))(*args, None)
    lib.andrea_host_run.restype = ctypes.c_int
    lib.andrea_host_run.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int, ctypes.c_void_p]
    rc = lib.andrea_host_run(*(ctypes.cast(c, ctypes.c_void_p) for c in callbacks), len(args), c_argv)
    ctypes.CDLL(None).fflush(None)
    return rc
