"""andrea from Python: the commands as functions, with the command line's names and defaults.

    import andrea_cli
    r = andrea_cli.attend(q, k, v)             # NumPy (..., T, d): any leading batch and head dims;
                                               # on cuda also cupy / DLPack tensors, where they are
    r.output, r.weights, r.scores, r.report    # arrays, and the dict `andrea attend --json` prints
    andrea_cli.attend(q, k, v, scale=0.125)    # as PyTorch's SDPA: None is 1/sqrt(d_k), a number is used as given
    g = andrea_cli.grad(q, k, v, d_out)        # g.dq, g.dk, g.dv: the backward pass, as `andrea grad`
    o = andrea_cli.scaled_dot_product_attention(query, key, value)   # torch's SDPA: its signature,
                                               # defaults (no mask), types and dtypes back

Every option of a command is a keyword of its function, named as the option is (--d-k: d_k,
--precision: precision, --json: json, --no-scale: scale=False). Bad input raises AndreaError
with the line the command prints, never a bare TypeError or ValueError. A result displays in
Jupyter as the terminal's tables. Nothing heavy (cupy, matplotlib) is imported until a function runs."""

from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from andrea_cli.commands.options import (AttendOptions, BenchOptions, GenerateOptions, GradOptions, InfoOptions,
                                         ScalingOptions, VerifyOptions, from_keywords, python_signature)
from andrea_cli.errors import AndreaError, shown


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
            check_head(from_keywords(AttendOptions, "attend", {"head": head}).head, n_head)
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
    passed: bool = True  # False: a row's output was over its tolerance (the CLI's exit 1)
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
class GenerateResult(Result):
    output: Any = None  # (T, d_v): what the T steps of generation produced, row t from step t
    _renderer = "render_generate_result"

    def plot(self, path) -> Path:
        """Each position's distance to the causal and the unmasked pass, and the step times, as a PNG."""
        from andrea_cli.render.generate_plot import save_generate_plot
        from andrea_cli.render.plot_common import check_plot_path

        check_plot_path(Path(path))
        save_generate_plot(self.raw, Path(path))
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
# The commands: each function's keywords are its command's options (commands/options), checked
# into the options dataclass the command runs.

def keywords_of(options_class):
    """The function's signature lists every option of options_class as a keyword (for help())."""

    def sign(function):
        function.__signature__ = python_signature(options_class, function)
        return function

    return sign


def _document(report) -> dict:
    from andrea_cli.render.json_document import json_document

    return json_document(report.to_json())


def _print_json(report) -> None:
    from andrea_cli.render.json_document import json_text

    print(json_text(report.to_json()))


def _check_plot(plot: Path | None) -> None:
    if plot is not None:
        from andrea_cli.render.plot_common import check_plot_path

        check_plot_path(plot)


def _use_threads(threads: int | None) -> None:
    """threads=N, as --threads N: the OS threads the CPU build spreads a launch's blocks over, for
    this call (None: every core)."""
    from andrea_cli.backends.cpu_runtime.module import use_threads

    use_threads(threads)


def _in_words(run, *args):
    """run(*args) with NumPy's raw RuntimeWarnings ("overflow encountered in cast") silenced, as on
    the command line (-W or PYTHONWARNINGS bring them back); what they meant follows as an
    AndreaWarning in words, the notice the command prints. Returns run's report."""
    from andrea_cli.errors import AndreaWarning
    from andrea_cli.overflow import is_overflow_notice

    with warnings.catch_warnings():
        if not sys.warnoptions:
            warnings.simplefilter("ignore", RuntimeWarning)
        report = run(*args)
    for notice in getattr(report, "notices", []):
        if is_overflow_notice(notice):
            warnings.warn(notice, AndreaWarning, stacklevel=3)  # at the caller's line: attend(...)
    return report


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# torch's SDPA arguments, which attend() does not take: a wrong call named, pointing to the function that does
SDPA_ONLY = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "enable_gqa")


