"""The `andrea` command line, Typer only: each command's flags are built from its options
dataclass (commands/options); the command calls commands/X.py, renders with render/X.py (or
prints JSON) and sets the exit code."""

from __future__ import annotations

import inspect
import os
from contextlib import contextmanager
import sys
import warnings
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from andrea_cli.commands.options import (AttendOptions, BenchOptions, Declared, GenerateOptions, GradOptions,
                                         InfoOptions, ScalingOptions, VerifyOptions, from_command_line,
                                         on_command_line)
from andrea_cli.errors import AndreaError, KernelError, SetupError


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


def typer_parameter(d: Declared) -> inspect.Parameter:
    """One declared option as Typer reads it: a keyword parameter whose default is a typer.Option.
    Typer reads a help text as Rich markup, where "[default: 1024]" is a tag and vanishes: escaped."""
    option = d.option
    default, hint = (False, bool) if option.off_switch else (option.default, d.hint)
    info = typer.Option(default, *option.flags, help=escape(option.help), metavar=option.metavar)
    return inspect.Parameter(d.name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=hint)


def one_line_paragraphs(doc: str | None) -> str | None:
    """A docstring's paragraphs each on one line: Rich keeps a docstring's line breaks in --help, so
    a paragraph wrapped at 100 columns in the source came out ragged in an 80-column terminal."""
    if doc is None:
        return None
    paragraphs = inspect.cleandoc(doc).split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


def command(options_class, name: str | None = None):
    """Registers a function of one argument, the command's options dataclass, as a command: Typer
    sees a signature built from the options' declarations, and the docstring as --help."""

    def register(run):
        def parse(**values):
            return run(from_command_line(options_class, values))

        parse.__signature__ = inspect.Signature([typer_parameter(d) for d in on_command_line(options_class)])
        parse.__doc__ = one_line_paragraphs(run.__doc__)
        app.command(name or run.__name__, cls=_Command)(parse)
        return run

    return register


def console() -> Console:
    return Console(highlight=False, emoji=False)  # emoji=False: an error's "file.cu:1234:" stays text, no emoji


def err_console() -> Console:
    return Console(stderr=True, highlight=False, emoji=False)


def echo_err(line: str) -> None:
    typer.echo(line, err=True)


def build_progress():
    """A transient line on stderr while the CPU build compiles (a first run only)."""
    from andrea_cli.render.build_progress import build_progress as progress

    return progress(err_console())


@contextmanager
def long_waits():
    """The progress line of a command that reports its own steps, which also says when the CPU
    build compiles (on a terminal: one live line at a time, so the compile's goes into it)."""
    from andrea_cli.render.progress import progress_lines

    errors = err_console()
    with progress_lines(errors, echo_err) as progress:
        if not errors.is_terminal or errors.is_dumb_terminal:
            yield progress
            return
        from andrea_cli.backends.cpu_runtime.build_notice import announce_builds

        with announce_builds(progress, lambda: progress("compiled; running")):
            yield progress


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
    """Exit 1 when the kernel file did something wrong while it ran or this environment cannot
    run it, 2 for bad usage."""
    return fail(str(exc), 1 if isinstance(exc, (KernelError, SetupError)) else 2)


def check_plot(plot: Path | None) -> None:
    if plot is not None:
        from andrea_cli.render.plot_common import check_plot_path

        check_plot_path(plot)


def print_plot_saved(plot: Path | None) -> None:
    print_saved(("plot", plot))


def print_saved(*files: tuple[str, Path | None]) -> None:
    """One line per file a run wrote (--out, --save-weights, --plot), after the report."""
    for what, path in files:
        if path is not None:
            console().print(f"{what} saved to {escape(str(path))}", soft_wrap=True)


