"""andrea from Python: the commands as functions, with the command line's names and defaults.

    import andrea_cli
    r = andrea_cli.attend(q, k, v)             # NumPy (..., T, d): any leading batch and head dims;
                                               # on cuda also cupy / DLPack tensors, where they are
    r.output, r.weights, r.scores, r.report    # arrays, and the dict `andrea attend --json` prints
    andrea_cli.attend(q, k, v, scale=0.125)    # as PyTorch's SDPA: None is 1/sqrt(d_k), a number is used as given
    g = andrea_cli.grad(q, k, v, d_out)        # g.dq, g.dk, g.dv: the backward pass, as `andrea grad`

Every option of a command is a keyword of its function, named as the option is (--d-k: d_k,
--precision: precision, --json: json, --no-scale: scale=False). Bad input raises AndreaError
with the line the command prints, never a bare TypeError or ValueError. A result displays in
Jupyter as the terminal's tables. Nothing heavy (cupy, matplotlib) is imported until a function runs."""

from __future__ import annotations

import math
import os
import sys
import typing
from dataclasses import dataclass, fields
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

    def plot(self, path, head: int | None = None) -> Path:
        """The weights, row entropy and largest weight per row as a PNG (the `plot` extra); the
        layer's: every head in a grid, or head `head` alone."""
        from andrea_cli.commands.attend import check_head
        from andrea_cli.render.attend_plot import save_attend_report_plot
        from andrea_cli.render.plot_common import check_plot_path

        if self.weights is None:
            raise AndreaError("--plot draws the T×T weights, which --fused never builds: drop one of them")
        n_head = getattr(self.raw, "n_head", None)
        if self.raw.weights.ndim != 2 and n_head is None:
            raise AndreaError("plot() draws one head or the layer: run one head's (T, d) arrays")
        if head is not None:
            if n_head is None:
                raise AndreaError(f"head={head} picks one of the layer's heads; this is one head's result")
            check_head(_convert_or_fail(head, int, "head"), n_head)
        check_plot_path(Path(path))
        save_attend_report_plot(self.raw, Path(path), head=head)
        return Path(path)


@dataclass(repr=False)
class GradResult(Result):
    dq: Any = None  # (T, d_k)
    dk: Any = None  # (T, d_k)
    dv: Any = None  # (T, d_v)
    grads: Any = None  # the layer (d_model/n_head/preset): dx, dw_q, dw_k, dw_v, dw_o
    _renderer = "render_grad_result"


@dataclass(repr=False)
class BenchResult(Result):
    _renderer = "render_bench_result"


@dataclass(repr=False)
class InfoResult(Result):
    _renderer = "render_info_result"


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


# ------------------------------------------------------------------------------------------------
# Keywords checked as the command line checks its options: one AndreaError line naming the option.

FLAG_NAMES = {"T": "--T", "as_json": "--json", "layer_weights": "--weights"}


def flag_of(name: str) -> str:
    return FLAG_NAMES.get(name, "--" + name.replace("_", "-"))


KINDS = {int: ("a whole number", "1024"), float: ("a number", "2.0"), str: ("text", "'causal'"),
         bool: ("True or False", "True"), Path: ("a file path", "'file.npy'")}


