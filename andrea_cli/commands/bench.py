"""`andrea bench`: options -> the side that runs (gpu or cpu) -> the sweep's BenchResult."""

from __future__ import annotations

from typing import Callable

from andrea_cli.backends import check_timeout, make_backend, require_available
from andrea_cli.backends.launch.catalogue import resolve_kernel_path
from andrea_cli.bench import cpu as bench_cpu
from andrea_cli.bench import gpu as bench_gpu
from andrea_cli.bench.sweep import CAUSAL, CPU_T, D_KS, GPU_T, NO_MASK, BenchResult, check_options
from andrea_cli.commands.options import BenchOptions
from andrea_cli.errors import AndreaError

SIDES = ("auto", "gpu", "cpu")
MASKS = {"both": (NO_MASK, CAUSAL), "causal": (CAUSAL,), "none": (NO_MASK,)}  # --mask -> the masks swept


def run_bench(o: BenchOptions, progress: Callable[[str], None]) -> BenchResult:
    """Check the options, pick the side (gpu when asked, or auto and a GPU answers), run its sweep."""
    if o.side not in SIDES or o.mask not in MASKS:
        raise AndreaError("--side takes auto, gpu or cpu; --mask takes causal, none or both")
    check_options(o.T, o.d_k, o.heads, o.repeats, o.warmup)
    if o.blas_threads < 1:
        raise AndreaError(f"--blas-threads must be >= 1 (got {o.blas_threads})")
    check_timeout(o.timeout)
    path = resolve_kernel_path(o.kernel)
    cuda = make_backend("cuda", path)
    if o.side == "gpu":
        require_available(cuda, "--side gpu")
    gpu = cuda.available()
    on_gpu = o.side == "gpu" or (o.side == "auto" and gpu.ok)
    common = dict(Ts=tuple(o.T or (GPU_T if on_gpu else CPU_T)), d_ks=tuple(o.d_k or D_KS),
                  masks=MASKS[o.mask], warmup=o.warmup, repeats=o.repeats, progress=progress)
    if on_gpu:
        return bench_gpu.bench_gpu(path, H=o.heads or 12, only=o.impl, **common)
    result = bench_cpu.bench_cpu(path, H=o.heads or 1, with_cpu_build=not o.no_cpu_build, timeout=o.timeout,
                                 blas_threads=o.blas_threads, only=o.impl, **common)
    if o.side == "auto":
        result.notes.insert(0, f"CPU side only: {gpu.reason}; the GPU figures need a GPU run")
    return result
