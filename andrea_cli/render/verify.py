"""`andrea verify`'s report as Rich tables: failures first, then a summary.

The table has three layouts and the widest that fits the console without cutting a cell is
drawn: every stage its own column (about 230 columns), a column per kernel family (about 110),
and at 80 columns the case, its launch and its worst stage. Each keeps the ok/FAIL verdict."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from andrea_cli.render.common import stage_label
from andrea_cli.verification import COLUMN_STAGES, FAMILIES, STAGE_ORDER, VerifyReport

CAPTION_GEOMETRY = ("geom: scores/av kernel (1 one output per thread, 2 8x8 per thread) · softmax kernel "
                    "(1/threads a block per row, 2/rows a warp per row, 3 the row in registers); schedule: threads "
                    "run in order (fwd) or reversed (rev)")
CAPTION_STAGES = ("bwd stages: the backward's dv, dp, ds, dq, dk, each on its own inputs; bwd: its dQ, dK, dV end "
                  "to end; fused bwd: the logsumexp and the fused backward's dQ, dK, dV")


def _share(check) -> float:
    return check.max_abs_err / check.tol if check.tol else (0.0 if check.max_abs_err == 0 else float("inf"))


def _share_text(check) -> str:
    """The share of its tolerance a stage used at its worst element: 0 is exact, > 1 fails."""
    share = _share(check)
    text = "0" if share == 0 else f"{share:.0e}" if share < 0.01 else f"{share:.2f}"
    return text if check.passed else f"[bold red]{text}[/bold red]"


def _worst(stages: dict, names) -> tuple[str, object] | None:
    """The worst of these stages: a failing one first, else the largest share of its tolerance."""
    checks = [(name, stages[name]) for name in names if name in stages]
    if not checks:
        return None
    return max([c for c in checks if not c[1].passed] or checks, key=lambda c: _share(c[1]))


def _cell(stages: dict, names) -> str:
    worst = _worst(stages, names)
    return "-" if worst is None else _share_text(worst[1])


SCHEDULES = {"forward": "fwd", "reverse": "rev"}  # the CPU build's thread orders; "gpu" as it is


def _schedule(r) -> str:
    return SCHEDULES.get(r.schedule, r.schedule)


def _where(r) -> str:
    return f"{r.case.label()} [{r.case.plan.describe()}, {r.schedule}]"


def _verdict(r) -> str:
    return "[green]ok[/green]" if r.passed else "[bold red]FAIL[/bold red]"


def _invariants(r) -> str:
    broken = [name for name, ok in r.invariants.items() if not ok]
    return "[green]hold[/green]" if not broken else f"[red]{', '.join(broken)}[/red]"


def _table(title: str, caption: str, columns, rows, **table_options) -> Table:
    table = Table(title=title, title_justify="left", caption=caption, caption_justify="left", **table_options)
    for n, (name, justify) in enumerate(columns):
        # the verdict and the case never wrap, nor are cut: a verdict cut to "F…" is no verdict. A
        # header of several words may wrap, down to its longest word or its widest cell
        widest = max([Text.from_markup(cells[n]).cell_len for cells in rows] + [max(map(len, name.split() or [""]))])
        table.add_column(name, justify=justify, no_wrap=name in NO_WRAP, min_width=4 if name == "" else None,
                         max_width=widest if " " in name and name not in NO_WRAP else None)
    for cells in rows:
        table.add_row(*cells)
    return table


CASE = "case T×d_k×d_v mask"
COMPACT_CASE = "case T×d_k(×d_v) mask"
NO_WRAP = ("", "mask", "geom", CASE, COMPACT_CASE)


def _case_cells(r) -> list[str]:
    c = r.case
    return [str(c.T), str(c.d_k), str(c.d_v), str(c.mask), "yes" if c.scaled else "no", c.plan.short(), _schedule(r)]


CASE_COLUMNS = [("", "left"), ("T", "right"), ("d_k", "right"), ("d_v", "right"), ("mask", "left"),
                ("÷√d", "left"), ("geom", "right"), ("sched", "left")]


def full_table(report: VerifyReport) -> Table:
    """Every stage in its own column."""
    rows = []
    for r in report.results:
        cells = [_verdict(r), *_case_cells(r)]
        if r.error:  # the message is printed in full under the table
            cells += ["[red]error[/red]"] + [""] * (len(STAGE_ORDER) - 1) + ["[red]stopped early[/red]"]
        else:
            cells += [_cell(r.stages, COLUMN_STAGES[column]) for column in STAGE_ORDER] + [_invariants(r)]
        rows.append(cells)
    # "fused5_bf16" headed "fused5 bf16": a header that may wrap to two lines, six columns wide
    columns = CASE_COLUMNS + [(stage_label(name).replace("_", " "), "right") for name in STAGE_ORDER] + \
        [("invariants", "left")]
    return _table("Cases, failures first: per stage, the worst error as a share of its tolerance",
                  f"{CAPTION_GEOMETRY}; {CAPTION_STAGES}", columns, rows)


def family_table(report: VerifyReport) -> Table:
    """A column per kernel family, each the worst of its stages."""
    family_stages = {family.name: family.stages for family in FAMILIES}
    rows = []
    for r in report.results:
        cells = [_verdict(r), *_case_cells(r)]
        if r.error:
            cells += ["[red]error[/red]"] + [""] * (len(FAMILIES) - 1) + ["[red]stopped early[/red]"]
        else:
            cells += [_cell(r.stages, family_stages[f.name]) for f in FAMILIES] + [_invariants(r)]
        rows.append(cells)
    columns = CASE_COLUMNS + [(f.header or f.name, "right") for f in FAMILIES] + [("invariants", "left")]
    return _table("Cases, failures first: per kernel family, the worst error as a share of its tolerance",
                  f"{CAPTION_GEOMETRY}. A wider terminal shows each stage.", columns, rows)


def compact_table(report: VerifyReport) -> Table:
    """80 columns: the case, its launch, and its worst stage by name."""
    rows = []
    for r in report.results:
        c = r.case
        # d_v only where it differs from d_k: the longest cases (38 wide) left their worst stage no room
        widths = f"{c.d_k}" if c.d_v == c.d_k else f"{c.d_k}×{c.d_v}"
        case = f"{c.shape_text()}×{widths} {c.mask}{'' if c.scaled else ' unscaled'}"
        run = f"{c.plan.short()} {_schedule(r)}"
        if r.error:
            worst = "[red]error: stopped early[/red]"
        else:
            name, check = _worst(r.stages, list(r.stages))
            worst = f"{escape(stage_label(name))} {_share_text(check)}"
            broken = [name for name, ok in r.invariants.items() if not ok]
            if broken:  # a failing case only: its cell may wrap, its verdict stays whole
                worst += f" [red]· {escape(', '.join(broken))}[/red]"
        rows.append([_verdict(r), case, run, worst])
    # No invariants column: "hold" on every passing row cost the worst stage the width it needs
    # to stay on one line ("weighted sum (av) 0.09" wrapped to three); a broken invariant is
    # named in the cell, after the stage.
    columns = [("", "left"), (COMPACT_CASE, "left"), ("geom sched", "left"), ("worst stage", "left")]
    return _table("Cases, failures first: the worst stage's error as a share of its tolerance",
                  f"Case: T×d_k, ×d_v where it differs. {CAPTION_GEOMETRY}. A broken invariant is named after "
                  "the worst stage. "
                  "A wider terminal shows each stage.", columns, rows, box=box.SIMPLE_HEAD,
                  pad_edge=False, collapse_padding=True)  # one space between columns, none at the edges:
    # the longest case (34 wide), the widest geometry (12) and "weighted sum (av) 0.09" fit 80


def fits(console: Console, table: Table) -> bool:
    """Whether the table's every cell fits on one line at the console's width."""
    wide = console.options.update_width(10_000)
    return Measurement.get(console, wide, table).maximum <= console.width


def verify_table(console: Console, report: VerifyReport) -> Table:
    """The widest layout that fits; the 80-column one otherwise."""
    for layout in (full_table, family_table):
        table = layout(report)
        if fits(console, table):
            return table
    return compact_table(report)


FIRST_DIFFERS_SHOWN = 3  # per stage: enough to see the pattern of one bug, not a screen of it


def render_verify(console: Console, report: VerifyReport) -> None:
    console.print(f"verify: the kernel file {escape(report.kernel_file)} on [bold]{report.backend}[/bold] "
                  f"({escape(report.device)}) against the float64 NumPy path")
    console.print(verify_table(console, report))
    shown: dict[str, int] = {}  # stage -> "first differs" lines printed; one bug fails many cases
    for r in report.results:
        if r.error:
            console.print(f"[red]{escape(_where(r))}: {escape(r.error)}[/red]")
        if r.passed or r.error:
            continue
        for name, check in r.stages.items():
            if check.first_bad:
                shown[name] = shown.get(name, 0) + 1
                if shown[name] > FIRST_DIFFERS_SHOWN:
                    continue
                b = check.first_bad
                console.print(f"[red]{escape(_where(r))}: {name} first differs at "
                              f"{b['index']}: got {b['got']!r}, expected {b['expected']!r} (tolerance {b['tol']:.2e})[/red]")
    for name, count in shown.items():
        if count > FIRST_DIFFERS_SHOWN:
            rest = count - FIRST_DIFFERS_SHOWN
            console.print(f"[red]{name} differs in {rest} more case{'s' if rest > 1 else ''} "
                          "(--json lists every one)[/red]")
    failed = sum(not r.passed for r in report.results)
    verdict = "[bold red]FAILED[/bold red] ({failed} failing)".format(failed=failed) if not report.passed \
        else "[bold green]PASSED[/bold green]"
    console.print(f"{verdict}: {len(report.results)} cases in {report.elapsed_s:.1f} s")