def _convert(value, hint):
    """value as the option's type, or raise ValueError. hint: the options dataclass's annotation."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", typing.Union)):
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(value, arg)
            except ValueError:
                pass
        raise ValueError(next(a for a in args if a is not type(None)))
    if origin is list:
        items = [value] if isinstance(value, (int, np.integer)) and not isinstance(value, bool) else value
        if isinstance(items, (str, bytes)) or not hasattr(items, "__iter__"):
            raise ValueError(hint)
        return [_convert(item, args[0]) for item in items]
    if hint is bool and isinstance(value, (bool, np.bool_)):
        return bool(value)
    if hint is int and isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return int(value)
    if hint is float and isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        return float(value)
    if hint is str and isinstance(value, str):
        return value
    if hint is Path and isinstance(value, (str, os.PathLike)):
        return Path(value)
    if hint is typing.Any:
        return value
    raise ValueError(hint)


def _kind(hint) -> tuple[str, str]:
    args = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
    first = args[0]
    if typing.get_origin(first) is list:
        return "whole numbers (one or a list)", "[64, 128]"
    return KINDS.get(first, (getattr(first, "__name__", str(first)), "..."))


def _options(cls, command: str, given: dict, more: dict):
    """cls(**given, **more), each value checked against cls's annotation. `more`: keywords the
    signature does not list (an option added to the command later still reaches it)."""
    names = {f.name for f in fields(cls)}
    for name in more:
        if name not in names:
            raise AndreaError(f"{name}: not an option of andrea {command}; the options are "
                              f"{', '.join(sorted(n for n in names | set(given) if not n.startswith('_')))}")
    hints = typing.get_type_hints(cls)
    defaults = {f.name: f.default for f in fields(cls)}
    checked = {}
    for name, value in {**given, **more}.items():
        try:
            checked[name] = _convert(value, hints[name])
        except ValueError:
            what, example = _kind(hints[name])
            if defaults.get(name) is not None and not isinstance(defaults.get(name), bool):
                example = repr(defaults[name])  # the command's own default, e.g. seed=0
            key = "json" if name == "as_json" else name
            raise AndreaError(f"{key}={value!r}: {flag_of(name)} takes {what}; e.g. {key}={example}") from None
    return cls(**checked)


def _convert_or_fail(value, hint, name: str):
    try:
        return _convert(value, hint)
    except ValueError:
        what, example = _kind(hint)
        raise AndreaError(f"{name}={value!r}: {flag_of(name)} takes {what}") from None


def scale_option(scale) -> bool | float:
    """PyTorch's convention: None is 1/sqrt(d_k); a number is the factor itself, used as given and
    recorded. True and False keep their meaning (1/sqrt(d_k), no scaling)."""
    if scale is None:
        return True
    if isinstance(scale, (bool, np.bool_)):
        return bool(scale)
    if isinstance(scale, (int, float, np.integer, np.floating)) and math.isfinite(scale) and scale > 0:
        return float(scale)
    raise AndreaError(f"scale={scale!r}: pass None (1/sqrt(d_k)), False (no scaling) or a positive number "
                      "used as given, e.g. scale=0.125")


def _scale_fields(scale) -> dict:
    scaled = scale_option(scale)
    return {"no_scale": scaled is False, "scale": None if isinstance(scaled, bool) else scaled}


# ------------------------------------------------------------------------------------------------
# Arrays with any leading dims: flattened into heads for the run, shaped back after.

def _is_path(a) -> bool:
    return isinstance(a, (str, os.PathLike))


def _split_inputs(q, k, v) -> tuple[dict, tuple | None]:
    """Paths go to the options as --q/--k/--v; arrays are returned apart."""
    given = [a is not None for a in (q, k, v)]
    if not any(given):
        return {}, None
    paths = [_is_path(a) for a in (q, k, v) if a is not None]
    if all(paths):
        return {"q": q, "k": k, "v": v}, None
    if any(paths):
        raise AndreaError("q, k, v: pass all three as arrays or all three as .npy paths")
    if not all(given):
        raise AndreaError("pass all of q, k, v (or none, for random inputs of size T, d_k, d_v)")
    return {}, (q, k, v)


def _as_array(a, name: str):
    from andrea_cli.inputs import is_gpu_array

    if is_gpu_array(a) or isinstance(a, np.ndarray):
        return a
    try:
        return np.asarray(a)
    except (TypeError, ValueError) as exc:
        raise AndreaError(f"{name}: not an array of numbers ({exc}); pass a NumPy array") from None


def _fold_heads(arrays: dict) -> tuple[dict, tuple]:
    """(..., T, d) arrays -> (H, T, d) with H the product of the leading dims (more than one of
    them); returns the arrays and the leading dims to shape the results back with."""
    arrays = {name: _as_array(a, name) for name, a in arrays.items()}
    shapes = {name: tuple(a.shape) for name, a in arrays.items()}
    if any(len(shape) < 2 for shape in shapes.values()):
        bad = next(name for name, shape in shapes.items() if len(shape) < 2)
        raise AndreaError(f"{bad}: expected (..., T, d) with T and d last, got shape {shapes[bad]}")
    lead = {shape[:-2] for shape in shapes.values()}
    if len(lead) > 1:
        shown = ", ".join(f"{name} {shape}" for name, shape in shapes.items())
        raise AndreaError(f"{shown}: the leading (batch, head) dims must agree")
    dims = lead.pop()
    if len(dims) <= 1:
        return arrays, ()
    return {name: a.reshape((-1, *a.shape[-2:])) for name, a in arrays.items()}, dims


def _unfold(a, dims: tuple):
    return a if a is None or not dims else a.reshape((*dims, *a.shape[-2:]))


def _document(report) -> dict:
    from andrea_cli.render.json_document import json_document

    return json_document(report.to_json())


def _print_json(report) -> None:
    from andrea_cli.render.json_document import json_text

    print(json_text(report.to_json()))


def _check_plot(plot) -> Path | None:
    if plot is None:
        return None
    from andrea_cli.render.plot_common import check_plot_path

    plot = Path(plot)
    check_plot_path(plot)
    return plot


def _use_threads(threads) -> None:
    """threads=N, as --threads N: the OS threads the CPU build spreads a launch's blocks over, for
    this call (None: every core)."""
    from andrea_cli.backends.cpu_runtime.module import use_threads

    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)):
        raise AndreaError(f"threads={threads!r}: --threads takes a whole number of OS threads, at least 1; "
                          "e.g. threads=2")
    use_threads(threads)


# ------------------------------------------------------------------------------------------------
# The commands.

def attend(q=None, k=None, v=None, *, mask: str = flags.MASK.default, scale: bool | float | None = None,
           backend: str = flags.BACKEND.default, kernel=None, fused: bool = False, sample_rows: int = 0,
           precision: str = "fp32", T: int | None = None, d_k: int | None = None, d_v: int | None = None,
           seed: int = flags.SEED.default, qkv=None, d_model: int | None = None, n_head: int | None = None,
           preset: str | None = None, x=None, layer_weights=None, out=None, save_weights=None, plot=None,
           show_weights: bool = False, json: bool = False, timeout: float | None = None, head: int | None = None,
           threads: int | None = None, racecheck: bool = False, **more) -> AttendResult:
    """softmax(mask(Q·K^T · scale))·V through the kernels, as `andrea attend` runs it.

    q, k: (..., T, d_k) and v: (..., T, d_v), any leading batch and head dims (run as heads of one
    launch per stage), as NumPy arrays (any backend) or cupy arrays / DLPack tensors (cuda, where
    they are); or .npy paths, as --q/--k/--v. Without them: random N(0, 1) inputs of size T
    (1024), d_k (64), d_v (d_k) from `seed`, exactly as the command makes them, or the layer
    (d_model, n_head, preset, x, layer_weights). scale: None (1/sqrt(d_k)), False (none) or the
    factor itself, as PyTorch's scaled_dot_product_attention takes it. The other keywords are the
    command's options: mask ("causal", "none", "window:W"), backend ("auto", "cuda", "cpu",
    "numpy"), kernel (an edited copy of the kernel file), fused (+ sample_rows, precision "bf16"),
    out / save_weights / plot (files), show_weights / json (print as the command does)."""
    from andrea_cli.commands.attend import AttendOptions, run_attend
    from andrea_cli.inputs import qkv_from_arrays

    files, arrays = _split_inputs(q, k, v)
    given = dict(mask=mask, **_scale_fields(scale), backend=backend, kernel=kernel, fused=fused,
                 sample_rows=sample_rows, precision=precision, T=T, d_k=d_k, d_v=d_v, seed=seed, qkv=qkv,
                 d_model=d_model, n_head=n_head, preset=preset, x=x, layer_weights=layer_weights, out=out,
                 save_weights=save_weights, plot=plot, show_weights=show_weights, as_json=json, timeout=timeout,
                 head=head, racecheck=racecheck, **files)
    options = _options(AttendOptions, "attend", given, more)
    _use_threads(threads)
    plot_path = _check_plot(options.plot)
    dims = ()
    data = None
    if arrays is not None:
        folded, dims = _fold_heads(dict(zip("qkv", arrays)))
        data = qkv_from_arrays(folded["q"], folded["k"], folded["v"])
        if plot_path is not None and data.H is not None:
            raise AndreaError("plot draws one head's (T, T) weights (or the layer's heads): pass one head's "
                              "(T, d) arrays")
    report = run_attend(options, data)
    if plot_path is not None:
        from andrea_cli.render.attend_plot import save_attend_report_plot

        save_attend_report_plot(report, plot_path, head=options.head)
    if options.as_json:
        _print_json(report)
    elif options.show_weights:
        from andrea_cli.render.attend import print_attend

        print_attend(report, show_weights=True)
    device_output = getattr(report, "device_output", None)
    output = device_output if device_output is not None else report.output
    return AttendResult(_document(report), report, output=_unfold(output, dims),
                        weights=_unfold(getattr(report, "weights", None), dims),
                        scores=_unfold(getattr(report, "scores", None), dims))


def grad(q=None, k=None, v=None, d_out=None, *, mask: str = flags.MASK.default, scale: bool | float | None = None,
         backend: str = flags.BACKEND.default, kernel=None, fused: bool = False, T: int | None = None,
         d_k: int | None = None, d_v: int | None = None, seed: int = flags.SEED.default, qkv=None,
         d_model: int | None = None, n_head: int | None = None, preset: str | None = None, x=None,
         layer_weights=None, out=None, json: bool = False, precision: str = flags.PRECISION.default,
         racecheck: bool = False, **more) -> GradResult:
    """The backward pass through the kernels, as `andrea grad` runs it: dQ, dK, dV from the upstream
    gradient d_out (..., T, d_v) (seeded N(0, 1) when not given; a .npy path as --d-out). q, k, v:
    NumPy arrays (..., T, d), any leading dims, or .npy paths; or none for the command's random
    inputs of size T, d_k, d_v from `seed`, or the layer's. The other keywords as in attend();
    precision="bf16" with fused=True: the tensor-core forward and backward (d_k = d_v = 64 or 128)."""
    from andrea_cli.commands.grad import GradOptions, run_grad
    from andrea_cli.inputs import as_matrix, qkv_from_arrays

    files, arrays = _split_inputs(q, k, v)
    d_out_path = d_out if _is_path(d_out) else None
    given = dict(mask=mask, **_scale_fields(scale), backend=backend, kernel=kernel, fused=fused, T=T, d_k=d_k,
                 d_v=d_v, seed=seed, qkv=qkv, d_model=d_model, n_head=n_head, preset=preset, x=x,
                 layer_weights=layer_weights, out=out, as_json=json, d_out=d_out_path, precision=precision,
                 racecheck=racecheck, **files)
    options = _options(GradOptions, "grad", given, more)
    data = upstream = None
    dims = ()
    if d_out is not None and d_out_path is None and arrays is None:
        raise AndreaError("d_out goes with q, k, v given as arrays (or pass a .npy path, as --d-out)")
    if arrays is not None:
        named = dict(zip("qkv", arrays))
        if d_out is not None and d_out_path is None:
            named["d_out"] = d_out
        folded, dims = _fold_heads(named)
        data = qkv_from_arrays(folded["q"], folded["k"], folded["v"])
        if data.on_device:
            raise AndreaError("grad takes NumPy arrays: copy GPU arrays to the host first")
        if "d_out" in folded:
            upstream = as_matrix(np.asarray(folded["d_out"]), "d_out", heads=True)
            if upstream.shape != data.v.shape[:-1] + (data.d_v,):
                raise AndreaError(f"d_out is {tuple(np.shape(d_out))} but the output is "
                                  f"{tuple(np.shape(arrays[2]))[:-1] + (data.d_v,)}: dO must have the output's shape")
    report = run_grad(options, data, upstream)
    if options.as_json:
        _print_json(report)
    if not hasattr(report, "dq"):  # the layer's backward: dx and the gradients of W_Q, W_K, W_V, W_O
        return GradResult(_document(report), report, grads=dict(report.arrays()))
    return GradResult(_document(report), report, dq=_unfold(report.dq, dims), dk=_unfold(report.dk, dims),
                      dv=_unfold(report.dv, dims))


def verify(*, backend: str = "auto", quick: bool = False, T: int | None = None, d_k: int | None = None,
           d_v: int | None = None, mask: str | None = None, scale: bool | None = None, kernel=None,
           sanitize: bool = False, timeout: float | None = None, json: bool = False,
           progress: bool = False, threads: int | None = None, racecheck: bool = False,
           **more) -> VerifyResult:
    """Every stage of the kernel file against the float64 NumPy path, as `andrea verify` runs it:
    the sweep (quick=True: a smaller one), or the one case T/d_k/d_v/mask/scale name (scale=False:
    unscaled). backend: "auto", "cuda" or "cpu"; sanitize: the CPU build under ASan/UBSan;
    racecheck: under ThreadSanitizer, a data race fails its case; threads: --threads.
    `.passed` is the command's exit status 0; progress=True prints a line per case to stderr."""
    from andrea_cli.commands.verify import VerifyOptions, run_verify_command

    scaled = scale_option(scale)
    if not isinstance(scaled, bool):
        raise AndreaError(f"scale={scale!r}: verify checks the course's 1/sqrt(d_k) (None or True) or no "
                          "scaling (False); a factor of your own is attend's and grad's")
    options = _options(VerifyOptions, "verify", dict(backend=backend, quick=quick, T=T, d_k=d_k, d_v=d_v, mask=mask,
                                                     no_scale=not scaled, kernel=kernel, sanitize=sanitize,
                                                     timeout=timeout, racecheck=racecheck), more)
    if not isinstance(progress, bool):
        raise AndreaError(f"progress={progress!r}: pass True (a line per case on stderr) or False")
    _use_threads(threads)
    report = run_verify_command(options, progress=(lambda line: print(line, file=sys.stderr, flush=True))
                                if progress else None)
    if json:
        _print_json(report)
    return VerifyResult(_document(report), report, passed=report.passed)


