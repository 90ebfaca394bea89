"""Every way a run of the kernel file on the CPU can fail: one AndreaError subclass each."""

from __future__ import annotations

from andrea_cli.errors import AndreaError, KernelError, SetupError


class CpuRuntimeError(AndreaError):
    """Running the kernel file on the CPU failed."""


class CpuSetupError(CpuRuntimeError, SetupError):
    """This environment cannot run the CPU build as asked: a sanitizer runtime missing, or a
    sanitized or racecheck worker process that cannot start (exit 1, with the fix)."""


class CompilerNotFoundError(CpuSetupError):
    """No C++ compiler to build the kernel file for the CPU."""


class CpuCompileError(CpuRuntimeError):
    """The kernel file did not compile; `log` holds the compiler's whole output."""

    def __init__(self, message: str, log: str):
        super().__init__(message)
        self.log = log


class CpuDeadlockError(CpuRuntimeError, KernelError):
    """No thread of a block can go on: a barrier some threads never reach."""

    def __init__(self, message: str, kernel: str, block: tuple[int, int, int]):
        super().__init__(message)
        self.kernel, self.block = kernel, block


class CpuWarpError(CpuRuntimeError, KernelError):
    """A warp sync or shuffle a GPU leaves undefined: its mask names a lane that has returned or
    does not exist, or it reads such a lane. `lanes` is the bit mask of the lanes at fault."""

    def __init__(self, message: str, kernel: str, block: tuple[int, int, int], warp: int, mask: int,
                 lanes: int):
        super().__init__(message)
        self.kernel, self.block, self.warp, self.mask, self.lanes = kernel, block, warp, mask, lanes


class CpuAssertError(CpuRuntimeError, KernelError):
    """A device-side assert failed or a thread called __trap() (CUDA: cudaErrorAssert, or an
    illegal instruction): the message names the file, line and thread."""


class CpuLaunchError(CpuRuntimeError):
    """Launch geometry or shared memory a GPU would refuse."""


class CpuFaultError(CpuRuntimeError, KernelError):
    """A kernel thread touched memory outside every array, overflowed its stack, aborted or
    trapped (CUDA: an illegal address, a device-side assert)."""


class CpuTimeoutError(CpuRuntimeError, KernelError):
    """A block ran past the watchdog's limit: an endless loop, most likely."""


class CpuCrashError(CpuRuntimeError, KernelError):
    """The process that ran the launch died (the kernel corrupted memory outside its arrays)."""


class CpuArgumentError(CpuRuntimeError):
    """A kernel argument whose type does not match the kernel's C++ parameter."""


class CpuSanitizerError(CpuRuntimeError, KernelError):
    """AddressSanitizer or UndefinedBehaviorSanitizer reported an error; `report` holds it all."""

    def __init__(self, message: str, report: str):
        super().__init__(message)
        self.report = report


class CpuRaceError(CpuRuntimeError, KernelError):
    """racecheck found data races a GPU could expose: `hazards` holds one line each (kind, memory,
    both threads, both lines of the kernel file, the rule), `report` ThreadSanitizer's own words."""

    def __init__(self, message: str, kernel: str, hazards: list[str], report: str):
        super().__init__(message)
        self.kernel, self.hazards, self.report = kernel, hazards, report
