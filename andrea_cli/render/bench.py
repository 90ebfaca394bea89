"""`andrea bench` results as Rich tables (JSON is the result's own to_json).

The widest layout that fits the console is drawn: one table with every column, or at 80 columns
one table per (d_k, mask) without the bandwidth column. Implementation names are never cut: a
fused row and a bf16 row must not read alike."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table

from andrea_cli.bench.sweep import BenchResult


def _num(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def _ms(x: float) -> str:
    """Milliseconds (or a ratio) to 3 significant figures (whole ones from 100 on, never an exponent)."""
    return f"{x:.0f}" if x >= 100 else f"{x:.3g}"


def _spread(m) -> str:
    """min–max of the repeats; one repeat has no spread."""
    if m.repeats < 2 or m.min_ms is None or m.max_ms is None:
        return "(1 run)"
    return f"{_ms(m.min_ms)}–{_ms(m.max_ms)}"


def _error_cell(m) -> str:
    """The row's error, red where it is over its tolerance (the width stays: layouts are measured)."""
    cell = _num(m.max_abs_err, ".1e")
    return f"[bold red]{cell}[/bold red]" if m.within_tolerance is False else cell


def wrong_rows(r: BenchResult) -> list[str]:
    """One line per implementation whose output was over its tolerance, naming the sizes."""
    wrong: dict[str, list] = {}
    for m in r.measurements:
        if m.within_tolerance is False:
            wrong.setdefault(m.impl, []).append(m)
    lines = []
    for impl, rows in wrong.items():
        worst = max(rows, key=lambda m: m.max_abs_err / m.tolerance if m.tolerance else float("inf"))
        where = ", ".join(f"T={m.T} d_k={m.d_k}{' causal' if m.causal else ''}" for m in rows)
        lines.append(f"WRONG: {impl} ({where}): max err {worst.max_abs_err:.1e} over the {worst.tolerance:.1e} "
                     f"a right {worst.precision} path keeps to; its times are of a wrong output")
    return lines


def _columns(r: BenchResult, layout: int) -> list[str]:
    """layout 0: every column; 1: a table per (d_k, mask), no GB/s; 2: that without "÷ bound"
    (measured / static bound, there only on a modelled GPU); 3 (80 columns): time, spread, ratio
    and error only."""
    gpu, peers = r.peak is not None, any(m.vs_peer is not None for m in r.measurements)
    bounds = any(m.measured_over_bound is not None for m in r.measurements)
    columns = ["impl"] + (["d_k", "mask"] if layout == 0 else []) + ["T", "ms", "min–max"]
    columns += ["TFLOP/s"] if layout < 3 else []
    columns += ["GB/s"] if layout == 0 else []
    columns += ["% peak", "roofline ms"] if gpu and layout < 3 else []
    columns += [f"× {r.baseline}", "max err"]
    columns += ["vs peer"] if peers and layout < 3 else []
    columns += ["÷ bound"] if bounds and layout < 2 else []
    return columns


def _cells(r: BenchResult, m, columns: list[str]) -> list[str]:
    values = {
        "impl": escape(m.impl if m.speed_path else f"{m.impl}*"), "d_k": str(m.d_k), "T": str(m.T),
        "mask": "causal" if m.causal else "none", "ms": _ms(m.median_ms), "min–max": _spread(m),
        "TFLOP/s": _num(m.tflops, ".3f"), "GB/s": _num(m.gbs, ".1f"), "% peak": _num(m.pct_peak, ".1f"),
        "roofline ms": "-" if m.roofline_ms is None else f"{m.roofline_ms:.3f} {m.bound[:3]}",
        f"× {r.baseline}": "-" if m.ratio is None else _ms(m.ratio), "max err": _error_cell(m), "vs peer": _num(m.vs_peer, ".2f"),
        "÷ bound": _num(m.measured_over_bound, ".2f"),
    }
    return [values[name] for name in columns]


def _table(r: BenchResult, measurements, columns: list[str], title: str | None = None, **options) -> Table:
    table = Table(title=title, title_justify="left", **options)
    for name in columns:  # no cell wraps or is cut: a layout is drawn only where it fits (bench_tables)
        table.add_column(name, justify="left" if name in ("impl", "mask") else "right", no_wrap=True)
    for m in measurements:
        table.add_row(*_cells(r, m, columns))
    return table


def _fits(console: Console, table: Table) -> bool:
    return Measurement.get(console, console.options.update_width(10_000), table).maximum <= console.width