def _not_sdpa(extra: tuple, keywords: dict) -> None:
    """attend() called as torch's SDPA is: one line pointing to scaled_dot_product_attention."""
    sdpa = "andrea_cli.scaled_dot_product_attention (torch's signature, no mask by default)"
    if extra:
        raise AndreaError(f"attend takes q, k, v by position and its options by keyword ({len(extra)} more "
                          f"positional given); for torch's positional call use {sdpa}")
    given = [name for name in SDPA_ONLY if name in keywords]
    if given:
        raise AndreaError(f"{given[0]}: an argument of {sdpa}; attend takes q, k, v and mask='causal' (its "
                          "default), 'none' or 'window:W'")
    mask = keywords.get("mask")
    if hasattr(mask, "shape"):
        raise AndreaError(f"mask={shown(mask)}: attend's mask is text ('causal', 'none', 'window:W'); a mask "
                          f"array goes to {sdpa} as attn_mask")


@keywords_of(AttendOptions)
def attend(q=None, k=None, v=None, *extra, **keywords) -> AttendResult:
    """softmax(mask(Q·K^T · scale))·V through the kernels, as `andrea attend` runs it, with the
    course's defaults: causal (mask="causal"), unlike torch's SDPA (no mask by default; for its
    signature and meaning, andrea_cli.scaled_dot_product_attention).

    q, k: (..., T, d_k) and v: (..., T, d_v), any leading batch and head dims (run as heads of one
    launch per stage); k and v may have fewer heads (dim -3) than q, H_q a multiple of H_kv
    (grouped K/V heads: query head h reads K/V head h // (H_q / H_kv), as torch's enable_gqa), as NumPy arrays or torch CPU tensors (any backend; requires_grad ones read
    detached) or cupy arrays / DLPack tensors (cuda, where they are); or .npy paths, as
    --q/--k/--v. The results are float32 NumPy arrays (cupy on the GPU). Without them: random
    N(0, 1) inputs of size T (1024), d_k (64), d_v (d_k) from `seed`, exactly as the command makes
    them, or the layer (d_model, n_head, n_kv_head, preset, x, layer_weights). scale: None (1/sqrt(d_k)), False
    (none) or the factor itself, as PyTorch's scaled_dot_product_attention takes it. The other
    keywords are the command's options: mask ("causal", "none", "window:W", "window:L,R",
    "sinks:N,window:W", "alibi": as --mask, see andrea attend --help), backend ("auto",
    "cuda", "cpu", "numpy"), kernel (an edited copy of the kernel file), fused (+ sample_rows,
    precision "bf16", variant: one fused kernel by name or number, "kernel7" or 7, as --variant),
    out / save_weights / plot (files), show_weights / json (print as the command does). Bad
    input: AndreaError, one line."""
    _not_sdpa(extra, keywords)
    from andrea_cli.commands.arrays import heads_of, split_inputs, unfold
    from andrea_cli.commands.attend import run_attend

    files, arrays = split_inputs(q, k, v)
    o = from_keywords(AttendOptions, "attend", {**keywords, **files})
    _use_threads(o.threads)
    _check_plot(o.plot)
    data, dims = heads_of(arrays) if arrays is not None else (None, ())
    if o.plot is not None and data is not None and data.H is not None:
        raise AndreaError("plot draws one head's (T, T) weights (or the layer's heads): pass one head's "
                          "(T, d) arrays")
    report = _in_words(run_attend, o, data)
    if o.plot is not None:
        from andrea_cli.render.attend_plot import save_attend_report_plot

        save_attend_report_plot(report, o.plot, head=o.head)
    if o.json:
        _print_json(report)
    elif o.show_weights:
        from andrea_cli.render.attend import print_attend

        print_attend(report, show_weights=True)
    device_output = getattr(report, "device_output", None)
    output = device_output if device_output is not None else report.output
    return AttendResult(_document(report), report, output=unfold(output, dims),
                        weights=unfold(getattr(report, "weights", None), dims),
                        scores=unfold(getattr(report, "scores", None), dims))


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False, *, backend: str = "auto", kernel=None):
    """torch.nn.functional.scaled_dot_product_attention, with its signature, defaults and meaning
    (torch 2.13's documentation is the spec): softmax(Q·K^T·scale + bias)·V.

    query (..., H_q, L, E), key (..., H_k, S, E), value (..., H_v, S, E_v): 2 dims or more, the
    leading ones broadcast; NumPy arrays, cupy arrays or torch tensors (requires_grad ones are read
    detached: no autograd through andrea), float16, bfloat16, float32 or float64. Returns
    (..., L, E_v) as the query's type, dtype and device. No mask by default (attend's default is
    causal). attn_mask: bool (True: takes part) or float (added to the scores), broadcast to
    (..., L, S); is_causal: query i sees keys 0..i, top-left aligned when L != S (torch's meaning;
    not with attn_mask, which torch's reference refuses too); scale: None is 1/sqrt(E);
    enable_gqa: H_q a multiple of H_k and H_v, query head h reading K/V head h // (H_q / H_k).
    dropout_p must be 0.0: andrea has no dropout.

    backend: "auto" (the cuda kernels where a GPU answers, else the NumPy path), "cuda", "cpu"
    (the kernel file's CPU build) or "numpy"; kernel: an edited copy of the kernel file. The
    kernels compute in float32 (fp16/bf16 inputs widened, the result rounded back once; a mask
    array in the fused kernels); what they cannot take (float64, K and V head counts that differ,
    a scale <= 0) runs the NumPy path in float32 (float64 for float64 inputs) with a
    KernelFallbackWarning saying why. Bad input: AndreaError."""
    from andrea_cli.commands.sdpa import scaled_dot_product_attention as run

    return run(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, backend=backend, kernel=kernel)


