"""The `andrea` command line, Typer only: each command parses its options, calls commands/X.py,
renders with render/X.py (or prints JSON) and sets the exit code."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from andrea_cli.commands import options as flags
from andrea_cli.defaults import DEFAULT_D_K, DEFAULT_T
from andrea_cli.errors import AndreaError, KernelError

class _FlagsWithoutPlaceholders:
    """Typer shows a type after every option, `<bool>` after a flag too, though a flag takes no
    value: each flag (--help, --install-completion and the commands' own) gets an empty one."""

    def get_params(self, ctx):
        params = super().get_params(ctx)
        for param in params:
            if getattr(param, "is_flag", False) and not param.metavar:
                param.metavar = ""
        return params


class _Command(_FlagsWithoutPlaceholders, typer.core.TyperCommand):
    pass


class _Group(_FlagsWithoutPlaceholders, typer.core.TyperGroup):
    pass


app = typer.Typer(
    cls=_Group,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish, PowerShell
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="The attention equation softmax(mask(Q·K^T / sqrt(d_k)))·V, run on real kernels.",
)


def _print_version(value: bool) -> None:
    if value:
        from andrea_cli import __version__

        typer.echo(f"andrea {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    """The attention equation softmax(mask(Q·K^T / sqrt(d_k)))·V, run on real kernels."""
    if not sys.warnoptions:  # no raw Python warnings on the terminal (-W or PYTHONWARNINGS bring them back):
        warnings.simplefilter("ignore")  # what they would say (an overflow, say) the reports say in words


def option(flag: flags.Flag, **changes):
    """A Typer option from a flag of commands/options.py (its names, default and help declared there)."""
    flag = flag.but(**changes) if changes else flag
    return typer.Option(flag.default, *flag.names, help=flag.help, metavar=flag.metavar)


def console() -> Console:
    return Console(highlight=False, emoji=False)  # emoji=False: an error's "file.cu:1234:" stays text, no emoji


def err_console() -> Console:
    return Console(stderr=True, highlight=False, emoji=False)


def echo_err(line: str) -> None:
    typer.echo(line, err=True)


def print_json(document: dict) -> None:
    """JSON for scripts: plain stdout, never through Rich (which would wrap and colour it)."""
    from andrea_cli.render.json_document import json_text

    typer.echo(json_text(document))


def fail(message: str, code: int = 2) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def use_cpu_threads(threads: int | None) -> None:
    """--threads: how many OS threads the CPU build spreads a launch's blocks over (None: every
    core; set for each command, so one run's choice never carries over to the next in-process)."""
    from andrea_cli.backends.cpu_runtime.module import use_threads

    use_threads(threads)


def fail_on(exc: AndreaError) -> typer.Exit:
    """Exit 1 when the kernel file did something wrong while it ran, 2 for bad usage."""
    return fail(str(exc), 1 if isinstance(exc, KernelError) else 2)


@app.command()
def attend(
    T: Optional[int] = option(flags.T),
    d_k: Optional[int] = option(flags.D_K),
    d_v: Optional[int] = option(flags.D_V),
    seed: int = option(flags.SEED),
    q: Optional[Path] = option(flags.Q),
    k: Optional[Path] = option(flags.K),
    v: Optional[Path] = option(flags.V),
    qkv: Optional[Path] = option(flags.QKV),
    mask: str = option(flags.MASK),
    no_scale: bool = option(flags.NO_SCALE),
    backend: str = option(flags.BACKEND),
    out: Optional[Path] = typer.Option(None, help="Save the (T, d_v) output as float32 .npy."),
    save_weights: Optional[Path] = typer.Option(None, help="Save the (T, T) weights as float32 .npy."),
    kernel: Optional[Path] = option(flags.KERNEL),
    as_json: bool = option(flags.JSON),
    d_model: Optional[int] = option(flags.D_MODEL),
    n_head: Optional[int] = option(flags.N_HEAD),
    preset: Optional[str] = option(flags.PRESET),
    x: Optional[Path] = option(flags.X),
    layer_weights: Optional[Path] = option(flags.LAYER_WEIGHTS),
    show_weights: bool = typer.Option(False, "--show-weights", help="Draw the (T, T) weights in the terminal."),
    fused: bool = typer.Option(False, "--fused", help="One fused kernel; no T×T matrix (cuda, cpu)."),
    sample_rows: int = typer.Option(0, "--sample-rows", help="With --fused: weight statistics on N rows."),
    plot: Optional[Path] = option(flags.PLOT, help="Save the weights, row entropy and largest weight to "
                                  "FILE.png; for the layer every head in a grid (--head N: head N alone)."),
    head: Optional[int] = typer.Option(None, "--head", metavar="N",
                                       help="With the layer's --plot: draw head N (from 0) alone."),
    precision: str = option(flags.PRECISION),
    racecheck: bool = option(flags.RACECHECK),
    timeout: Optional[float] = option(flags.TIMEOUT),
    threads: Optional[int] = option(flags.THREADS),
) -> None:
    """Run one attention head through the kernels and show shapes, statistics and timings.

    With --d-model/--n-head/--preset (or --x/--weights): the whole multi-head layer, x to output.
    With --fused: one fused kernel that never builds the T×T matrices; --precision bf16 runs the
    tensor-core kernel on bf16 copies of Q, K and V."""
    from andrea_cli.commands.attend import AttendOptions, run_attend

    options = AttendOptions(
        T=T, d_k=d_k, d_v=d_v, seed=seed, q=q, k=k, v=v, qkv=qkv, mask=mask, no_scale=no_scale,
        backend=backend, out=out, save_weights=save_weights, kernel=kernel, as_json=as_json,
        d_model=d_model, n_head=n_head, preset=preset, x=x, layer_weights=layer_weights,
        show_weights=show_weights, fused=fused, sample_rows=sample_rows, plot=plot, precision=precision,
        timeout=timeout, head=head, racecheck=racecheck)
    try:
        use_cpu_threads(threads)
        if plot is not None:
            from andrea_cli.render.plot_common import check_plot_path

            check_plot_path(plot)
        report = run_attend(options)
        if plot is not None:
            from andrea_cli.render.attend_plot import save_attend_report_plot

            save_attend_report_plot(report, plot, head=head)
    except AndreaError as exc:
        raise fail_on(exc) from None
    if as_json:
        print_json(report.to_json())
    else:
        from andrea_cli.render.attend import render_attend

        render_attend(console(), report, show_weights=show_weights)
        if plot is not None:
            console().print(f"plot saved to {plot}")


@app.command()
def grad(
    T: Optional[int] = option(flags.T),
    d_k: Optional[int] = option(flags.D_K),
    d_v: Optional[int] = option(flags.D_V),
    seed: int = option(flags.SEED, help="Seed of the random Q, K, V and dO."),
    q: Optional[Path] = option(flags.Q),
    k: Optional[Path] = option(flags.K),
    v: Optional[Path] = option(flags.V),
    qkv: Optional[Path] = option(flags.QKV),
    mask: str = option(flags.MASK),
    no_scale: bool = option(flags.NO_SCALE),
    backend: str = option(flags.BACKEND),
    kernel: Optional[Path] = option(flags.KERNEL),
    as_json: bool = option(flags.JSON),
    fused: bool = typer.Option(False, "--fused", help="The fused backward kernels; no T×T matrix (cuda, cpu)."),
    precision: str = option(flags.PRECISION, help="With --fused: fp32, or bf16 (the tensor-core forward and "
                                                     "backward; d_k = d_v = 64 or 128)."),
    d_out: Optional[Path] = typer.Option(None, "--d-out", help="The upstream gradient dO from a .npy (T, d_v)."),
    out: Optional[Path] = typer.Option(None, help="Save dq, dk, dv (the layer: dx, dw_q...) to one .npz."),
    d_model: Optional[int] = option(flags.D_MODEL, help="The whole layer's backward, from x (T, d_model)."),
    n_head: Optional[int] = option(flags.N_HEAD),
    preset: Optional[str] = option(flags.PRESET),
    x: Optional[Path] = option(flags.X),
    layer_weights: Optional[Path] = option(flags.LAYER_WEIGHTS),
    racecheck: bool = option(flags.RACECHECK),
) -> None:
    """The backward pass through the kernels: dQ, dK, dV from an upstream gradient dO.

    Shows the gradients' norms, how much of the gradient the softmax passes back to the scores,
    and per-stage timings. With --d-model/--n-head/--preset (or --x/--weights): the layer's dx and
    the gradients of W_Q, W_K, W_V, W_O."""
    from andrea_cli.commands.grad import GradOptions, run_grad

    options = GradOptions(T=T, d_k=d_k, d_v=d_v, seed=seed, q=q, k=k, v=v, qkv=qkv, mask=mask, no_scale=no_scale,
                          backend=backend, kernel=kernel, as_json=as_json, fused=fused, d_out=d_out, out=out,
                          d_model=d_model, n_head=n_head, preset=preset, x=x, layer_weights=layer_weights,
                          precision=precision, racecheck=racecheck)
    try:
        report = run_grad(options)
    except AndreaError as exc:
        raise fail_on(exc) from None
    if as_json:
        print_json(report.to_json())
    else:
        from andrea_cli.render.grad import render_grad

        render_grad(console(), report)


@app.command()
def verify(
    backend: str = option(flags.BACKEND, help="auto (cuda if a GPU answers, else cpu), cuda or cpu."),
    quick: bool = typer.Option(False, "--quick", help="A smaller sweep (seconds on the CPU build)."),
    T: Optional[int] = option(flags.T, help="Verify one case of this length."),
    d_k: Optional[int] = option(flags.D_K, help=f"Width for the one case [default: {DEFAULT_D_K}]."),
    d_v: Optional[int] = option(flags.D_V, help="Value width for the one case [default: d_k]."),
    mask: Optional[str] = option(flags.MASK, default=None,
                                  help="Mask for the one case: causal, none or window:W [default: causal]."),
    no_scale: bool = option(flags.NO_SCALE, help="The one case without scaling."),
    kernel: Optional[Path] = option(flags.KERNEL, help="Verify an edited copy of the kernel file."),
    sanitize: bool = typer.Option(False, "--sanitize", help="The CPU build under AddressSanitizer and "
                                  "UndefinedBehaviorSanitizer: out-of-bounds accesses with the kernel file's line."),
    racecheck: bool = option(flags.RACECHECK),
    timeout: Optional[float] = option(flags.TIMEOUT),
    threads: Optional[int] = option(flags.THREADS),
    as_json: bool = option(flags.JSON),
) -> None:
    """Check every stage of the kernel file against the float64 NumPy path over a sweep of shapes.

    Exit 0 when every case passes, 1 when any fails, 2 for bad usage."""
    from andrea_cli.commands.verify import VerifyOptions, run_verify_command

    options = VerifyOptions(backend=backend, quick=quick, T=T, d_k=d_k, d_v=d_v, mask=mask, no_scale=no_scale,
                            kernel=kernel, sanitize=sanitize, racecheck=racecheck, timeout=timeout)
    try:
        use_cpu_threads(threads)
        if as_json:
            report = run_verify_command(options)
        else:
            from andrea_cli.render.progress import progress_lines

            with progress_lines(err_console(), echo_err) as progress:
                report = run_verify_command(options, progress=progress)
    except AndreaError as exc:
        raise fail_on(exc) from None
    if as_json:
        print_json(report.to_json())
    else:
        from andrea_cli.render.verify import render_verify

        render_verify(console(), report)
    raise typer.Exit(0 if report.passed else 1)


@app.command()
def bench(
    side: str = typer.Option("auto", help="gpu, cpu, or auto (gpu when a device answers)."),
    T: Optional[list[int]] = option(flags.T, names=("--T", "-T"), help="Sequence lengths (repeat the flag)."),
    d_k: Optional[list[int]] = option(flags.D_K, help="Head widths [default: 64 and 128]."),
    mask: str = option(flags.MASK, default="both", help="causal, none, or both."),
    heads: Optional[int] = typer.Option(None, help="Heads per launch [default: 12 on GPU, 1 on CPU]."),
    repeats: int = typer.Option(5, help="Timed repeats per size (the median, min and max are reported)."),
    warmup: int = typer.Option(1, help="Untimed runs before the repeats."),
    no_cpu_build: bool = typer.Option(False, "--no-cpu-build", help="CPU side: skip the kernels' CPU build."),
    blas_threads: int = typer.Option(1, "--blas-threads", metavar="N",
                                     help="CPU side: BLAS/OpenMP threads of NumPy and torch, pinned per measurement."),
    impl: Optional[list[str]] = typer.Option(None, "--impl", metavar="NAME",
                                             help="Only this implementation (repeat the flag; the baseline runs too)."),
    kernel: Optional[Path] = option(flags.KERNEL),
    timeout: Optional[float] = option(flags.TIMEOUT),
    threads: Optional[int] = option(flags.THREADS),
    as_json: bool = option(flags.JSON, help="Print one JSON document instead of a table."),
    plot: Optional[Path] = option(flags.PLOT, help="Save time and TFLOP/s against T to FILE.png."),
    bound: bool = typer.Option(False, "--bound", help="No timing: each kernel's static bound on --gpu, read "
                                                      "from its SASS (no GPU needed; not a measurement)."),
    gpu: Optional[str] = typer.Option(None, "--gpu", help="With --bound: h200 (default), h100 or a100."),
) -> None:
    """Time the fused kernel and its peers over a sweep of T: ms, TFLOP/s, GB/s, roofline; --bound: static bounds."""
    if bound or gpu is not None:
        _bench_bound(bound, gpu, kernel, as_json, {"--side": side != "auto", "--T": bool(T), "--d-k": bool(d_k),
                     "--mask": mask != "both", "--heads": heads is not None, "--repeats": repeats != 5,
                     "--warmup": warmup != 1, "--no-cpu-build": no_cpu_build, "--timeout": timeout is not None,
                     "--blas-threads": blas_threads != 1, "--threads": threads is not None,
                     "--plot": plot is not None, "--impl": bool(impl)})
    from andrea_cli.commands.bench import BenchOptions, run_bench

    options = BenchOptions(side=side, T=T, d_k=d_k, mask=mask, heads=heads, repeats=repeats, warmup=warmup,
                           no_cpu_build=no_cpu_build, kernel=kernel, timeout=timeout, blas_threads=blas_threads,
                           impl=impl)
    try:
        use_cpu_threads(threads)
        if plot is not None:
            from andrea_cli.render.plot_common import check_plot_path

            check_plot_path(plot)
        from andrea_cli.render.progress import progress_lines

        with progress_lines(err_console(), echo_err) as progress:
            result = run_bench(options, progress=progress)
        if plot is not None:
            from andrea_cli.render.bench_plot import save_bench_plot

            save_bench_plot(result, plot)
    except AndreaError as exc:
        raise fail_on(exc) from None
    if as_json:
        print_json(result.to_json())
    else:
        from andrea_cli.render.bench import render_bench

        render_bench(console(), result)
        if plot is not None:
            console().print(f"plot saved to {plot}")


def _bench_bound(bound: bool, gpu: Optional[str], kernel: Optional[Path], as_json: bool,
                 others: dict[str, bool]) -> None:
    from andrea_cli.commands.bound import check_bound_options, run_bound

    try:
        check_bound_options(bound, gpu, others)
        report = run_bound(gpu, kernel)
    except AndreaError as exc:
        raise fail_on(exc) from None
    if as_json:
        print_json(report.to_json())
    else:
        from andrea_cli.render.bound import render_bound

        render_bound(console(), report)
    raise typer.Exit(0)


@app.command()
def info(as_json: bool = option(flags.JSON, help="Print one JSON document.")) -> None:
    """Versions, the kernel file in use, and which backends work here (and if not, why)."""
    from andrea_cli.commands.info import describe_environment

    try:
        document = describe_environment()
    except AndreaError as exc:
        raise fail_on(exc) from None
    if as_json:
        print_json(document)
    else:
        from andrea_cli.render.info import render_info

        render_info(console(), document)


@app.command("compare-scaling")
def compare_scaling(
    d_k: str = option(flags.D_K, default="64,256,4096", help="Comma-separated query/key widths."),
    T: int = option(flags.T, default=DEFAULT_T, help="Sequence length."),
    seed: int = option(flags.SEED),
    backend: str = option(flags.BACKEND),
    mask: str = option(flags.MASK),
    dist: str = typer.Option("normal", help="normal (unit-variance entries) or unit (unit-norm rows)."),
    kernel: Optional[Path] = option(flags.KERNEL),
    as_json: bool = option(flags.JSON, help="Print one JSON document instead of the table."),
    plot: Optional[Path] = option(flags.PLOT, help="Save histograms and heatmaps to FILE.png."),
) -> None:
    """Why divide by sqrt(d_k): each d_k run unscaled and scaled; score sizes, softmax peakiness and the
    gradients of the backward pass compared."""
    from andrea_cli.commands.compare_scaling import ScalingOptions, check_scaling_options, run_compare_scaling

    options = ScalingOptions(d_k=d_k, T=T, seed=seed, backend=backend, mask=mask, dist=dist, kernel=kernel)
    try:
        check_scaling_options(options)  # a bad option is named before a bad --plot file
        if plot is not None:
            from andrea_cli.render.plot_common import check_plot_path

            check_plot_path(plot)
        report = run_compare_scaling(options)
        if plot is not None:
            from andrea_cli.render.scaling_plot import save_scaling_plot

            save_scaling_plot(report, plot)
    except AndreaError as exc:
        raise fail_on(exc) from None

    if as_json:
        print_json(report.to_json())
    else:
        from andrea_cli.render.scaling import render_scaling

        render_scaling(console(), report)
        if plot is not None:
            console().print(f"plot saved to {plot}")


def _tidy_help(typer_app: typer.Typer) -> None:
    """--help as a learner reads it: Typer reads each help text as Rich markup, where a
    "[default: 1024]" is a tag and vanishes, so brackets are escaped; and a flag takes no value,
    so it shows no `<bool>` placeholder (_Command). Done on every option of every command, those
    added later too."""
    import inspect

    from rich.markup import escape

    callbacks = [typer_app.registered_callback.callback] if typer_app.registered_callback else []
    callbacks += [command.callback for command in typer_app.registered_commands]
    for callback in callbacks:
        for parameter in inspect.signature(callback).parameters.values():
            info = parameter.default
            if not isinstance(info, typer.models.OptionInfo):
                continue
            if info.help:
                info.help = escape(info.help)
    for command in typer_app.registered_commands:
        if command.cls in (None, typer.core.TyperCommand):
            command.cls = _Command


_tidy_help(app)


def _is_usage_error(exc: BaseException) -> bool:
    """Click's UsageError (bad option, bad value, missing argument) carries exit code 2. Typer
    vendors click in recent versions, so recognise it by shape rather than by import."""
    return getattr(exc, "exit_code", None) == 2 and hasattr(exc, "format_message")


def main(argv: list[str] | None = None) -> None:
    """Entry point: usage errors become one line and exit code 2, like andrea's own errors."""
    command = typer.main.get_command(app)
    try:
        code = command.main(args=argv, prog_name="andrea", standalone_mode=False)
    except Exception as exc:
        if _is_usage_error(exc):
            ctx = getattr(exc, "ctx", None)
            name = getattr(ctx, "info_name", None)
            where = f"andrea {name} --help" if name and name != "andrea" else "andrea --help"
            typer.echo(f"error: {exc.format_message()} (see {where})", err=True)
            sys.exit(2)
        if type(exc).__name__ == "Abort":  # Ctrl-C or end of input while prompting
            typer.echo("aborted", err=True)
            sys.exit(130)
        raise
    sys.exit(code if isinstance(code, int) else 0)