def compare_scaling(*, d_k: Sequence[int] | int | str = (64, 256, 4096), T: int = 1024,
                    seed: int = flags.SEED.default, backend: str = flags.BACKEND.default,
                    mask: str = flags.MASK.default, dist: str = "normal", kernel=None, plot=None,
                    json: bool = False, **more) -> ScalingResult:
    """Why divide by sqrt(d_k), as `andrea compare-scaling` measures it: each d_k (one width, a
    list, or "64,256") run unscaled and scaled. dist: "normal" (unit-variance entries) or "unit"
    (unit-norm rows). plot=FILE.png (or `.plot(FILE.png)`) draws what `--plot` does."""
    from andrea_cli.commands.compare_scaling import ScalingOptions, check_scaling_options, run_compare_scaling

    if isinstance(d_k, str):
        widths = d_k
    else:
        try:
            widths = ",".join(str(w) for w in _convert(d_k, list[int]))
        except ValueError:
            raise AndreaError(f"d_k={d_k!r}: --d-k takes widths, one or a list (or '64,256'); "
                              "e.g. d_k=[64, 256]") from None
    options = _options(ScalingOptions, "compare-scaling", dict(d_k=widths, T=T, seed=seed, backend=backend,
                                                               mask=mask, dist=dist, kernel=kernel), more)
    check_scaling_options(options)
    plot_path = _check_plot(plot)
    report = run_compare_scaling(options)
    result = ScalingResult(_document(report), report)
    if plot_path is not None:
        result.plot(plot_path)
    if json:
        _print_json(report)
    return result


