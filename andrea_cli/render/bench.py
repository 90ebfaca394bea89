"""`andrea bench` results as a Rich table (JSON is the result's own to_json)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from andrea_cli.bench.sweep import BenchResult


def _num(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def render_bench(console: Console, r: BenchResult) -> None:
    console.print(f"[bold]andrea bench[/bold] on {escape(r.device)}: median of {r.repeats} after {r.warmup} warm-up; "
                  f"× {r.baseline} = ms / {r.baseline} ms at the same size")
    for note in r.notes:
        console.print(f"[yellow]{escape(note)}[/yellow]")
    gpu = r.peak is not None
    table = Table()
    columns = ["impl", "T", "d_k", "mask", "ms", "TFLOP/s", "GB/s"]
    columns += ["% peak", "roofline ms"] if gpu else []
    columns += [f"× {r.baseline}", "max err"]
    peers = any(m.vs_peer is not None for m in r.measurements)
    columns += ["vs peer"] if peers else []
    for name in columns:
        table.add_column(name, justify="left" if name in ("impl", "mask") else "right")
    skipped = {}
    for m in r.measurements:
        if m.median_ms is None:
            skipped.setdefault((m.impl, m.skipped), []).append(m.T)
            continue
        row = [m.impl if m.speed_path else f"{m.impl}*", str(m.T), str(m.d_k), "causal" if m.causal else "none",
               f"{m.median_ms:.3f}", _num(m.tflops, ".3f"), _num(m.gbs, ".1f")]
        if gpu:
            row += [_num(m.pct_peak, ".1f"), "-" if m.roofline_ms is None else f"{m.roofline_ms:.3f} {m.bound[:3]}"]
        row += [_num(m.ratio, ".2f"), _num(m.max_abs_err, ".1e")]
        row += [_num(m.vs_peer, ".2f")] if peers else []
        table.add_row(*row)
    console.print(table)
    if any(not m.speed_path for m in r.measurements):
        console.print("* not a speed path: the kernel file on the CPU, for correctness")
    for (impl, why), Ts in skipped.items():
        console.print(f"[dim]{escape(impl)} skipped at T={','.join(map(str, sorted(set(Ts))))}: {escape(why)}[/dim]")