@command(AttendOptions)
def attend(o: AttendOptions) -> None:
    """Run one attention head through the kernels and show shapes, statistics and timings.

    With --d-model/--n-head/--preset (or --x/--weights): the whole multi-head layer, x to output.
    With --fused: one fused kernel that never builds the T×T matrices; --precision bf16 runs the
    tensor-core kernel on bf16 copies of Q, K and V.

    With --T-q L --T-k S (or --q/--k/--v files of L and S rows): L queries
    against S keys. Causal then puts the queries last (bottom-right, as
    FlashAttention >= 2.1): query i sees keys 0..i+S-L. For torch's top-left
    is_causal (keys 0..i): andrea_cli.scaled_dot_product_attention."""
    from andrea_cli.commands.attend import run_attend

    try:
        use_cpu_threads(o.threads)
        check_plot(o.plot)
        with long_waits() as progress:  # a large T runs for many seconds; a first run compiles
            report = run_attend(o, progress=progress)
        if o.plot is not None:
            from andrea_cli.render.attend_plot import save_attend_report_plot

            save_attend_report_plot(report, o.plot, head=o.head)
    except AndreaError as exc:
        raise fail_on(exc) from None
    if o.json:
        print_json(report.to_json())
    else:
        from andrea_cli.render.attend import render_attend

        render_attend(console(), report, show_weights=o.show_weights)
        print_saved(("output", o.out), ("weights", o.save_weights), ("plot", o.plot))
    if o.strict and getattr(report, "check", None) is not None and not report.check.agrees:
        raise typer.Exit(1)  # --strict: a run that is not the equation fails (the report said where)


@command(GradOptions)
def grad(o: GradOptions) -> None:
    """The backward pass through the kernels: dQ, dK, dV from an upstream gradient dO.

    Shows the gradients' norms, how much of the gradient the softmax passes back to the scores,
    and per-stage timings. With --d-model/--n-head/--preset (or --x/--weights): the layer's dx and
    the gradients of W_Q, W_K, W_V, W_O."""
    from andrea_cli.commands.grad import run_grad

    try:
        with build_progress():
            report = run_grad(o)
    except AndreaError as exc:
        raise fail_on(exc) from None
    if o.json:
        print_json(report.to_json())
    else:
        from andrea_cli.render.grad import render_grad

        render_grad(console(), report)
        print_saved(("gradients", o.out))


