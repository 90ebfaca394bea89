"""Run the unmodified kernel file on the CPU, with cupy's RawModule call shape.

    mod = CpuModule(pathlib.Path("cuda/microgpt_cuda.cu"))
    mod.get_function("scale_kernel1")((4,), (256,), (x, y, np.int64(n), np.int32(64), np.float32(0)))
"""

from __future__ import annotations

import os
import pathlib
import re

import numpy as np

from andrea_cli.backends.cpu_runtime.build import MAX_DYNAMIC_SHARED, build, normalize_expression, scan
from andrea_cli.backends.cpu_runtime.errors import (CpuArgumentError, CpuDeadlockError, CpuFaultError, CpuLaunchError,
                                                CpuRuntimeError, CpuWarpError)
from andrea_cli.backends.cpu_runtime.guarded_memory import guarded_copy, region_of
from andrea_cli.backends.cpu_runtime.native import (SCALARS, LaunchInfo, LaunchOptions, NativeLibrary, arg_bytes,
                                                    raise_for)
from andrea_cli.backends.cpu_runtime.worker import LaunchWorker, WorkerUnavailable
from andrea_cli.backends.cpu_runtime.pointers import lost_pointer
from andrea_cli.backends.cpu_runtime.shared_names import name_shared

SCHEDULES = {"forward": 0, "reverse": 1}
# Where a launch of the plain build runs: a long-lived launch worker (the default), a child
# forked per launch (the former way, for comparison), or this process (no isolation: a wrong
# kernel can end it). ANDREA_CPU_ISOLATION chooses; scripts/bench_cpu_runtime.py compares them.
ISOLATION_MODES = ("worker", "fork", "none")
MAX_THREADS = 1024
# The watchdog's default budget for one block, in CPU seconds: max(BASE + per MiB of the launch's
# arrays, FACTOR x the slowest block of the launch so far) without progress (no thread reaching a
# barrier, a warp collective or its end), or CEILING x that in all. Measured: a block of the fused
# kernel at d = 128 takes about 26 us x T (53 ms at T = 2048), and its arrays add 98 us x T to the
# budget; staged blocks take milliseconds at any T. racecheck's first block on fresh fibers
# (softmax_kernel1, 1024 threads) took 0.5 to 1 s of CPU on an idle machine and past 2 s on a busy
# one: it reaches a barrier every few milliseconds, so only the ceiling bounds it. An endless loop
# never ends: one without barriers is named after BASE, one of barriers after CEILING x BASE.
WATCHDOG_BASE_S = 2.0
WATCHDOG_S_PER_MIB = 0.05
WATCHDOG_FACTOR = 20.0
WATCHDOG_CEILING = 15.0


