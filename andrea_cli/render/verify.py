"""`andrea verify`'s report as Rich tables: failures first, then a summary."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from andrea_cli.verification import COLUMN_STAGES, STAGE_ORDER, VerifyReport


def _share(check) -> float:
    return check.max_abs_err / check.tol if check.tol else (0.0 if check.max_abs_err == 0 else float("inf"))


def _used(check) -> str:
    """The share of its tolerance a stage used at its worst element: 0 is exact, > 1 fails."""
    share = _share(check)
    text = "0" if share == 0 else f"{share:.0e}" if share < 0.01 else f"{share:.2f}"
    return text if check.passed else f"[bold red]{text}[/bold red]"


def _used_column(stages: dict, column: str) -> str:
    """A column's stage, or for a group the worst of its stages: a failing one first."""
    checks = [stages[name] for name in COLUMN_STAGES[column] if name in stages]
    if not checks:
        return "-"
    return _used(max([c for c in checks if not c.passed] or checks, key=_share))


def _geometry(plan) -> str:
    return plan.short()


def _where(r) -> str:
    return f"{r.case.label()} [{r.case.plan.describe()}, {r.schedule}]"


def render_verify(console: Console, report: VerifyReport) -> None:
    console.print(f"verify: the kernel file {escape(report.kernel_file)} on [bold]{report.backend}[/bold] "
                  f"({escape(report.device)}) against the float64 NumPy path")
    table = Table(title="Cases, failures first: per stage, the worst error as a share of its tolerance",
                  title_justify="left", caption="geom: scores/av kernel (1 one output per thread, 2 8x8 per "
                  "thread) · softmax kernel (1/threads a block per row, 2/rows a warp per row, 3 the row in "
                  "registers); schedule: threads run in order (fwd) or reversed (rev); bwd stages: the "
                  "backward's dv, dp, ds, dq, dk, each on its own inputs; bwd: its dQ, dK, dV end to end; fused bwd: "
                  "the logsumexp and the fused backward's dQ, dK, dV")
    for column in ("", "T", "d_k", "d_v", "mask", "÷√d", "geom", "sched", *STAGE_ORDER, "invariants"):
        table.add_column(column, justify="left" if column in ("", "mask", "÷√d", "sched", "invariants") else "right",
                         no_wrap=column in ("mask", "geom"))
    for r in report.results:
        c = r.case
        cells = ["[green]ok[/green]" if r.passed else "[bold red]FAIL[/bold red]", str(c.T), str(c.d_k), str(c.d_v),
                 str(c.mask), "yes" if c.scaled else "no", _geometry(c.plan), r.schedule[:3]]
        if r.error:  # the message is printed in full under the table
            cells += ["[red]error[/red]"] + [""] * (len(STAGE_ORDER) - 1) + ["[red]did not finish[/red]"]
        else:
            cells += [_used_column(r.stages, column) for column in STAGE_ORDER]
            broken = [name for name, ok in r.invariants.items() if not ok]
            cells.append("[green]hold[/green]" if not broken else f"[red]{', '.join(broken)}[/red]")
        table.add_row(*cells)
    console.print(table)
    for r in report.results:
        if r.error:
            console.print(f"[red]{escape(_where(r))}: {escape(r.error)}[/red]")
        if r.passed or r.error:
            continue
        for name, check in r.stages.items():
            if check.first_bad:
                b = check.first_bad
                console.print(f"[red]{escape(_where(r))}: {name} first differs at "
                              f"{b['index']}: got {b['got']!r}, expected {b['expected']!r} (tolerance {b['tol']:.2e})[/red]")
    failed = sum(not r.passed for r in report.results)
    verdict = "[bold green]PASSED[/bold green]" if report.passed else f"[bold red]FAILED[/bold red] ({failed} failing)"
    console.print(f"{verdict}: {len(report.results)} cases in {report.elapsed_s:.1f} s")
