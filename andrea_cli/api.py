"""andrea from Python: the commands as functions, with the command line's names and defaults.

    import andrea_cli
    r = andrea_cli.attend(q, k, v)             # NumPy (T, d) or (H, T, d); on cuda also cupy / DLPack
    r.output, r.weights, r.scores, r.report    # arrays, and the dict `andrea attend --json` prints
    g = andrea_cli.grad(q, k, v, d_out)        # g.dq, g.dk, g.dv: the backward pass, as `andrea grad`

Bad input raises AndreaError with the line the command prints. A result displays in Jupyter as
the terminal's tables. Nothing heavy (cupy, matplotlib) is imported until a function runs."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from andrea_cli.commands import options as flags
from andrea_cli.errors import AndreaError


@dataclass(repr=False)
class Result:
    """What every function returns: `report`, the dict the command's `--json` prints, and
    `raw`, the report object; shown as the terminal's tables in Jupyter or by rich.print."""

    report: dict
    raw: Any

    _renderer = "render_attend_result"

    def _draw(self, console) -> None:
        from andrea_cli.render import notebook

        getattr(notebook, self._renderer)(console, self.raw)

    def _repr_html_(self) -> str:
        from andrea_cli.render.notebook import as_html

        return as_html(self._draw)

    def __rich_console__(self, console, options):
        from andrea_cli.render.notebook import as_renderable

        yield as_renderable(self._draw, console, options.max_width)

    def __repr__(self) -> str:
        shown = ", ".join(f"{key}={self.report[key]!r}" for key in ("backend", "T", "d_k", "mask", "passed")
                          if key in self.report)
        return f"{type(self).__name__}({shown}, report={{...{len(self.report)} keys}})"


@dataclass(repr=False)
class AttendResult(Result):
    output: Any = None  # (T, d_v) or (H, T, d_v): NumPy, or a cupy array when the inputs were on the GPU
    weights: Any = None  # (T, T) or (H, T, T) softmax weights; None from the fused kernel
    scores: Any = None  # (T, T) or (H, T, T) raw Q·K^T; None from the fused kernel

    def plot(self, path) -> Path:
        """The weights, row entropy and largest weight per row as a PNG (the `plot` extra)."""
        from andrea_cli.render.attend_plot import save_attend_report_plot
        from andrea_cli.render.plot_common import check_plot_path

        if self.weights is None:
            raise AndreaError("--plot draws the T×T weights, which --fused never builds: drop one of them")
        if self.raw.weights.ndim != 2:
            raise AndreaError("plot() draws one head: run that head's (T, d) arrays")
        check_plot_path(Path(path))
        save_attend_report_plot(self.raw, Path(path))
        return Path(path)


@dataclass(repr=False)
class GradResult(Result):
    dq: Any = None  # (T, d_k)
    dk: Any = None  # (T, d_k)
    dv: Any = None  # (T, d_v)
    _renderer = "render_grad_result"


@dataclass(repr=False)
class VerifyResult(Result):
    passed: bool = False
    _renderer = "render_verify_result"


@dataclass(repr=False)
class ScalingResult(Result):
    _renderer = "render_scaling_result"

    def plot(self, path) -> Path:
        """Score histograms and first-rows heatmaps per d_k as a PNG (the `plot` extra)."""
        from andrea_cli.render.plot_common import check_plot_path
        from andrea_cli.render.scaling_plot import save_scaling_plot

        check_plot_path(Path(path))
        save_scaling_plot(self.raw, Path(path))
        return Path(path)


@dataclass(repr=False)
class BoundResult(Result):
    """`report` is the list `andrea bench --bound --json` prints, one dict per kernel; `raw` the
    BoundReport. A static bound, not a measurement."""

    def _draw(self, console) -> None:
        from andrea_cli.render.bound import render_bound

        render_bound(console, self.raw)

    def __repr__(self) -> str:
        return f"BoundResult(gpu={self.raw.gpu.key!r}, kernels={len(self.report)}, report=[...])"


def _path(kernel) -> Path | None:
    return None if kernel is None else Path(kernel)


