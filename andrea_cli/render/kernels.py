"""The lines that say what ran: each stage's kernel, and the kernel file it came from (the
installed copy, or --kernel FILE), so an edit that did not run is never a mystery."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape


def kernel_lines(kernels: dict[str, str], kernel_file: str | None, installed: bool) -> list[str]:
    """Rich markup lines. kernels: {stage: kernel}, in launch order; kernel_file None: NumPy."""
    if kernel_file is None:
        return ["ran: no kernels, the NumPy reference (--backend cpu runs the kernel file)"]
    names = ", ".join(f"[bold]{escape(name)}[/bold]" for name in kernels.values()) or "none"
    if installed:
        where = "from the installed kernel file (an edited copy: --kernel cuda/microgpt_cuda.cu)"
    else:
        where = f"from --kernel {escape(kernel_file)}"
    return [f"ran: {names}", where]  # "ran: " and the five names fit 80 columns


def print_kernels(console: Console, report) -> None:
    """report: any RunHeader (attend's, grad's and their layer and fused runs)."""
    for line in kernel_lines(report.kernels, report.kernel_file, report.kernel_file_installed):
        console.print(line)


def verdict_line(report) -> str | None:
    """One line when a run is not the equation: the first stage that differs, and where to see
    why. None when it agrees, or when nothing was checked (the NumPy path)."""
    check = getattr(report, "check", None)
    if check is None or check.agrees:
        return None
    w = check.where or {}
    at = f" (row {w['row']}" + (f", key {w['column']}" if "column" in w else "") + \
        f": got {w['got']:.6g}, expected {w['expected']:.6g})" if w else ""
    verify = "andrea verify" if report.kernel_file_installed else f"andrea verify --kernel {report.kernel_file}"
    return (f"not the equation: {check.first_differs} differs from the float64 reference on sampled "
            f"rows{at}; to see why: {verify}")


def print_verdict(console: Console, report) -> None:
    line = verdict_line(report)
    if line is not None:
        console.print(f"[bold red]{escape(line)}[/bold red]")