class CpuKernel:
    """One `__global__` function of a CpuModule; call it like cupy's RawKernel."""

    def __init__(self, module: "CpuModule", name: str, symbol: str, sig: str, params: list[str]):
        self.module, self.name, self.symbol = module, name, symbol  # symbol: the library's export
        kinds = sig.split()
        self.signature = [k.split(":")[0] for k in kinds]  # e.g. ["p8", "p8", "i4", "f4"]
        pointee = [k.split(":")[1] if ":" in k else "" for k in kinds]  # "cf4" for const float*
        self.writes = [not p.startswith("c") for p in pointee]
        self.pointee = [p.lstrip("c") or None for p in pointee]  # "f4", "v", None
        self.params = params if len(params) == len(kinds) else [""] * len(kinds)

    def __call__(self, grid: tuple, block: tuple, args: tuple, shared_mem: int = 0) -> None:
        grid3, block3 = _dims(self.name, "grid", grid), _dims(self.name, "block", block)
        if block3[0] * block3[1] * block3[2] > MAX_THREADS:
            raise CpuLaunchError(f"{self.name}: block {tuple(block)} has more than {MAX_THREADS} threads")
        if not 0 <= int(shared_mem) <= MAX_DYNAMIC_SHARED:
            raise CpuLaunchError(f"{self.name}: shared_mem={shared_mem} bytes is outside 0..{MAX_DYNAMIC_SHARED}")
        self._check(args)
        self.module._launch(self, grid3, block3, tuple(args), int(shared_mem))

    def _check(self, args: tuple) -> None:
        if len(args) != len(self.signature):
            raise CpuArgumentError(f"{self.name} takes {len(self.signature)} arguments, got {len(args)}")
        for i, (arg, kind, pointee) in enumerate(zip(args, self.signature, self.pointee)):
            where = f"{self.name}: argument {i} ({self.params[i] or kind})"
            if kind == "p8":
                if arg is not None:  # None is a NULL pointer, as with cupy
                    _check_array(where, arg, pointee, self.writes[i])
            elif (kind, type(arg)) in (("i8", int), ("f8", float)):
                continue  # what cupy passes for a Python int or float: right for long and double
            elif kind in SCALARS:
                want = SCALARS[kind]
                if type(arg) is not want:
                    hint = " (cupy passes Python ints as int64 and floats as float64)" \
                        if isinstance(arg, (int, float)) else ""
                    raise CpuArgumentError(f"{where} needs {want.__name__}, got {_describe(arg)}{hint}: "
                                           f"pass {want.__name__}(...)")
            else:
                nbytes = int(kind[1:])  # "s16": a struct such as float4 passed by value
                if not (isinstance(arg, np.generic) and arg.nbytes == nbytes):
                    raise CpuArgumentError(f"{where} is a {nbytes}-byte struct, got {_describe(arg)}")
        lost = lost_pointer(self.name, tuple(args), self.pointee, self.params,
                            copies_every_array=self.module.sanitize or self.module.racecheck,
                            build_flag="racecheck=True" if self.module.racecheck else "sanitize=True")
        if lost:
            raise CpuArgumentError(lost)


def _check_array(where: str, arg, pointee: str | None, writes: bool) -> None:
    if not isinstance(arg, np.ndarray):
        raise CpuArgumentError(f"{where} is a pointer and needs a numpy array (or None), got {_describe(arg)}")
    if not arg.flags.c_contiguous:
        raise CpuArgumentError(f"{where} needs a C-contiguous array, got a strided view: "
                               "pass np.ascontiguousarray(...)")
    if writes and not arg.flags.writeable:
        raise CpuArgumentError(f"{where} may be written by the kernel, got a read-only array: pass a copy")
    want = SCALARS.get(pointee or "")
    if want is not None and arg.dtype != np.dtype(want):
        raise CpuArgumentError(f"{where} points to {np.dtype(want).name}, got an array of {arg.dtype}")
    # A struct (or pointer) element: a dtype of its size passes as its bytes (a structured dtype
    # for a struct, complex64 for float2, float16 for __half), and so does a plain array of its
    # parts (float32 for float4, bytes) that holds whole elements.
    size = int(pointee[1:]) if pointee and pointee[0] in "sp" else None
    parts = not arg.dtype.fields and size is not None and size % arg.dtype.itemsize == 0 and arg.nbytes % size == 0
    if size is not None and arg.dtype.itemsize != size and not parts:
        raise CpuArgumentError(f"{where} points to {size}-byte elements, got an array of "
                               f"{arg.dtype.itemsize}-byte elements ({arg.dtype}): pass a dtype of the "
                               f"struct's size (a NumPy structured dtype with its fields)")


def _describe(arg) -> str:
    if isinstance(arg, np.ndarray):
        return f"an array of {arg.dtype}"
    kind = type(arg)
    return f"{'numpy' if kind.__module__ == 'numpy' else 'Python'} {kind.__name__}"


def _dims(kernel: str, what: str, dims) -> tuple[int, int, int]:
    dims = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, (int, np.integer)) for d in dims):
        raise CpuLaunchError(f"{kernel}: {what} must be 1 to 3 ints, got {dims!r}")
    if any(d < 1 for d in dims):
        raise CpuLaunchError(f"{kernel}: every {what} dimension must be >= 1, got {dims!r}")
    full = tuple(int(d) for d in dims) + (1,) * (3 - len(dims))
    if what == "grid" and (full[0] >= 2**31 or full[1] > 65535 or full[2] > 65535):
        raise CpuLaunchError(f"{kernel}: grid {dims!r} is larger than a GPU allows")
    if what == "block" and (full[0] > 1024 or full[1] > 1024 or full[2] > 64):
        raise CpuLaunchError(f"{kernel}: block {dims!r} is larger than a GPU allows")
    return full