def _arrays_given(q, k, v, T, d_k, d_v) -> bool:
    """True when q, k, v are given (all three, and then without the random inputs' sizes)."""
    given = [a is not None for a in (q, k, v)]
    if not any(given):
        return False
    if not all(given):
        raise AndreaError("pass all of q, k, v (or none, for random inputs of size T, d_k, d_v)")
    if T is not None or d_k is not None or d_v is not None:
        raise AndreaError("T, d_k, d_v size the random inputs; with q, k, v the arrays give the sizes: drop them")
    return True


def _document(report) -> dict:
    from andrea_cli.render.json_document import json_document

    return json_document(report.to_json())


def attend(q=None, k=None, v=None, *, mask: str = flags.MASK.default, scale: bool = True,
           backend: str = flags.BACKEND.default, kernel=None, fused: bool = False, sample_rows: int = 0,
           T: int | None = None, d_k: int | None = None, d_v: int | None = None,
           seed: int = flags.SEED.default) -> AttendResult:
    """softmax(mask(Q·K^T / sqrt(d_k)))·V through the kernels, as `andrea attend` runs it.

    q, k: (T, d_k) and v: (T, d_v), or (H, T, d) for H heads in one launch per stage. NumPy arrays
    run on any backend; cupy arrays and DLPack tensors (torch on a GPU) on cuda, where they are.
    Without q, k, v: random N(0, 1) inputs of size T (1024), d_k (64), d_v (d_k) from `seed`,
    exactly as the command makes them. mask: "causal", "none" or "window:W"; scale=False skips
    the division by sqrt(d_k); backend: "auto", "cuda", "cpu" or "numpy"; kernel: an edited copy
    of the kernel file; fused: the fused kernel (no T×T matrices; sample_rows=N for statistics)."""
    from andrea_cli.commands.attend import AttendOptions, check_combinations, run_attend, run_head
    from andrea_cli.inputs import check_fits_in_memory, qkv_from_arrays
    from andrea_cli.masks import parse_mask

    options = AttendOptions(T=T, d_k=d_k, d_v=d_v, seed=seed, mask=mask, no_scale=not scale, backend=backend,
                            kernel=_path(kernel), fused=fused, sample_rows=sample_rows)
    if not _arrays_given(q, k, v, T, d_k, d_v):
        report = run_attend(options)
    else:
        check_combinations(options)  # the command's checks and messages, on what the arrays do not size
        data = qkv_from_arrays(q, k, v)
        check_fits_in_memory(data.H or 1, data.T, data.d_k, data.d_v, square=not fused)  # the run's one check
        report = run_head(data, backend=backend, kernel=_path(kernel), mask=parse_mask(mask), scaled=scale,
                          fused=fused, sample_rows=sample_rows)
    device_output = getattr(report, "device_output", None)
    return AttendResult(_document(report), report,
                        output=device_output if device_output is not None else report.output,
                        weights=getattr(report, "weights", None), scores=getattr(report, "scores", None))


