"""The `andrea` command line, Typer only: each command parses its options, calls commands/X.py,
renders with render/X.py (or prints JSON) and sets the exit code."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from andrea_cli.defaults import DEFAULT_D_K, DEFAULT_T
from andrea_cli.errors import AndreaError, KernelError

app = typer.Typer(
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


def console() -> Console:
    return Console(highlight=False)


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
    T: Optional[int] = typer.Option(None, "--T", "-T", "--seq-len", help=f"Sequence length [default: {DEFAULT_T}]."),
    d_k: Optional[int] = typer.Option(None, "--d-k", help=f"Query/key width per head [default: {DEFAULT_D_K}]."),
    d_v: Optional[int] = typer.Option(None, "--d-v", help="Value width [default: d_k]."),
    seed: int = typer.Option(0, help="Seed of the random Q, K, V."),
    q: Optional[Path] = typer.Option(None, "--q", help="Q from a 2-D .npy file (T, d_k)."),
    k: Optional[Path] = typer.Option(None, "--k", help="K from a 2-D .npy file (T, d_k)."),
    v: Optional[Path] = typer.Option(None, "--v", help="V from a 2-D .npy file (T, d_v)."),
    qkv: Optional[Path] = typer.Option(None, "--qkv", help="Q, K, V from one .npz with arrays q, k, v."),
    mask: str = typer.Option("causal", help="causal, none, or window:W (query i sees i-W+1..i)."),
    no_scale: bool = typer.Option(False, "--no-scale", help="Skip the division by sqrt(d_k)."),
    backend: str = typer.Option("auto", help="auto, cuda, cpu or numpy."),
    out: Optional[Path] = typer.Option(None, help="Save the (T, d_v) output as float32 .npy."),
    save_weights: Optional[Path] = typer.Option(None, help="Save the (T, T) weights as float32 .npy."),
    kernel: Optional[Path] = typer.Option(None, help="Run an edited copy of the kernel file."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document instead of tables."),
    d_model: Optional[int] = typer.Option(None, "--d-model", help="Run the whole multi-head layer from x (T, d_model)."),
    n_head: Optional[int] = typer.Option(None, "--n-head", help="Heads of the layer [default: d_model / d_k]."),
    preset: Optional[str] = typer.Option(None, help="andrea-120m: the layer at d_model 768, 12 heads, T 1024."),
    x: Optional[Path] = typer.Option(None, "--x", help="The layer's input x from a 2-D .npy file (T, d_model)."),
    layer_weights: Optional[Path] = typer.Option(None, "--weights", help="w_q, w_k, w_v, w_o from one .npz."),
    show_weights: bool = typer.Option(False, "--show-weights", help="Draw the (T, T) weights in the terminal."),
    fused: bool = typer.Option(False, "--fused", help="One fused kernel; no T×T matrix (cuda, cpu)."),
    sample_rows: int = typer.Option(0, "--sample-rows", help="With --fused: weight statistics on N rows."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Save the weights, row entropy and largest weight to FILE.png."),
    precision: str = typer.Option("fp32", "--precision",
                                  help="With --fused: fp32, or bf16 (tensor cores; d_k = d_v = 64 or 128)."),
    timeout: Optional[float] = typer.Option(None, "--timeout", metavar="SECONDS",
                                            help="CPU build: the most CPU seconds one block of a launch may run "
                                                 "(default: 2 s, more for a larger launch)."),
    threads: Optional[int] = typer.Option(None, "--threads", metavar="N",
                                          help="CPU build: OS threads a launch's blocks are spread over "
                                               "(default: every core)."),
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
        timeout=timeout)
    try:
        use_cpu_threads(threads)
        if plot is not None:
            from andrea_cli.render.plot_common import check_plot_path

            check_plot_path(plot)
        report = run_attend(options)
        if plot is not None:
            from andrea_cli.render.attend_plot import save_attend_report_plot

            save_attend_report_plot(report, plot)
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
    T: Optional[int] = typer.Option(None, "--T", "-T", "--seq-len", help=f"Sequence length [default: {DEFAULT_T}]."),
    d_k: Optional[int] = typer.Option(None, "--d-k", help=f"Query/key width per head [default: {DEFAULT_D_K}]."),
    d_v: Optional[int] = typer.Option(None, "--d-v", help="Value width [default: d_k]."),
    seed: int = typer.Option(0, help="Seed of the random Q, K, V and dO."),
    q: Optional[Path] = typer.Option(None, "--q", help="Q from a 2-D .npy file (T, d_k)."),
    k: Optional[Path] = typer.Option(None, "--k", help="K from a 2-D .npy file (T, d_k)."),
    v: Optional[Path] = typer.Option(None, "--v", help="V from a 2-D .npy file (T, d_v)."),
    qkv: Optional[Path] = typer.Option(None, "--qkv", help="Q, K, V from one .npz with arrays q, k, v."),
    mask: str = typer.Option("causal", help="causal, none, or window:W (query i sees i-W+1..i)."),
    no_scale: bool = typer.Option(False, "--no-scale", help="Skip the division by sqrt(d_k)."),
    backend: str = typer.Option("auto", help="auto, cuda, cpu or numpy."),
    kernel: Optional[Path] = typer.Option(None, help="Run an edited copy of the kernel file."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document instead of tables."),
    fused: bool = typer.Option(False, "--fused", help="The fused backward kernels; no T×T matrix (cuda, cpu)."),
    d_out: Optional[Path] = typer.Option(None, "--d-out", help="The upstream gradient dO from a .npy (T, d_v)."),
    out: Optional[Path] = typer.Option(None, help="Save dq, dk, dv (the layer: dx, dw_q...) to one .npz."),
    d_model: Optional[int] = typer.Option(None, "--d-model", help="The whole layer's backward, from x (T, d_model)."),
    n_head: Optional[int] = typer.Option(None, "--n-head", help="Heads of the layer [default: d_model / d_k]."),
    preset: Optional[str] = typer.Option(None, help="andrea-120m: the layer at d_model 768, 12 heads, T 1024."),
    x: Optional[Path] = typer.Option(None, "--x", help="The layer's input x from a 2-D .npy file (T, d_model)."),
    layer_weights: Optional[Path] = typer.Option(None, "--weights", help="w_q, w_k, w_v, w_o from one .npz."),
) -> None:
    """The backward pass through the kernels: dQ, dK, dV from an upstream gradient dO.

    Shows the gradients' norms, how much of the gradient the softmax passes back to the scores,
    and per-stage timings. With --d-model/--n-head/--preset (or --x/--weights): the layer's dx and
    the gradients of W_Q, W_K, W_V, W_O."""
    from andrea_cli.commands.grad import GradOptions, run_grad

    options = GradOptions(T=T, d_k=d_k, d_v=d_v, seed=seed, q=q, k=k, v=v, qkv=qkv, mask=mask, no_scale=no_scale,
                          backend=backend, kernel=kernel, as_json=as_json, fused=fused, d_out=d_out, out=out,
                          d_model=d_model, n_head=n_head, preset=preset, x=x, layer_weights=layer_weights)
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
    backend: str = typer.Option("auto", help="auto (cuda if a GPU answers, else cpu), cuda or cpu."),
    quick: bool = typer.Option(False, "--quick", help="A smaller sweep (seconds on the CPU build)."),
    T: Optional[int] = typer.Option(None, "--T", "-T", "--seq-len", help="Verify one case of this length."),
    d_k: Optional[int] = typer.Option(None, "--d-k", help=f"Width for the one case [default: {DEFAULT_D_K}]."),
    d_v: Optional[int] = typer.Option(None, "--d-v", help="Value width for the one case [default: d_k]."),
    mask: Optional[str] = typer.Option(None, help="Mask for the one case: causal, none or window:W [default: causal]."),
    no_scale: bool = typer.Option(False, "--no-scale", help="The one case without scaling."),
    kernel: Optional[Path] = typer.Option(None, help="Verify an edited copy of the kernel file."),
    sanitize: bool = typer.Option(False, "--sanitize", help="The CPU build under AddressSanitizer and "
                                  "UndefinedBehaviorSanitizer: out-of-bounds accesses with the kernel file's line."),
    timeout: Optional[float] = typer.Option(None, "--timeout", metavar="SECONDS",
                                            help="CPU build: the most CPU seconds one block of a launch may run "
                                                 "(default: 2 s, more for a larger launch)."),
    threads: Optional[int] = typer.Option(None, "--threads", metavar="N",
                                          help="CPU build: OS threads a launch's blocks are spread over "
                                               "(default: every core)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document instead of tables."),
) -> None:
    """Check every stage of the kernel file against the float64 NumPy path over a sweep of shapes.

    Exit 0 when every case passes, 1 when any fails, 2 for bad usage."""
    from andrea_cli.commands.verify import run_verify_command

    try:
        use_cpu_threads(threads)
        report = run_verify_command(backend, quick=quick, T=T, d_k=d_k, d_v=d_v, mask=mask,
                                    scaled=not no_scale, kernel=kernel, show_progress=not as_json,
                                    sanitize=sanitize, timeout=timeout)
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
    T: Optional[list[int]] = typer.Option(None, "--T", "-T", help="Sequence lengths (repeat the flag)."),
    d_k: Optional[list[int]] = typer.Option(None, "--d-k", help="Head widths [default: 64 and 128]."),
    mask: str = typer.Option("both", help="causal, none, or both."),
    heads: Optional[int] = typer.Option(None, help="Heads per launch [default: 12 on GPU, 1 on CPU]."),
    repeats: int = typer.Option(5, help="Timed repeats per size (the median is reported)."),
    warmup: int = typer.Option(1, help="Untimed runs before the repeats."),
    no_cpu_build: bool = typer.Option(False, "--no-cpu-build", help="CPU side: skip the kernels' CPU build."),
    kernel: Optional[Path] = typer.Option(None, help="Run an edited copy of the kernel file."),
    timeout: Optional[float] = typer.Option(None, "--timeout", metavar="SECONDS",
                                            help="CPU build: the most CPU seconds one block of a launch may run "
                                                 "(default: 2 s, more for a larger launch)."),
    threads: Optional[int] = typer.Option(None, "--threads", metavar="N",
                                          help="CPU build: OS threads a launch's blocks are spread over "
                                               "(default: every core)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document instead of a table."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Save time and TFLOP/s against T to FILE.png."),
) -> None:
    """Time the fused kernel and its peers over a sweep of T: ms, TFLOP/s, GB/s, roofline."""
    from andrea_cli.commands.bench import BenchOptions, run_bench

    options = BenchOptions(side=side, T=T, d_k=d_k, mask=mask, heads=heads, repeats=repeats, warmup=warmup,
                           no_cpu_build=no_cpu_build, kernel=kernel, timeout=timeout)
    try:
        use_cpu_threads(threads)
        if plot is not None:
            from andrea_cli.render.plot_common import check_plot_path

            check_plot_path(plot)
        result = run_bench(options, progress=lambda line: typer.echo(line, err=True))
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


@app.command()
def info(as_json: bool = typer.Option(False, "--json", help="Print one JSON document.")) -> None:
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
    d_k: str = typer.Option("64,256,4096", "--d-k", help="Comma-separated query/key widths."),
    T: int = typer.Option(DEFAULT_T, "--T", "-T", "--seq-len", help="Sequence length."),
    seed: int = typer.Option(0, help="Seed of the random Q, K, V."),
    backend: str = typer.Option("auto", help="auto, cuda, cpu or numpy."),
    mask: str = typer.Option("causal", help="causal, none, or window:W (query i sees i-W+1..i)."),
    dist: str = typer.Option("normal", help="normal (unit-variance entries) or unit (unit-norm rows)."),
    kernel: Optional[Path] = typer.Option(None, help="Run an edited copy of the kernel file."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document instead of the table."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Save histograms and heatmaps to FILE.png."),
) -> None:
    """Why divide by sqrt(d_k): each d_k run unscaled and scaled; score sizes, softmax peakiness and the
    gradients of the backward pass compared."""
    from andrea_cli.commands.compare_scaling import ScalingOptions, check_scaling_options, run_compare_scaling

    options = ScalingOptions(d_k=d_k, T=T, seed=seed, backend=backend, mask=mask, dist=dist, kernel=kernel)
    try:
        request = check_scaling_options(options)
        if plot is not None:
            from andrea_cli.render.plot_common import check_plot_path

            check_plot_path(plot)
        report = run_compare_scaling(request)
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