@keywords_of(GradOptions)
def grad(q=None, k=None, v=None, d_out=None, **keywords) -> GradResult:
    """The backward pass through the kernels, as `andrea grad` runs it: dQ, dK, dV from the upstream
    gradient d_out (..., T, d_v) (seeded N(0, 1) when not given; a .npy path as --d-out). q, k, v:
    NumPy arrays (..., T, d), any leading dims, or .npy paths; or none for the command's random
    inputs of size T, d_k, d_v from `seed`, or the layer's. Grouped K/V heads: k, v (..., H_kv, S, d)
    against q (..., H_q, L, d), H_q a multiple of H_kv, query head h reading K/V head h // (H_q / H_kv)
    (torch's SDPA with enable_gqa=True); dK, dV come back with K's and V's heads, summed over each
    group. The other keywords as in attend(); precision="bf16" with fused=True: the tensor-core
    forward and backward (d_k = d_v = 64 or 128)."""
    from andrea_cli.commands.arrays import backward_inputs, is_path, split_inputs, unfold
    from andrea_cli.commands.grad import run_grad

    files, arrays = split_inputs(q, k, v)
    d_out_path = d_out if is_path(d_out) else None
    o = from_keywords(GradOptions, "grad", {**keywords, **files, "d_out": d_out_path})
    if d_out is not None and d_out_path is None and arrays is None:
        raise AndreaError("d_out goes with q, k, v given as arrays (or pass a .npy path, as --d-out)")
    data = upstream = None
    dims = kv_dims = ()
    if arrays is not None:
        data, upstream, (dims, kv_dims) = backward_inputs(arrays, None if d_out_path is not None else d_out)
    report = _in_words(run_grad, o, data, upstream)
    if o.json:
        _print_json(report)
    if not hasattr(report, "dq"):  # the layer's backward: dx and the gradients of W_Q, W_K, W_V, W_O
        return GradResult(_document(report), report, grads=dict(report.arrays()))
    return GradResult(_document(report), report, dq=unfold(report.dq, dims), dk=unfold(report.dk, kv_dims),
                      dv=unfold(report.dv, kv_dims))


@keywords_of(VerifyOptions)
def verify(**keywords) -> VerifyResult:
    """Every stage of the kernel file against the float64 NumPy path, as `andrea verify` runs it:
    the sweep (quick=True: a smaller one), or the one case T/d_k/d_v/mask/scale name (scale=False:
    unscaled). backend: "auto", "cuda" or "cpu"; sanitize: the CPU build under ASan/UBSan;
    racecheck: under ThreadSanitizer, a data race fails its case; threads: --threads.
    `.passed` is the command's exit status 0; progress=True prints a line per case to stderr."""
    from andrea_cli.commands.verify import run_verify_command

    o = from_keywords(VerifyOptions, "verify", keywords)
    _use_threads(o.threads)
    report = run_verify_command(o, progress=_to_stderr if o.progress else None)
    if o.json:
        _print_json(report)
    return VerifyResult(_document(report), report, passed=report.passed)


