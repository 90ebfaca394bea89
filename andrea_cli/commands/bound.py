"""`andrea bench --bound`: the options checked, then the static bound of every kernel in the
kernel file (or the user's copy) for one GPU's documented rates. No GPU needed."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from andrea_cli.backends.launch.catalogue import resolve_kernel_path
from andrea_cli.bench.bound.geometry import REFERENCE_HEADS, REFERENCE_T
from andrea_cli.bench.bound.gpus import GPUS, gpu_spec
from andrea_cli.bench.bound.report import BoundReport, compute_bounds
from andrea_cli.commands.options import BOUND_TAKES, BenchOptions, given_flags
from andrea_cli.errors import AndreaError

DEFAULT_GPU = "h200"


def check_bound_options(o: BenchOptions) -> None:
    """--gpu belongs to --bound; --bound reads a fixed reference shape, so the sweep's options
    would be ignored: refuse them by name (every option but BOUND_TAKES)."""
    if o.gpu is not None and not o.bound:
        raise AndreaError(f"--gpu {o.gpu} picks the GPU whose documented rates --bound uses: add --bound "
                          "(a real GPU is timed with --side gpu)")
    if o.bound:
        given = given_flags(o, leaving_out=BOUND_TAKES)
        if given:
            raise AndreaError(f"--bound reads each kernel at a fixed reference shape (T {REFERENCE_T}, "
                              f"{REFERENCE_HEADS} heads, d 64/128, with and without the causal mask): "
                              f"drop {', '.join(given)}")
        gpu_spec(o.gpu or DEFAULT_GPU)  # a one-line error for an unknown GPU before compiling anything


def run_bound(gpu: str | None = None, kernel: Path | None = None,
              progress: Callable[[str], None] | None = None) -> BoundReport:
    return compute_bounds(resolve_kernel_path(kernel), gpu or DEFAULT_GPU, progress=progress)


GPU_CHOICES = ", ".join(GPUS)
