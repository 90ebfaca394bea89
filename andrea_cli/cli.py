"""The `andrea` command line: each command parses, calls the core, renders, sets the exit code."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from andrea_cli.errors import AndreaError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="The attention equation softmax(mask(Q·K^T / sqrt(d_k)))·V, run on real kernels.",
)


def console() -> Console:
    return Console(highlight=False)


def print_json(document: dict) -> None:
    """JSON for scripts: plain stdout, never through Rich (which would wrap and colour it)."""
    typer.echo(json.dumps(document, indent=2, allow_nan=False))


def fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


@app.command()
def attend(
    T: Optional[int] = typer.Option(None, "--T", "-T", "--seq-len", help="Sequence length [default: 1024]."),
    d_k: Optional[int] = typer.Option(None, "--d-k", help="Query/key width per head [default: 64]."),
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
    fused: bool = typer.Option(False, "--fused", help="One fused kernel; no T×T matrix (cuda, cpu)."),
    sample_rows: int = typer.Option(0, "--sample-rows", help="With --fused: weight statistics on N rows."),
) -> None:
    """Run one attention head through the kernels and show shapes, statistics and timings."""
    from andrea_cli.backends import select_backend
    from andrea_cli.inputs import check_sizes, load_qkv, random_qkv
    from andrea_cli.kernel_file import resolve_kernel_path
    from andrea_cli.masks import parse_mask
    from andrea_cli.outputs import check_writable, save_npy_atomic
    from andrea_cli.pipeline import run_attention

    try:
        mask_spec = parse_mask(mask)
        check_writable(out, "--out")
        check_writable(save_weights, "--save-weights")
        if sample_rows < 0 or (sample_rows and not fused):
            raise AndreaError("--sample-rows N (N >= 0) goes with --fused; without it every row's statistics are shown")
        if fused and save_weights is not None:
            raise AndreaError("--save-weights needs the T×T weights, which --fused never builds: drop one of them")
        if any(p is not None for p in (q, k, v, qkv)):
            data = load_qkv(q, k, v, qkv)
            for flag, given, actual in (("--T", T, data.T), ("--d-k", d_k, data.d_k), ("--d-v", d_v, data.d_v)):
                if given is not None and given != actual:
                    raise AndreaError(f"{flag} {given} disagrees with the input files ({actual}); drop {flag} or fix the files")
        else:
            T = 1024 if T is None else T
            d_k = 64 if d_k is None else d_k
            check_sizes(T, d_k, d_k if d_v is None else d_v)
            from andrea_cli.inputs import check_fits_in_memory

            if not fused:
                check_fits_in_memory(1, T)  # before drawing T×d numbers, refuse what cannot fit
            data = random_qkv(T, d_k, d_k if d_v is None else d_v, seed)
        chosen, notice = select_backend(backend, resolve_kernel_path(kernel))
        if fused:
            from andrea_cli.fused_pipeline import run_fused_attention

            report = run_fused_attention(data, chosen, mask_spec, not no_scale, sample_rows,
                                         notices=[notice] if notice else [])
        else:
            report = run_attention(data, chosen, mask_spec, scaled=not no_scale,
                                   notices=[notice] if notice else [])
        if out is not None:
            save_npy_atomic(out, report.output)
        if save_weights is not None:
            save_npy_atomic(save_weights, report.weights)
    except AndreaError as exc:
        raise fail(str(exc)) from None

    if as_json:
        print_json(report.to_json())
    elif fused:
        from andrea_cli.render_fused import render_fused

        render_fused(console(), report)
    else:
        from andrea_cli.render import render_attend

        render_attend(console(), report)


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
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document instead of a table."),
) -> None:
    """Time the fused kernel and its peers over a sweep of T: ms, TFLOP/s, GB/s, roofline."""
    from andrea_cli import bench as core
    from andrea_cli import bench_peers
    from andrea_cli.backends.cuda import cuda_availability
    from andrea_cli.kernel_file import resolve_kernel_path

    try:
        if side not in ("auto", "gpu", "cpu") or mask not in ("causal", "none", "both"):
            raise AndreaError("--side takes auto, gpu or cpu; --mask takes causal, none or both")
        if min(list(T or [1]) + list(d_k or [1]) + [heads or 1, repeats]) < 1 or warmup < 0:
            raise AndreaError("--T, --d-k, --heads and --repeats must be >= 1 and --warmup >= 0")
        path = resolve_kernel_path(kernel)
        gpu = cuda_availability()
        if side == "gpu" and not gpu.ok:
            raise AndreaError(f"--side gpu: {gpu.reason}; {gpu.fix}")
        on_gpu = side == "gpu" or (side == "auto" and gpu.ok)
        causals = {"both": (False, True), "causal": (True,), "none": (False,)}[mask]
        common = dict(Ts=tuple(T or (core.GPU_T if on_gpu else core.CPU_T)), d_ks=tuple(d_k or core.D_KS),
                      causals=causals, warmup=warmup, repeats=repeats,
                      progress=lambda line: typer.echo(line, err=True))
        if on_gpu:
            result = bench_peers.bench_gpu(path, H=heads or 12, **common)
        else:
            result = bench_peers.bench_cpu(path, H=heads or 1, with_cpu_build=not no_cpu_build, **common)
            if side == "auto":
                result.notes.insert(0, f"CPU side only: {gpu.reason}; the GPU figures need a GPU run")
    except AndreaError as exc:
        raise fail(str(exc)) from None
    if as_json:
        print_json(result.to_json())
    else:
        from andrea_cli.render_bench import render_bench

        render_bench(console(), result)


@app.command()
def info(as_json: bool = typer.Option(False, "--json", help="Print one JSON document.")) -> None:
    """Versions, the kernel file in use, and which backends work here (and if not, why)."""
    from andrea_cli.environment import describe_environment

    try:
        document = describe_environment()
    except AndreaError as exc:
        raise fail(str(exc)) from None
    if as_json:
        print_json(document)
    else:
        from andrea_cli.render import render_info

        render_info(console(), document)


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
