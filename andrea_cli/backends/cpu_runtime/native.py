"""The compiled kernel file loaded into this process: the launch entry point, its result record
(LaunchInfo, the C struct of cuda_cpu_runtime.h) and the error each result stands for."""

from __future__ import annotations

import ctypes
import pathlib
import signal
import struct

import numpy as np

from andrea_cli.backends.cpu_runtime.errors import (CpuAssertError, CpuCompileError, CpuCrashError,
                                                    CpuDeadlockError, CpuFaultError, CpuLaunchError,
                                                    CpuRuntimeError, CpuTimeoutError, CpuWarpError)
from andrea_cli.backends.cpu_runtime.guarded_memory import GuardedRegion

# The results of a launch that this module and worker.py tell apart, by the names
# cpu_runtime/fibers.h gives them (ANDREA_RESULTS); the library says their numbers (results()).
RESULTS = ("OK", "DEADLOCK", "BAD_LAUNCH", "FAULT", "WARP_MISUSE", "ASSERT", "TIMEOUT", "CRASHED")


class LaunchInfo(ctypes.Structure):
    _fields_ = [("block", ctypes.c_int * 3), ("waiting_barrier", ctypes.c_int),
                ("waiting_warp", ctypes.c_int), ("returned", ctypes.c_int),
                ("threads", ctypes.c_int), ("warp", ctypes.c_int), ("mask", ctypes.c_uint),
                ("lanes", ctypes.c_uint), ("message", ctypes.c_char * 512), ("thread", ctypes.c_int * 3),
                ("signal", ctypes.c_int), ("access", ctypes.c_int), ("running", ctypes.c_int),
                ("address", ctypes.c_ulonglong), ("limit_s", ctypes.c_double), ("block_start", ctypes.c_double)]


class LaunchOptions(ctypes.Structure):
    """The watchdog's budget for one block (CPU seconds): timeout_s if > 0, the most it may run;
    else it judges progress: endless once no thread reaches a barrier, a warp collective or its
    end for max(base_s, factor x the slowest block of the launch so far), or past ceiling x that
    in all; isolate: run in a forked child (a launch worker runs its launches in its own process:
    isolate 0 there); threads: the OS threads a launch's blocks are spread over."""

    _fields_ = [("timeout_s", ctypes.c_double), ("base_s", ctypes.c_double), ("factor", ctypes.c_double),
                ("ceiling", ctypes.c_double), ("isolate", ctypes.c_int), ("threads", ctypes.c_int)]


# Parameter kind (from the C++ signature) -> the numpy type a kernel argument must have.
SCALARS = {"i1": np.int8, "u1": np.uint8, "i2": np.int16, "u2": np.uint16, "i4": np.int32,
            "u4": np.uint32, "i8": np.int64, "u8": np.uint64, "f4": np.float32, "f8": np.float64,
            "b1": np.bool_}


def arg_bytes(args: tuple, signature: list[str]) -> list[bytes]:
    """Each argument's value as the kernel receives it: a pointer's address (None: NULL), a
    scalar's or a struct's bytes."""
    out = []
    for arg, kind in zip(args, signature):
        if kind == "p8":
            out.append(struct.pack("<Q", 0 if arg is None else arg.ctypes.data))
        else:
            out.append(np.asarray(arg, dtype=SCALARS.get(kind)).tobytes())  # a Python int -> int64 for "i8"
    return out


def results(lib: ctypes.CDLL) -> dict[int, str]:
    """The library's return codes, number -> name: andrea_results() says "OK=0 DEADLOCK=1 ..."."""
    lib.andrea_results.restype = ctypes.c_char_p
    pairs = (entry.split("=") for entry in lib.andrea_results().decode().split())
    return {int(code): name for name, code in pairs}


def _pack(args: tuple, signature: list[str]) -> tuple[ctypes.Array, list]:
    """cupy-style: one void* per parameter, pointing at the argument's value."""
    keep = [ctypes.create_string_buffer(raw, len(raw)) for raw in arg_bytes(args, signature)]
    argv = (ctypes.c_void_p * max(1, len(args)))()
    for i, value in enumerate(keep):
        argv[i] = ctypes.addressof(value)
    return argv, keep