class CpuModule:
    """A kernel file compiled for the CPU (cached); `get_function` like cupy.RawModule."""

    def __init__(self, source_path: pathlib.Path, *, schedule: str = "forward", sanitize: bool = False,
                 name_expressions: tuple[str, ...] = (), extra_flags: tuple[str, ...] = (),
                 timeout: float | None = None, threads: int | None = None, racecheck: bool = False):
        """timeout: the most CPU seconds one block of a launch may run (None: the default budget);
        threads: the OS threads a launch's blocks are spread over (None: every core this process
        may use; the sanitized and racecheck builds run on one);
        racecheck: the ThreadSanitizer build, every data race a GPU could expose an error."""
        if schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {sorted(SCHEDULES)}, got {schedule!r}")
        if sanitize and racecheck:
            raise CpuRuntimeError("sanitize and racecheck are two builds (AddressSanitizer and ThreadSanitizer "
                                  "cannot share a process): pass one of them")
        self.source_path, self.schedule, self.sanitize = pathlib.Path(source_path).resolve(), schedule, sanitize
        self.timeout, self.racecheck = timeout, racecheck
        if threads is not None and (not isinstance(threads, int) or isinstance(threads, bool) or threads < 1):
            raise CpuRuntimeError(f"threads={threads!r}: use a whole number of OS threads, at least 1")
        self.threads = 1 if sanitize or racecheck else threads or default_threads()
        # The plain build runs each launch in a launch worker (worker.py), on guarded shared arrays;
        # the sanitized and racecheck builds run in a worker process of their own already, on their
        # sanitizer's own allocations.
        self.isolation = "none" if sanitize or racecheck else isolation_mode()
        self.isolate = self.isolation != "none"
        include_dirs = tuple(pathlib.Path(f[2:]) for f in extra_flags if f.startswith("-I"))  # headers' kernels
        self._src = scan(self.source_path, tuple(name_expressions), include_dirs)
        self._exports = self._src.exports()  # kernel name or name expression -> library symbol
        self.kernel_names: list[str] = list(self._exports)
        self.library_path = build(self._src, sanitize=sanitize, racecheck=racecheck, extra_flags=tuple(extra_flags))
        if racecheck:
            from andrea_cli.backends.cpu_runtime.racecheck import RacecheckLibrary
            self._native = RacecheckLibrary(self.library_path, list(self._exports.values()))
        elif sanitize:
            from andrea_cli.backends.cpu_runtime.sanitize import SanitizedLibrary
            self._native = SanitizedLibrary(self.library_path, list(self._exports.values()))
        else:
            self._native = NativeLibrary(self.library_path)
        self._shared_symbols = None  # static __shared__ variables, read when an error names one
        self._worker = None
        if self.isolation == "worker":  # (the plain build: its NativeLibrary names the worker's return codes)
            self._worker = LaunchWorker(self.library_path, LaunchInfo, self._native.result)
        self._kernels: dict[str, CpuKernel] = {}

    def get_function(self, name: str) -> CpuKernel:
        """A kernel by name, or a template's instantiation by one of the module's name expressions."""
        key = name if name in self._exports else normalize_expression(name)
        if key not in self._kernels:
            if key not in self._exports:
                if key.split("<")[0] in self._src.templates:
                    raise CpuRuntimeError(f"{name!r} is an instantiation of the template kernel "
                                          f"{key.split('<')[0]!r}: list it in name_expressions=(...)")
                raise CpuRuntimeError(f"{self.source_path.name} has no __global__ kernel {name!r} "
                                      f"(it has: {', '.join(self.kernel_names) or 'none'})")
            symbol = self._exports[key]
            self._kernels[key] = CpuKernel(self, name, symbol, self._native.signature(symbol),
                                           self._src.parameters(key))
        return self._kernels[key]

    def _options(self, args: tuple, fork: bool) -> LaunchOptions:
        mib = sum(a.nbytes for a in args if isinstance(a, np.ndarray)) / 2**20
        return LaunchOptions(float(self.timeout or 0.0), WATCHDOG_BASE_S + WATCHDOG_S_PER_MIB * mib,
                             WATCHDOG_FACTOR, WATCHDOG_CEILING, int(fork), self.threads)

    def _isolated_launch(self, kernel: CpuKernel, grid, block, args, shared_mem: int, reverse: bool):
        """In the launch worker, or in a forked child where a worker cannot run."""
        if self._worker is not None:
            try:
                return self._worker.launch(kernel.symbol, arg_bytes(args, kernel.signature), grid, block,
                                           shared_mem, reverse, self._options(args, fork=False))
            except WorkerUnavailable:
                self._worker = None
                self.isolation = "fork"
        return self._native.launch(kernel.symbol, kernel.signature, grid, block, args, shared_mem, reverse,
                                   self._options(args, fork=True))

    def _raise_for(self, kernel: str, result: str, info, arrays=None) -> None:
        """raise_for, a barrier's place in static shared memory named by its variable."""
        try:
            raise_for(kernel, result, info, arrays)
        except (CpuDeadlockError, CpuWarpError) as err:
            if "shared+" in str(err):
                if self._shared_symbols is None:
                    from andrea_cli.backends.cpu_runtime.racecheck import static_shared_symbols  # readelf
                    self._shared_symbols = static_shared_symbols(self.library_path)
                err.args = (name_shared(str(err), self._shared_symbols),)
            raise

    def _launch(self, kernel: CpuKernel, grid, block, args, shared_mem: int) -> None:
        reverse = self.schedule == "reverse"
        if not self.isolate:
            result, info = self._native.launch(kernel.symbol, kernel.signature, grid, block, args, shared_mem,
                                               reverse, self._options(args, fork=False))
            if self.racecheck:  # races first: a launch that then failed (a wgmma's B changed in flight) is their effect
                self._native.raise_races(kernel.name, kernel.params, block)
            self._raise_for(kernel.name, result, info)
            return
        # Every array in its own guarded shared mapping: the caller's own when it is one already
        # (the backends allocate them so), else a copy, copied back if the kernel may write it.
        staged = tuple(a if not isinstance(a, np.ndarray) or region_of(a) else guarded_copy(a) for a in args)
        result, info = self._isolated_launch(kernel, grid, block, staged, shared_mem, reverse)
        arrays = {_param_name(kernel.params[i], i): region_of(a) for i, a in enumerate(staged)
                  if isinstance(a, np.ndarray)}
        self._raise_for(kernel.name, result, info, arrays)
        for param, region in arrays.items():
            hit = region.canary_hit()
            if hit is not None:
                raise CpuFaultError(f"{kernel.name}: a thread wrote {hit} bytes before the start of {param} "
                                    "(found after the launch): an out-of-bounds write")
        for original, copy, writes in zip(args, staged, kernel.writes):
            if copy is not original and writes:
                np.copyto(original, copy)


_threads_chosen: int | None = None  # --threads, for every module made after it is set


def use_threads(threads: int | None) -> None:
    """--threads N: every CpuModule made from now on spreads a launch's blocks over N OS threads
    (None: every core)."""
    global _threads_chosen
    if threads is not None and threads < 1:
        raise CpuRuntimeError(f"--threads {threads}: give a whole number of OS threads, at least 1 "
                              "(or leave it out for every core)")
    _threads_chosen = threads


def default_threads() -> int:
    """--threads if given, else every core this process may run on."""
    if _threads_chosen is not None:
        return _threads_chosen
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def isolation_mode() -> str:
    mode = os.environ.get("ANDREA_CPU_ISOLATION", "worker")
    if mode not in ISOLATION_MODES:
        raise CpuRuntimeError(f"ANDREA_CPU_ISOLATION={mode!r}: use one of {', '.join(ISOLATION_MODES)}")
    return mode


def _param_name(declaration: str, index: int) -> str:
    """`const float* __restrict__ q` -> "q (argument 0)"."""
    names = re.findall(r"[A-Za-z_]\w*", declaration)
    return f"{names[-1]} (argument {index})" if names else f"argument {index}"
