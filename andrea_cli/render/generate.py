"""generate's report for people: what ran, a sample of the steps, and the two verdicts (the
causal pass is generation, to rounding; the unmasked pass is not)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from andrea_cli.render.common import fmt, print_header
from andrea_cli.render.kernels import kernel_lines
from andrea_cli.runs.generate import GenerateReport, sampled_positions


def _bytes(n: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{int(n)} B"


def render_generate(console: Console, r: GenerateReport) -> None:
    print_header(console, r.notices, f"[bold]generation, one token at a time[/bold]  T={r.T} d_k={r.d_k} "
                 f"d_v={r.d_v} mask={r.mask} cache {r.precision}", r.backend, r.device, r.source)
    for line in kernel_lines(r.kernels, r.kernel_file, r.kernel_file_installed):
        console.print(line)

    table = Table(title="Steps (a sample): position t's query against the t + 1 cached keys",
                  title_justify="left")
    for header in ("t", "keys read", "cache read", "step ms", "|gen - causal|", "|gen - unmasked|"):
        table.add_column(header, justify="right")
    step_ms = r.step_ms
    for t in sampled_positions(r.T):
        s = r.steps[t]
        table.add_row(str(t), str(s.keys), _bytes(s.bytes_read), fmt(step_ms[t]), fmt(r.vs_causal[t]),
                      fmt(r.vs_unmasked[t]))
    console.print(table)

    verdict = "[green]the same[/green]" if r.agrees else "[red]NOT the same[/red]"
    console.print(f"generation against one causal pass over all {r.T} positions: {verdict}, max |difference| "
                  f"{fmt(float(r.vs_causal.max()))} (each within verify's bound of the float64 equation: "
                  f"{r.generation_error:.2g} and {r.causal_error:.2g} of it)")
    far = int(r.vs_unmasked.argmax())
    console.print(f"one unmasked pass instead (every position sees the future): max |difference| "
                  f"{fmt(float(r.vs_unmasked.max()))} at position {far}, mean {fmt(float(r.vs_unmasked.mean()))}; "
                  f"the last position, which sees every key anyway, {fmt(float(r.vs_unmasked[-1]))}. A model "
                  "trained that way learns from outputs generation can never produce: the shortcut the causal "
                  "mask removes.")
    total_ms = float(step_ms.sum())
    console.print(f"time: {r.T} steps in {fmt(total_ms)} ms; the decode kernel read {_bytes(r.bytes_read)} of "
                  f"cache at {fmt(r.decode_gbs)} GB/s")
    if r.hbm_gbs:
        console.print(f"  {r.decode_gbs / r.hbm_gbs:.0%} of this GPU's memory bandwidth ({fmt(r.hbm_gbs)} GB/s): "
                      "a decode step is bound by the bytes it reads, not by arithmetic")
    else:
        console.print("  on the CPU build: a check of the kernels, not a GPU figure")