class NativeLibrary:
    """The compiled kernel file loaded into this process."""

    def __init__(self, path: pathlib.Path):
        try:
            self.lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_LOCAL)
        except OSError as exc:  # the link checks every symbol; a foreign build may still miss one
            missing = str(exc).rsplit("undefined symbol: ", 1)
            what = f"{missing[1]} is not defined" if len(missing) == 2 else str(exc)
            raise CpuCompileError(f"loading the CPU build of {path.name} failed: {what}", str(exc)) from None
        if self.lib.andrea_info_size() != ctypes.sizeof(LaunchInfo):
            raise CpuRuntimeError(f"{path.name}: the runtime header and cpu_runtime/native.py disagree")
        if self.lib.andrea_options_size() != ctypes.sizeof(LaunchOptions):
            raise CpuRuntimeError(f"{path.name}: the runtime header and cpu_runtime/native.py disagree")
        self.results = results(self.lib)  # return code -> its name
        unknown = sorted(set(RESULTS) - set(self.results.values()))
        if unknown:
            raise CpuRuntimeError(f"{path.name}: the runtime header and cpu_runtime/native.py disagree: the "
                                  f"library has no result {', '.join(unknown)}")
        self.lib.andrea_launch.restype = ctypes.c_int
        self.lib.andrea_launch.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                           ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                           ctypes.POINTER(LaunchOptions), ctypes.POINTER(LaunchInfo)]

    def signature(self, name: str) -> str:
        fn = self.lib[f"{name}__sig"]
        fn.restype = ctypes.c_char_p
        return fn().decode()

    def launch(self, name: str, signature: list[str], grid, block, args, shared_mem: int,
               reverse: bool, options: LaunchOptions) -> tuple[str, LaunchInfo]:
        """The launch's result by name ("OK", "DEADLOCK", ...) and its report."""
        entry = ctypes.cast(self.lib[f"{name}__launch"], ctypes.c_void_p)
        argv, _keep = _pack(args, signature)
        info = LaunchInfo()
        rc = self.lib.andrea_launch(entry, argv, (ctypes.c_uint * 3)(*grid), (ctypes.c_uint * 3)(*block),
                                    shared_mem, int(reverse), ctypes.byref(options), ctypes.byref(info))
        return self.result(rc), info

    def result(self, rc: int) -> str:
        return self.results.get(rc, f"code {rc}")


def raise_for(kernel: str, result: str, info: LaunchInfo, arrays: dict[str, GuardedRegion] | None = None) -> None:
    """result: the launch's, by name (NativeLibrary.launch); arrays: the guarded mapping of each
    pointer argument, by parameter, to say which array a fault ran past."""
    if result == "OK":
        return
    message = info.message.decode(errors="replace")
    if result == "FAULT" and info.signal in (signal.SIGSEGV, signal.SIGBUS):
        for param, region in (arrays or {}).items():
            where = region.where(info.address)
            if where:
                verb = {1: "wrote", 0: "read"}.get(info.access, "touched")
                raise CpuFaultError(f"{kernel}: thread {tuple(info.thread)} of block {tuple(info.block)} {verb} "
                                    f"{param} at {where}: an out-of-bounds access")
    if result == "TIMEOUT":
        raise CpuTimeoutError(f"{kernel}: block {tuple(info.block)} {message} (--timeout SECONDS sets the limit)")
    if result == "CRASHED":
        if info.signal == signal.SIGINT:
            raise KeyboardInterrupt
        raise CpuCrashError(f"{kernel}: {message}; it was running block {tuple(info.block)}")
    if result == "DEADLOCK":
        block = tuple(info.block)
        raise CpuDeadlockError(f"{kernel} deadlocked in block {block}: {message}", kernel, block)
    if result == "WARP_MISUSE":
        block = tuple(info.block)
        raise CpuWarpError(f"{kernel}: block {block}: {message}", kernel, block, info.warp, info.mask, info.lanes)
    if result == "ASSERT":
        raise CpuAssertError(f"{kernel}: {message} in block {tuple(info.block)}")
    if result == "FAULT":
        raise CpuFaultError(f"{kernel}: {message} in block {tuple(info.block)}")
    if result == "BAD_LAUNCH":
        raise CpuLaunchError(f"{kernel}: {message}")
    raise CpuRuntimeError(f"{kernel}: {message}")