def benchmark(*, side: str = "auto", T: Sequence[int] | int | None = None, d_k: Sequence[int] | int | None = None,
          mask: str = "both", heads: int | None = None, repeats: int = 5, warmup: int = 1,
          no_cpu_build: bool = False, blas_threads: int = 1, kernel=None, timeout: float | None = None,
          plot=None, json: bool = False, bound: bool = False, gpu: str | None = None, progress: bool = False,
          threads: int | None = None, impl: Sequence[str] | str | None = None, **more) -> BenchResult | BoundResult:
    """`andrea bench`: time the fused kernel and its peers over a sweep of T (T, d_k: one or a list);
    impl: only these implementations (a name or a list; the baseline runs too);
    bound=True: each kernel's static bound on `gpu` instead (no timing). Named benchmark, not
    bench, since andrea_cli.bench is the package that measures."""
    from andrea_cli.commands.bench import BenchOptions, run_bench

    options = _options(BenchOptions, "bench", dict(side=side, T=T, d_k=d_k, mask=mask, heads=heads, repeats=repeats,
                                                   warmup=warmup, no_cpu_build=no_cpu_build,
                                                   blas_threads=blas_threads, kernel=kernel, timeout=timeout,
                                                   impl=[impl] if isinstance(impl, str) else
                                                   (list(impl) if impl is not None else None)), more)
    if bound or gpu is not None:
        from andrea_cli.commands.bound import check_bound_options, run_bound

        defaults = BenchOptions()
        others = {flag_of(f.name): getattr(options, f.name) != getattr(defaults, f.name)
                  for f in fields(BenchOptions) if f.name != "kernel"}
        check_bound_options(bool(bound), gpu, {**others, "--plot": plot is not None})
        report = run_bound(gpu, options.kernel)
        if json:
            _print_json(report)
        return BoundResult(_document(report), report)
    plot_path = _check_plot(plot)
    _use_threads(threads)
    result = run_bench(options, progress=(lambda line: print(line, file=sys.stderr, flush=True))
                       if progress else (lambda line: None))
    if plot_path is not None:
        from andrea_cli.render.bench_plot import save_bench_plot

        save_bench_plot(result, plot_path)
    if json:
        _print_json(result)
    return BenchResult(_document(result), result)


def bench_bound(*, gpu: str = "h200", kernel=None) -> BoundResult:
    """Each kernel's static bound on an H200, H100 or A100 (gpu "h200", "h100", "a100"), read
    from its machine code with no GPU, as `andrea bench --bound` prints it: registers, warps per
    SM, the pipe that binds, the bound in TFLOP/s. kernel: an edited copy of the kernel file.
    The same as benchmark(bound=True, gpu=...)."""
    return benchmark(bound=True, gpu=gpu, kernel=kernel)


def info(*, json: bool = False) -> InfoResult:
    """Versions, the kernel file in use, and which backends work here, as `andrea info` shows them."""
    from andrea_cli.commands.info import describe_environment
    from andrea_cli.render.json_document import json_document, json_text

    document = describe_environment()
    if json:
        print(json_text(document))
    return InfoResult(json_document(document), document)


__all__ = ["attend", "grad", "verify", "compare_scaling", "benchmark", "bench_bound", "info", "AttendResult", "GradResult",
           "VerifyResult", "ScalingResult", "BenchResult", "BoundResult", "InfoResult", "AndreaError"]