def grad(q=None, k=None, v=None, d_out=None, *, mask: str = flags.MASK.default, scale: bool = True,
         backend: str = flags.BACKEND.default, kernel=None, fused: bool = False, T: int | None = None,
         d_k: int | None = None, d_v: int | None = None, seed: int = flags.SEED.default) -> GradResult:
    """The backward pass through the kernels, as `andrea grad` runs it: dQ, dK, dV from the upstream
    gradient d_out (T, d_v) (seeded N(0, 1) when not given). q, k, v: one head's (T, d) NumPy
    arrays, or none for the command's random inputs of size T, d_k, d_v from `seed`; the other
    options as in attend()."""
    from andrea_cli.commands.grad import (BACKWARD_BYTES_PER_SCORE, GradOptions, check_combinations, run_grad,
                                          run_grad_head)
    from andrea_cli.runs.gradient_flow import d_out_for
    from andrea_cli.inputs import as_matrix, check_fits_in_memory, qkv_from_arrays
    from andrea_cli.masks import parse_mask

    options = GradOptions(T=T, d_k=d_k, d_v=d_v, seed=seed, mask=mask, no_scale=not scale, backend=backend,
                          kernel=_path(kernel), fused=fused)
    if not _arrays_given(q, k, v, T, d_k, d_v) and d_out is None:
        report = run_grad(options)
    else:
        if not all(a is not None for a in (q, k, v)):  # d_out alone
            raise AndreaError("pass all of q, k, v (or none, for random inputs of size T, d_k, d_v)")
        check_combinations(options)
        data = qkv_from_arrays(q, k, v)
        if data.on_device or data.H is not None:
            raise AndreaError("grad takes one head's (T, d) NumPy arrays")
        check_fits_in_memory(1, data.T, data.d_k, data.d_v, square=not fused, bytes_per_score=BACKWARD_BYTES_PER_SCORE)
        if d_out is None:
            upstream = d_out_for(data.T, data.d_v, seed)[0]
        else:
            upstream = as_matrix(np.asarray(d_out), "d_out")
            if upstream.shape != (data.T, data.d_v):
                raise AndreaError(f"d_out is {upstream.shape} but the output is ({data.T}, {data.d_v}): "
                                  "dO must have the output's shape")
        report = run_grad_head(data, upstream, backend=backend, kernel=_path(kernel), mask=parse_mask(mask),
                               scaled=scale, fused=fused)
    return GradResult(_document(report), report, dq=report.dq, dk=report.dk, dv=report.dv)


def verify(*, backend: str = "auto", quick: bool = False, T: int | None = None, d_k: int | None = None,
           d_v: int | None = None, mask: str | None = None, scale: bool = True, kernel=None,
           progress: bool = False) -> VerifyResult:
    """Every stage of the kernel file against the float64 NumPy path, as `andrea verify` runs it:
    the sweep (quick=True: a smaller one), or the one case T/d_k/d_v/mask/scale name. backend:
    "auto", "cuda" or "cpu". `.passed` is the command's exit status 0; progress=True prints a
    line per case to stderr as the command does."""
    from andrea_cli.commands.verify import VerifyOptions, run_verify_command

    options = VerifyOptions(backend=backend, quick=quick, T=T, d_k=d_k, d_v=d_v, mask=mask, no_scale=not scale,
                            kernel=_path(kernel))
    report = run_verify_command(options, progress=(lambda line: print(line, file=sys.stderr, flush=True))
                                if progress else None)
    return VerifyResult(_document(report), report, passed=report.passed)


def compare_scaling(*, d_k: Sequence[int] | str = (64, 256, 4096), T: int = 1024, seed: int = flags.SEED.default,
                    backend: str = flags.BACKEND.default, mask: str = flags.MASK.default, dist: str = "normal",
                    kernel=None) -> ScalingResult:
    """Why divide by sqrt(d_k), as `andrea compare-scaling` measures it: each d_k run unscaled and
    scaled. dist: "normal" (unit-variance entries) or "unit" (unit-norm rows). `.plot(FILE.png)`
    draws what `--plot` does."""
    from andrea_cli.commands.compare_scaling import ScalingOptions, run_compare_scaling

    widths = d_k if isinstance(d_k, str) else ",".join(str(int(w)) for w in d_k)
    report = run_compare_scaling(ScalingOptions(d_k=widths, T=T, seed=seed, backend=backend, mask=mask,
                                                dist=dist, kernel=_path(kernel)))
    return ScalingResult(_document(report), report)


def bench_bound(*, gpu: str = "h200", kernel=None) -> BoundResult:
    """Each kernel's static bound on an H200, H100 or A100 (gpu "h200", "h100", "a100"), read
    from its machine code with no GPU, as `andrea bench --bound` prints it: registers, warps per
    SM, the pipe that binds, the bound in TFLOP/s. kernel: an edited copy of the kernel file."""
    from andrea_cli.commands.bound import check_bound_options, run_bound

    check_bound_options(True, gpu, {})
    report = run_bound(gpu, _path(kernel))
    return BoundResult(_document(report), report)


__all__ = ["attend", "grad", "verify", "compare_scaling", "bench_bound", "AttendResult", "GradResult", "VerifyResult",
           "ScalingResult", "BoundResult", "AndreaError"]
