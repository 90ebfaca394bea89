"""andrea: the attention equation of a decoder-only transformer, made tangible on real kernels.

From Python: `andrea_cli.attend(q, k, v)`, `andrea_cli.scaled_dot_product_attention(query, key, value)`
(torch's SDPA), `andrea_cli.grad(q, k, v, d_out)`, `andrea_cli.generate()`, `andrea_cli.verify()`,
`andrea_cli.compare_scaling()`, `andrea_cli.benchmark()` (`andrea bench`), `andrea_cli.bench_bound()`, `andrea_cli.info()` (see andrea_cli/api.py); `andrea_cli.RawModule` / `RawKernel`: cupy's
shape for a kernel of your own on the CPU build. They are loaded on first use, so `import andrea_cli` (and the CLI's
start) stays light: no cupy, no matplotlib. (`andrea verify`'s sweep is the package
andrea_cli.verification and `andrea bench` is benchmark(), so no submodule shares a name with the API's functions.)"""

import importlib

__version__ = "0.1.0"

_API = ("attend", "scaled_dot_product_attention", "grad", "generate", "verify", "compare_scaling", "benchmark",
        "bench_bound", "info", "AttendResult", "GradResult", "GenerateResult", "VerifyResult", "ScalingResult", "BenchResult", "BoundResult", "InfoResult")
_CPU_BUILD = ("RawModule", "RawKernel")


def __getattr__(name: str):
    """Called only for a name the package does not hold yet (PEP 562): the API on first use."""
    if name in _API:  # no module of the package imports the API
        return getattr(importlib.import_module("andrea_cli.api"), name)
    if name in _CPU_BUILD:
        return getattr(importlib.import_module("andrea_cli.backends.cpu_runtime.raw_module"), name)
    if name == "AndreaError":
        return importlib.import_module("andrea_cli.errors").AndreaError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_API, *_CPU_BUILD, "AndreaError"})
