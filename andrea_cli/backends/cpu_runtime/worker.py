"""Isolated launches without a fork per launch: one long-lived worker process per kernel library.

The worker (cuda/cpu_runtime/worker.cpp, compiled once into the cache) loads the library once
and runs each launch this process sends it. Device arrays live in the arena of guarded_memory.py,
which the worker maps at the same addresses from the same memfd, so nothing is copied: a launch
is one message there and a return code back. A launch that crashes, traps, faults, overruns or
spins ends that worker only (it is stopped after any failed launch; the next launch starts a
fresh one) and is reported exactly as the forked child of cpu_runtime/isolation.h reported it.
The watchdog stays in the worker (the runtime's own, per block); this side kills a worker that
outlives it by more than GRACE_S CPU seconds, as the forked launch's parent did.

Starting a worker is an exec of a small program (subprocess uses vfork), a few milliseconds
however large this process is; a fork of this process per launch cost more system time than the
kernels (scripts/bench_cpu_runtime.py measures both)."""

from __future__ import annotations

import ctypes
import os
import select
import signal
import socket
import struct
import subprocess
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Callable

from andrea_cli.backends.cpu_runtime.build import build_worker
from andrea_cli.backends.cpu_runtime.guarded_memory import GuardedRegion, arena

GRACE_S = 5.0  # CPU seconds past a block's own budget before the worker is killed
_UNAVAILABLE = (3, 4)  # the worker's exit status: the arena's range is taken there, or the library did not load
_SIGNAL_NAMES = {signal.SIGSEGV: "SIGSEGV", signal.SIGBUS: "SIGBUS", signal.SIGFPE: "SIGFPE",
                 signal.SIGILL: "SIGILL", signal.SIGABRT: "SIGABRT", signal.SIGKILL: "SIGKILL",
                 signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM"}

_libc = ctypes.CDLL(None, use_errno=True)
_libc.clock_getcpuclockid.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int)]


class WorkerUnavailable(Exception):
    """The worker cannot run here (the arena's addresses are taken in a fresh process): the
    caller falls back to a forked child per launch."""


@dataclass
class _Running:
    proc: subprocess.Popen
    sock: socket.socket
    stderr_fd: int
    cpu_clock: int | None  # the worker's CPU-time clock, for the grace check
    finalizer: weakref.finalize
    mapped: dict[int, int]  # arena pages mapped in the worker: address -> length
    version: int = -1  # the arena version `mapped` follows
    stderr_seen: int = 0
    launches: int = 0


def _stop(proc: subprocess.Popen, sock: socket.socket, stderr_fd: int, kill: bool) -> None:
    sock.close()  # a worker reading its next message sees the end and exits
    if kill:
        proc.kill()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    os.close(stderr_fd)


def _stdout() -> list[int]:
    """This process's standard output, to hand to the worker (none if it is closed)."""
    try:
        os.fstat(1)
    except OSError:
        return []
    return [1]


def _last_line(text: str) -> str:
    text = text.rstrip("\n ")
    return text.rsplit("\n", 1)[-1]