@keywords_of(GenerateOptions)
def generate(q=None, k=None, v=None, **keywords) -> GenerateResult:
    """One token at a time, as `andrea generate` runs it: step t appends k[t], v[t] to the KV cache
    and attends with q[t] alone (the decode kernels, on cuda or the CPU build); the report compares
    the T outputs with one causal pass (the same, to rounding) and one unmasked pass. q, k: (T, d_k),
    v: (T, d_v) NumPy arrays or .npy paths; without them random inputs of size T, d_k, d_v from
    `seed`. precision "bf16": a bf16 cache. `.output` is what generation produced."""
    from andrea_cli.commands.arrays import heads_of, split_inputs
    from andrea_cli.commands.generate import run_generate_command

    files, arrays = split_inputs(q, k, v)
    o = from_keywords(GenerateOptions, "generate", {**keywords, **files})
    _use_threads(o.threads)
    _check_plot(o.plot)
    data = heads_of(arrays)[0] if arrays is not None else None
    report = run_generate_command(o, data=data)
    result = GenerateResult(_document(report), report, output=report.output)
    if o.plot is not None:
        result.plot(o.plot)
    if o.json:
        _print_json(report)
    return result


@keywords_of(ScalingOptions)
def compare_scaling(**keywords) -> ScalingResult:
    """Why divide by sqrt(d_k), as `andrea compare-scaling` measures it: each d_k (one width, a
    list, or "64,256") run unscaled and scaled. dist: "normal" (unit-variance entries) or "unit"
    (unit-norm rows). plot=FILE.png (or `.plot(FILE.png)`) draws what `--plot` does."""
    from andrea_cli.commands.compare_scaling import check_scaling_options, run_compare_scaling

    o = from_keywords(ScalingOptions, "compare-scaling", keywords)
    check_scaling_options(o)
    _check_plot(o.plot)
    report = run_compare_scaling(o)
    result = ScalingResult(_document(report), report)
    if o.plot is not None:
        result.plot(o.plot)
    if o.json:
        _print_json(report)
    return result


@keywords_of(BenchOptions)
def benchmark(**keywords) -> BenchResult | BoundResult:
    """`andrea bench`: time the fused kernel and its peers over a sweep of T (T, d_k: one or a list);
    impl: only these implementations (a name or a list; the baseline runs too);
    bound=True: each kernel's static bound on `gpu` instead (no timing). Named benchmark, not
    bench, since andrea_cli.bench is the package that measures."""
    from andrea_cli.commands.bench import run_bench

    o = from_keywords(BenchOptions, "bench", keywords)
    if o.bound or o.gpu is not None:
        from andrea_cli.commands.bound import check_bound_options, run_bound

        check_bound_options(o)
        report = run_bound(o.gpu, o.kernel)
        if o.json:
            _print_json(report)
        return BoundResult(_document(report), report)
    _check_plot(o.plot)
    _use_threads(o.threads)
    result = run_bench(o, progress=_to_stderr if o.progress else (lambda line: None))
    if o.plot is not None:
        from andrea_cli.render.bench_plot import save_bench_plot

        save_bench_plot(result, o.plot)
    if o.json:
        _print_json(result)
    return BenchResult(_document(result), result,
                       passed=not any(m.within_tolerance is False for m in result.measurements))


def bench_bound(*, gpu: str = "h200", kernel=None) -> BoundResult:
    """Each kernel's static bound on an H200, H100 or A100 (gpu "h200", "h100", "a100"), read
    from its machine code with no GPU, as `andrea bench --bound` prints it: registers, warps per
    SM, the pipe that binds, the bound in TFLOP/s. kernel: an edited copy of the kernel file.
    The same as benchmark(bound=True, gpu=...)."""
    return benchmark(bound=True, gpu=gpu, kernel=kernel)


@keywords_of(InfoOptions)
def info(**keywords) -> InfoResult:
    """Versions, the kernel file in use, and which backends work here, as `andrea info` shows them."""
    from andrea_cli.commands.info import describe_environment
    from andrea_cli.render.json_document import json_document, json_text

    o = from_keywords(InfoOptions, "info", keywords)
    document = describe_environment()
    if o.json:
        print(json_text(document))
    return InfoResult(json_document(document), document)


__all__ = ["attend", "scaled_dot_product_attention", "grad", "generate", "verify", "compare_scaling", "benchmark",
           "bench_bound", "info", "AttendResult", "GradResult", "GenerateResult", "VerifyResult", "ScalingResult", "BenchResult", "BoundResult", "InfoResult", "AndreaError"]
