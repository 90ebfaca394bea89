"""andrea: the attention equation of a decoder-only transformer, made tangible on real kernels.

From Python: `andrea_cli.attend(q, k, v)`, `andrea_cli.grad(q, k, v, d_out)`, `andrea_cli.verify()`,
`andrea_cli.compare_scaling()`, `andrea_cli.bench_bound()` (see andrea_cli/api.py); `andrea_cli.RawModule` / `RawKernel`: cupy's
shape for a kernel of your own on the CPU build. They are loaded on first use, so `import andrea_cli` (and the CLI's
start) stays light: no cupy, no matplotlib."""

import importlib
import sys
import types

__version__ = "0.1.0"

_API = ("attend", "grad", "verify", "compare_scaling", "bench_bound", "AttendResult", "GradResult", "VerifyResult",
        "ScalingResult", "BoundResult")
_CPU_BUILD = ("RawModule", "RawKernel")


class _Package(types.ModuleType):
    """The API's names win over the submodules of the same name: importing the core module
    andrea_cli/verify.py sets the package attribute `verify` to that module, which would hide
    the function `andrea_cli.verify()` (code imports the module as `andrea_cli.verify.X`, never
    through the attribute)."""

    def __getattribute__(self, name: str):
        if name in _API:  # loaded on first use; no module of the package imports the API
            return getattr(importlib.import_module("andrea_cli.api"), name)
        if name in _CPU_BUILD:
            return getattr(importlib.import_module("andrea_cli.backends.cpu_runtime.raw_module"), name)
        if name == "AndreaError":
            return importlib.import_module("andrea_cli.errors").AndreaError
        return super().__getattribute__(name)

    def __dir__(self):
        return sorted({*super().__dir__(), *_API, *_CPU_BUILD, "AndreaError"})


sys.modules[__name__].__class__ = _Package
