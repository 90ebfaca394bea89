"""`andrea bench --bound`: the options checked, then the static bound of every kernel in the
kernel file (or the user's copy) for one GPU's documented rates. No GPU needed."""

from __future__ import annotations

from pathlib import Path

from andrea_cli.bench.bound.geometry import REFERENCE_HEADS, REFERENCE_T
from andrea_cli.bench.bound.gpus import GPUS, gpu_spec
from andrea_cli.bench.bound.report import BoundReport, compute_bounds
from andrea_cli.errors import AndreaError
from andrea_cli.backends.launch.catalogue import resolve_kernel_path

DEFAULT_GPU = "h200"


def check_bound_options(bound: bool, gpu: str | None, others: dict[str, bool]) -> None:
    """--gpu belongs to --bound; --bound reads a fixed reference shape, so the sweep's options
    would be ignored: refuse them by name."""
    if gpu is not None and not bound:
        raise AndreaError(f"--gpu {gpu} picks the GPU whose documented rates --bound uses: add --bound "
                          "(a real GPU is timed with --side gpu)")
    if bound:
        given = [flag for flag, set_ in others.items() if set_]
        if given:
            raise AndreaError(f"--bound reads each kernel at a fixed reference shape (T {REFERENCE_T}, "
                              f"{REFERENCE_HEADS} heads, d 64/128, with and without the causal mask): "
                              f"drop {', '.join(given)}")
        gpu_spec(gpu or DEFAULT_GPU)  # a one-line error for an unknown GPU before compiling anything


def run_bound(gpu: str | None = None, kernel: Path | None = None) -> BoundReport:
    return compute_bounds(resolve_kernel_path(kernel), gpu or DEFAULT_GPU)


GPU_CHOICES = ", ".join(GPUS)
