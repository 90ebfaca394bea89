"""cupy.RawModule's shape on the CPU build: swap `cupy.RawModule` for this to run a kernel file
without a GPU, on NumPy arrays, with CUDA's rules checked (warp syncs, barriers, memory).

    mod = RawModule(code=source, name_expressions=("reduce<float, 256>",))
    mod.get_function("reduce<float, 256>")((blocks,), (256,), (x, out, np.int32(n)), shared_mem=1024)

Beyond cupy: `schedule="reverse"` runs each block's threads last to first (a missing barrier
shows), `sanitize=True` builds with AddressSanitizer and UndefinedBehaviorSanitizer,
`racecheck=True` with ThreadSanitizer: a data race a GPU could expose is a CpuRaceError.
"""

from __future__ import annotations

import hashlib
import os
import pathlib

from andrea_cli.backends.cpu_runtime.build import cache_dir
from andrea_cli.backends.cpu_runtime.errors import CpuRuntimeError
from andrea_cli.backends.cpu_runtime.module import SCHEDULES, CpuKernel, CpuModule

# NVRTC/nvcc options about code generation for a GPU: meaningless on the CPU, accepted and ignored
# (alone, or with "=value" or a glued value for the prefixes).
_IGNORED = ("-use_fast_math", "--use_fast_math", "-lineinfo", "--generate-line-info", "-G", "--device-debug",
            "--extra-device-vectorization", "-default-device", "--restrict", "-dw", "--disable-warnings", "-w",
            "--device-as-default-execution-space")
_IGNORED_PREFIXES = ("-std", "--std", "-arch", "--gpu-architecture", "-rdc", "--relocatable-device-code", "--fmad",
                     "-fmad", "-ftz", "--ftz", "-prec-div", "--prec-div", "-prec-sqrt", "--prec-sqrt",
                     "-maxrregcount", "--maxrregcount", "-dopt", "--dopt", "-Xptxas", "--ptxas-options")


def compiler_options(options) -> tuple[str, ...]:
    """cupy's options -> the g++ flags they mean here: -D, -U and -I pass on, code-generation
    options are ignored, anything else is an error (better than a silently different build)."""
    out: list[str] = []
    items = [options] if isinstance(options, str) else list(options)
    i = 0
    while i < len(items):
        opt = str(items[i])
        for long, short in (("--define-macro=", "-D"), ("--undefine-macro=", "-U"), ("--include-path=", "-I")):
            if opt.startswith(long):
                opt = short + opt[len(long):]
        if opt in ("-D", "-U", "-I") and i + 1 < len(items):
            out += [opt + str(items[i + 1])]
            i += 2
            continue
        if opt[:2] in ("-D", "-U", "-I") and len(opt) > 2:
            out.append(opt)
        elif opt not in _IGNORED and not opt.startswith(_IGNORED_PREFIXES):
            raise CpuRuntimeError(f"option {opt!r} is not understood by the CPU build: it passes -D, -U and -I on "
                                  "and ignores NVRTC's code-generation options (-std, -arch, --use_fast_math, ...)")
        i += 1
    return tuple(out)


def _source_file(code: str) -> pathlib.Path:
    """code= is written once into the cache under its hash, so the build and its errors name a file."""
    path = cache_dir() / "sources" / f"rawmodule-{hashlib.sha256(code.encode()).hexdigest()[:16]}.cu"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(code)
        os.replace(tmp, path)
    return path


class RawModule:
    """A CUDA source (code= or path=) compiled for the CPU; get_function like cupy.RawModule."""

    def __init__(self, code: str | None = None, path: str | os.PathLike | None = None, options=(),
                 backend: str = "nvrtc", translate_cucomplex: bool = False, enable_cooperative_groups: bool = False,
                 name_expressions=None, jitify: bool = False, *, schedule: str = "forward", sanitize: bool = False,
                 threads: int | None = None, racecheck: bool = False):
        """threads: the OS threads a launch's blocks are spread over (None: every core; the
        sanitized and racecheck builds run on one)."""
        if (code is None) == (path is None):
            raise CpuRuntimeError("RawModule needs exactly one of code= (the source) or path= (a .cu file)")
        if schedule not in SCHEDULES:
            raise CpuRuntimeError(f"schedule={schedule!r}: use one of {', '.join(SCHEDULES)}")
        if backend not in ("nvrtc", "nvcc") or jitify or translate_cucomplex:
            raise CpuRuntimeError("the CPU build supports backend='nvrtc' or 'nvcc', without jitify or "
                                  "translate_cucomplex")
        if path is not None and not pathlib.Path(path).is_file():
            raise CpuRuntimeError(f"RawModule(path={str(path)!r}): no such file")
        source = pathlib.Path(path) if path is not None else _source_file(code)
        self.code, self.path = code, str(path) if path is not None else None
        self.name_expressions = tuple(name_expressions or ())
        # enable_cooperative_groups: cooperative groups always work; a grid-wide sync is refused at
        # run time (blocks are never all resident at once here).
        self._module = CpuModule(source, schedule=schedule, sanitize=sanitize, racecheck=racecheck,
                                 name_expressions=self.name_expressions, extra_flags=compiler_options(options),
                                 threads=threads)

    @property
    def kernel_names(self) -> list[str]:
        return self._module.kernel_names

    def get_function(self, name: str) -> CpuKernel:
        return self._module.get_function(name)


class RawKernel:
    """cupy.RawKernel's shape: one kernel of a source, called as kernel(grid, block, args, shared_mem=...)."""

    def __init__(self, code: str, name: str, options=(), backend: str = "nvrtc", translate_cucomplex: bool = False,
                 enable_cooperative_groups: bool = False, jitify: bool = False, *, schedule: str = "forward",
                 sanitize: bool = False, racecheck: bool = False):
        self.code, self.name = code, name
        self._kernel = RawModule(code=code, options=options, backend=backend, schedule=schedule, sanitize=sanitize,
                                 racecheck=racecheck,
                                 translate_cucomplex=translate_cucomplex, jitify=jitify).get_function(name)

    def __call__(self, grid, block, args, shared_mem: int = 0) -> None:
        self._kernel(grid, block, args, shared_mem=shared_mem)