def bench_tables(console: Console, r: BenchResult) -> list[Table]:
    """The widest layout whose every cell fits on one line at the console's width."""
    measured = [m for m in r.measurements if m.median_ms is not None]
    wide = _table(r, measured, _columns(r, 0))
    if _fits(console, wide):
        return [wide]
    panels = dict.fromkeys((m.d_k, m.causal) for m in measured)
    for layout in (1, 2, 3):
        tables = [_table(r, [m for m in measured if (m.d_k, m.causal) == panel], _columns(r, layout),
                         title=f"d_k = {panel[0]}, {'causal' if panel[1] else 'no'} mask", box=box.SIMPLE_HEAD,
                         collapse_padding=True)  # one space between columns: the 80-column layout fits
                  for panel in panels]
        if layout == 3 or all(_fits(console, t) for t in tables):
            return tables
    raise AssertionError("unreachable")


def print_bench_kernels(console: Console, r) -> None:
    """What each kernel-file row launched, once per row (the same at every size it ran)."""
    ran: dict[str, list[str]] = {}
    for m in r.measurements:
        if m.kernels and m.impl not in ran:
            ran[m.impl] = m.kernels
    for impl, kernels in ran.items():
        console.print(f"[dim]{escape(impl)} ran {escape(', '.join(kernels))}[/dim]")


def _us(ms: float) -> str:
    return _ms(ms * 1e3)


def decode_table(r: BenchResult) -> Table:
    """One step of generation per row: each kernel's time, the cache it read, GB/s against HBM."""
    cpu_build = any(not m.speed_path for m in r.decode)
    heads = r.decode[0].H
    t = Table(title=f"decode: one step of {heads} head{'s' * (heads > 1)} at each cache length, kernel times in µs"
              + ("\n(the CPU build: not a speed path)" if cpu_build else ""), box=box.SIMPLE_HEAD,
              collapse_padding=True)
    for name in ("cache", "d_k", "keys", "append", "decode", "merge", "MB read", "GB/s", "% HBM", "max err"):
        t.add_column(name, justify="left" if name == "cache" else "right", no_wrap=True)
    for m in r.decode:
        share = "no GPU" if m.hbm_gbs is None else f"{100 * m.share_of_hbm:.1f}"
        t.add_row(m.precision + ("*" if not m.speed_path else ""), str(m.d_k), f"{m.S:,}",
                  *(_us(m.median_ms[s]) for s in ("append", "decode", "merge")), f"{m.cache_bytes / 1e6:.3g}",
                  f"{m.gbs:.3g}", share, f"{m.max_abs_err:.1e}")
    return t


def render_bench(console: Console, r: BenchResult) -> None:
    console.print(f"[bold]andrea bench[/bold] on {escape(r.device)}: ms is the median of {r.repeats} after "
                  f"{r.warmup} warm-up, min–max their spread; × {r.baseline} = ms / {r.baseline} ms at the same size")
    for note in r.notes:
        console.print(f"[yellow]{escape(note)}[/yellow]")
    skipped = {}
    for m in r.measurements:
        if m.median_ms is None:
            skipped.setdefault((m.impl, m.skipped), []).append(m.T)
    tables = bench_tables(console, r)
    for table in tables:
        console.print(table)
    shown = {column.header for column in tables[0].columns} if tables else set()
    dropped = [name for name in _columns(r, 0) if tables and name not in shown and name not in ("d_k", "mask")]
    if dropped:
        console.print(f"[dim]{', '.join(dropped)}: in a wider terminal, or with --json[/dim]")
    for line in wrong_rows(r):
        console.print(f"[bold red]{escape(line)}[/bold red]")
    if any(not m.speed_path for m in r.measurements):
        console.print("* not a speed path: the kernel file on the CPU, for correctness")
    for (impl, why), Ts in skipped.items():
        console.print(f"[dim]{escape(impl)} skipped at T={','.join(map(str, sorted(set(Ts))))}: {escape(why)}[/dim]")
    if r.decode:
        console.print(decode_table(r))
        for kernels in dict.fromkeys(tuple(m.kernels) for m in r.decode):
            console.print(f"[dim]decode rows ran {escape(', '.join(kernels))}[/dim]")
    print_bench_kernels(console, r)
    chose: dict[tuple[str, str], list[int]] = {}
    for m in r.measurements:
        if m.chose:
            chose.setdefault((m.impl, m.chose), []).append(m.T)
    for (impl, backend), Ts in chose.items():
        console.print(f"[dim]{escape(impl)} ran SDPA's {escape(backend)} backend at "
                      f"T={','.join(map(str, sorted(set(Ts))))}[/dim]")