@command(GenerateOptions)
def generate(o: GenerateOptions) -> None:
    """Generate one token at a time: T steps, each appending its k and v to a KV cache and attending
    with its query alone (the decode kernels), against one causal pass over all T positions (the
    same numbers, to rounding) and one unmasked pass (not: the future it could not have seen)."""
    from andrea_cli.commands.generate import check_generate_options, run_generate_command

    try:
        use_cpu_threads(o.threads)
        check_generate_options(o)  # a bad option is named before a bad --plot file
        check_plot(o.plot)
        with long_waits() as line:
            def progress(done: int, total: int) -> None:
                # a count where the wait is long (the CPU build: ~7 ms a step), ten lines at most in a log
                if total >= 256 and (done == total or done % max(1, total // 10) == 0):
                    line(f"generating: step {done} of {total}")

            report = run_generate_command(o, progress=None if o.json else progress)
        if o.plot is not None:
            from andrea_cli.render.generate_plot import save_generate_plot

            save_generate_plot(report, o.plot)
    except AndreaError as exc:
        raise fail_on(exc) from None
    if o.json:
        print_json(report.to_json())
    else:
        from andrea_cli.render.generate import render_generate

        render_generate(console(), report)
        print_plot_saved(o.plot)


@command(VerifyOptions)
def verify(o: VerifyOptions) -> None:
    """Check every stage of the kernel file against the float64 NumPy path over a sweep of shapes.

    Exit 0 when every case passes, 1 when any fails, 2 for bad usage."""
    from andrea_cli.commands.verify import run_verify_command

    try:
        use_cpu_threads(o.threads)
        if o.json:
            report = run_verify_command(o)
        else:
            from andrea_cli.render.progress import progress_lines

            with progress_lines(err_console(), echo_err) as progress:
                report = run_verify_command(o, progress=progress)
    except AndreaError as exc:
        raise fail_on(exc) from None
    if o.json:
        print_json(report.to_json())
    else:
        from andrea_cli.render.verify import render_verify

        render_verify(console(), report)
    raise typer.Exit(0 if report.passed else 1)


@command(BenchOptions)
def bench(o: BenchOptions) -> None:
    """Time the fused kernel and its peers over a sweep of T: ms, TFLOP/s, GB/s, roofline; --bound: static bounds."""
    if o.bound or o.gpu is not None:
        bench_bound(o)
    from andrea_cli.commands.bench import run_bench

    try:
        use_cpu_threads(o.threads)
        check_plot(o.plot)
        from andrea_cli.render.progress import progress_lines

        with progress_lines(err_console(), echo_err) as progress:
            result = run_bench(o, progress=progress)
        if o.plot is not None:
            from andrea_cli.render.bench_plot import save_bench_plot

            save_bench_plot(result, o.plot)
    except AndreaError as exc:
        raise fail_on(exc) from None
    if o.json:
        print_json(result.to_json())
    else:
        from andrea_cli.render.bench import render_bench

        render_bench(console(), result)
        print_plot_saved(o.plot)
    # a row over its tolerance is a wrong kernel: reported above (or in the JSON), and the exit
    # status says so to a script, as verify's does
    raise typer.Exit(1 if any(m.within_tolerance is False for m in result.measurements) else 0)


def bench_bound(o: BenchOptions) -> None:
    from andrea_cli.commands.bound import check_bound_options, run_bound

    try:
        check_bound_options(o)
        from andrea_cli.render.progress import progress_lines

        with progress_lines(err_console(), echo_err) as progress:  # a compile of 15-40 s: say what runs
            report = run_bound(o.gpu, o.kernel, progress=progress)
    except AndreaError as exc:
        raise fail_on(exc) from None
    if o.json:
        print_json(report.to_json())
    else:
        from andrea_cli.render.bound import render_bound

        render_bound(console(), report)
    raise typer.Exit(0)


@command(InfoOptions)
def info(o: InfoOptions) -> None:
    """Versions, the kernel file in use, and which backends work here (and if not, why)."""
    from andrea_cli.commands.info import describe_environment

    try:
        document = describe_environment()
    except AndreaError as exc:
        raise fail_on(exc) from None
    if o.json:
        print_json(document)
    else:
        from andrea_cli.render.info import render_info

        render_info(console(), document)


@command(ScalingOptions, name="compare-scaling")
def compare_scaling(o: ScalingOptions) -> None:
    """Why divide by sqrt(d_k): each d_k run unscaled and scaled; score sizes, softmax peakiness and the
    gradients of the backward pass compared."""
    from andrea_cli.commands.compare_scaling import check_scaling_options, run_compare_scaling

    try:
        check_scaling_options(o)  # a bad option is named before a bad --plot file
        check_plot(o.plot)
        with build_progress():
            report = run_compare_scaling(o)
        if o.plot is not None:
            from andrea_cli.render.scaling_plot import save_scaling_plot

            save_scaling_plot(report, o.plot)
    except AndreaError as exc:
        raise fail_on(exc) from None
    if o.json:
        print_json(report.to_json())
    else:
        from andrea_cli.render.scaling import render_scaling

        render_scaling(console(), report)
        print_plot_saved(o.plot)


def _is_usage_error(exc: BaseException) -> bool:
    """Click's UsageError (bad option, bad value, missing argument) carries exit code 2. Typer
    vendors click in recent versions, so recognise it by shape rather than by import."""
    return getattr(exc, "exit_code", None) == 2 and hasattr(exc, "format_message")


def main(argv: list[str] | None = None) -> None:
    """Entry point: usage errors become one line and exit code 2, like andrea's own errors."""
    group = typer.main.get_command(app)
    try:
        code = group.main(args=argv, prog_name="andrea", standalone_mode=False)
    except KeyboardInterrupt:  # Ctrl-C outside a command's body (Typer turns one inside into 130)
        code = 130
    except Exception as exc:
        if _is_usage_error(exc):
            ctx = getattr(exc, "ctx", None)
            name = getattr(ctx, "info_name", None)
            where = f"andrea {name} --help" if name and name != "andrea" else "andrea --help"
            typer.echo(f"error: {exc.format_message()} (see {where})", err=True)
            sys.exit(2)
        if type(exc).__name__ != "Abort":  # Abort: Ctrl-C or end of input while prompting
            raise
        code = 130
    if code == INTERRUPTED:
        say_interrupted()
        # Out at once: the interpreter's own shutdown (joining threads, finalizers) can take the
        # pending interrupt again and end the process by SIGINT itself (exit -2, seen about 1 run in
        # 10), where a script waits for 130
        if argv is None:  # the real process (a test calling main(args) keeps its interpreter)
            sys.stdout.flush()
            os._exit(INTERRUPTED)
    sys.exit(code if isinstance(code, int) else 0)


INTERRUPTED = 130  # the shells' code for a command ended by SIGINT; no command of andrea exits so itself


def say_interrupted() -> None:
    """One word on stderr. On a terminal the line is cleared first, taking the terminal's echoed
    "^C" with it (a progress line was already erased by its own context)."""
    clear = "\r\x1b[2K" if sys.stderr.isatty() else ""
    sys.stderr.write(f"{clear}interrupted\n")
    sys.stderr.flush()