class LaunchWorker:
    """The worker of one kernel library, started at its first launch and after each failed one."""

    def __init__(self, library: os.PathLike, info_type: type[ctypes.Structure], result: Callable[[int], str]):
        """result: a return code's name (the library's own: NativeLibrary.result)."""
        self.library = os.fspath(library)
        self.info_type = info_type
        self.result = result
        self.started = 0  # workers started so far (a benchmark and the tests read it)
        self._lock = threading.Lock()
        self._running: _Running | None = None
        self._info = GuardedRegion((ctypes.sizeof(info_type),), "u1")  # the report page, shared

    def launch(self, symbol: str, arg_bytes: list[bytes], grid, block, shared_mem: int, reverse: bool,
               options: ctypes.Structure) -> tuple[str, ctypes.Structure]:
        """The launch's result by name, as NativeLibrary.launch gives it, and its report."""
        with self._lock:
            run = self._running or self._start()
            ctypes.memset(self._info.start, 0, self._info.nbytes)
            message = self._sync(run) + self._launch_message(symbol, arg_bytes, grid, block, shared_mem, reverse,
                                                              options)
            try:
                try:
                    socket.send_fds(run.sock, [message], _stdout())
                except OSError:  # the worker is gone already (it could not start)
                    run.proc.wait()
                    rc = None
                else:
                    rc = self._wait(run, max(1, options.threads))
            except BaseException:  # Ctrl-C while waiting: the worker went with it (or goes now)
                self._end(kill=True)
                raise
            run.launches += 1
            info = self.info_type.from_buffer_copy(ctypes.string_at(self._info.start, self._info.nbytes))
            result = self._report(run, rc, info)
            if result != "OK":
                self._end(kill=True)  # whatever the kernel did there, the next launch starts clean
            return result, info

    def close(self) -> None:
        with self._lock:
            self._end(kill=False)

    def _start(self) -> _Running:
        a = arena()
        if not a.fixed:
            raise WorkerUnavailable("the device arrays are not at the arena's fixed address")
        exe = build_worker()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        stderr_fd = os.memfd_create("andrea-kernel-stderr", os.MFD_CLOEXEC)
        try:
            proc = subprocess.Popen([str(exe), self.library, str(theirs.fileno()), str(a.fd), hex(a.base),
                                     hex(a.size), str(os.getpid())],
                                    pass_fds=(theirs.fileno(), a.fd), stdin=subprocess.DEVNULL, stderr=stderr_fd,
                                    close_fds=True, restore_signals=True)
        except BaseException:
            ours.close()
            os.close(stderr_fd)
            raise
        finally:
            theirs.close()
        clock = ctypes.c_int()
        cpu_clock = clock.value if _libc.clock_getcpuclockid(proc.pid, ctypes.byref(clock)) == 0 else None
        self.started += 1
        finalizer = weakref.finalize(self, _stop, proc, ours, stderr_fd, False)
        self._running = _Running(proc, ours, stderr_fd, cpu_clock, finalizer, {})
        return self._running

    def _end(self, kill: bool) -> None:
        run, self._running = self._running, None
        if run is not None:
            run.finalizer.detach()
            _stop(run.proc, run.sock, run.stderr_fd, kill)

    def _sync(self, run: _Running) -> bytes:
        """The arena's changes since the worker's last launch: unmaps first, then maps."""
        a = arena()
        if a.version == run.version:
            return struct.pack("<I", 0)
        version, live = a.snapshot()
        ops = [(b"U", addr, length) for addr, length in run.mapped.items() if live.get(addr) != length]
        ops += [(b"M", addr, length) for addr, length in live.items() if run.mapped.get(addr) != length]
        run.mapped, run.version = live, version
        return struct.pack("<I", len(ops)) + b"".join(struct.pack("<cQQ", *op) for op in ops)

    def _launch_message(self, symbol: str, arg_bytes: list[bytes], grid, block, shared_mem: int, reverse: bool,
                        options: ctypes.Structure) -> bytes:
        name = symbol.encode()
        opts = bytes(options)
        head = struct.pack("<Q3I3IQiI", self._info.start, *grid, *block, shared_mem, int(reverse), len(opts))
        return b"".join([head, opts, struct.pack("<H", len(name)), name, struct.pack("<I", len(arg_bytes)),
                         *(struct.pack("<I", len(b)) + b for b in arg_bytes)])

    def _wait(self, run: _Running, threads: int) -> int | None:
        """The launch's return code, or None when the worker ended without one (then reaped).
        threads: the launch's OS threads, whose CPU time all counts on the worker's clock."""
        info = self.info_type.from_address(self._info.start)
        poller = select.poll()
        poller.register(run.sock, select.POLLIN)
        killed = False
        while True:
            if poller.poll(100):
                reply = run.sock.recv(4)
                if len(reply) == 4 and not killed:
                    return struct.unpack("<i", reply)[0]
                run.proc.wait()
                return -1 if killed else None
            start = info.block_start
            if (not killed and run.cpu_clock is not None and start > 0
                    and time.clock_gettime(run.cpu_clock) - start > info.limit_s * threads + GRACE_S):
                run.proc.kill()
                killed = True

    def _report(self, run: _Running, rc: int | None, info: ctypes.Structure) -> str:
        """The result as the forked launch gave it, info's message completed from the worker's stderr."""
        size = os.fstat(run.stderr_fd).st_size
        printed = os.pread(run.stderr_fd, size - run.stderr_seen, run.stderr_seen) if size > run.stderr_seen else b""
        run.stderr_seen = size
        text = printed.decode(errors="replace")
        if rc == -1:
            info.running = -1
            _set_message(info, f"ran past its {info.limit_s:.3g} s limit and did not stop at the watchdog: its "
                               "process was killed (an endless loop?)")
            return "TIMEOUT"
        if rc is None:
            status = run.proc.returncode
            if status in _UNAVAILABLE and run.launches == 1:
                raise WorkerUnavailable(_last_line(text))
            why = _last_line(text)
            if status < 0:
                info.signal = -status
                what = f"died of {_SIGNAL_NAMES.get(-status, 'a signal')}"
            else:
                info.signal = 0
                what = f"ended (exit status {status})"
            _set_message(info, f"the launch's process {what}{': ' if why else ''}{why} (a stray write that "
                               "corrupted memory outside the arrays?)")
            return "CRASHED"
        result = self.result(rc)
        if result == "FAULT" and info.signal == signal.SIGABRT:  # glibc's or assert's own words
            why = _last_line(text)
            if why:
                _set_message(info, f"{info.message.decode(errors='replace')}: {why}")
        elif printed:
            os.write(2, printed)
        return result


def _set_message(info: ctypes.Structure, text: str) -> None:
    size = type(info).message.size
    info.message = text.encode()[:size - 1]
