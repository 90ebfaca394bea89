"""`andrea bench --bound` as a Rich table that fits 80 columns: per kernel its resources, the
pipe that binds and the bound in TFLOP/s (JSON: the report's own to_json)."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from andrea_cli.bench.bound.report import NOT_MEASURED, BoundReport, KernelBound

NEAR_TIE = 0.95  # a runner-up this close to the bottleneck is shown beside it: either may bind
SHORT_PREFIX = "attention_"  # dropped from the kernel column, which must fit
SHORT_BACKWARD = ("backward_", "bwd_")  # and abbreviated there: attention_backward_dkdv_kernel2_d128 is long


def short_name(kernel: str) -> str:
    """A kernel's name as the table shows it."""
    return kernel.removeprefix(SHORT_PREFIX).replace(*SHORT_BACKWARD)


def binds(k: KernelBound) -> str:
    b = k.full
    if b is None:
        return "-"
    if b.seconds[b.runner_up] >= NEAR_TIE * b.time_s:
        return f"{b.bottleneck}/{b.runner_up}"
    return b.bottleneck


def runner_up(k: KernelBound) -> str:
    """The next pipe and how busy it is while the bottleneck is saturated."""
    b = k.full
    if b is None or b.seconds[b.runner_up] >= NEAR_TIE * b.time_s:
        return "-"
    return f"{b.runner_up} {100 * b.seconds[b.runner_up] / b.time_s:.0f}%"


def render_bound(console: Console, r: BoundReport) -> None:
    g = r.gpu
    console.print(f"[bold]andrea bench --bound[/bold]: {escape(r.kernel_path.name)} on {escape(g.name)} ({g.arch})")
    console.print(f"[yellow]{NOT_MEASURED}[/yellow]: the least time each kernel's hot loop allows, read "
                  f"from its SASS, at T {r.T:,}, {r.heads} heads, d 64 (_d128 kernels: 128), no mask")
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True, pad_edge=False, show_edge=False)
    for name, justify in (("kernel", "left"), ("regs", "right"), ("KB", "right"), ("w/SM", "right"),
                          ("binds", "left"), ("TFLOP/s", "right"), ("%pk", "right"), ("next", "left")):
        table.add_column(name, justify=justify, no_wrap=name != "kernel")
    for k in r.kernels:
        b = k.full
        table.add_row(
            escape(short_name(k.kernel)) + ("[red]*[/red]" if k.spill_bytes else ""),
            str(k.registers), f"{k.shared_bytes / 1024:.0f}",
            "-" if k.warps_per_sm is None else str(k.warps_per_sm), binds(k),
            "-" if b is None or b.tflops is None else f"{b.tflops:.1f}",
            "-" if b is None or b.peak_fraction is None else f"{100 * b.peak_fraction:.0f}",
            runner_up(k),
        )
    console.print(table)
    console.print(f"peaks: FP32 {g.fp32_peak_tflops:.1f}, BF16 tensor {g.bf16_peak_tflops:.0f} TFLOP/s (%pk: "
                  f"of the one its products run on); HBM {g.hbm_gbs / 1000:.2f} TB/s; shared "
                  f"{g.shared_bytes_per_clock} B/clk/SM; sources in andrea_cli/bench/bound/gpus.py")
    mma = "" if g.mma_sync_fraction == 1 else f"; mma.sync at {g.mma_sync_fraction:.0%} of the tensor rate"
    console.print(f"assumed: every pipe at {g.tensor_clock_ghz} GHz in a kernel with tensor-core work, "
                  f"{g.clock_ghz} GHz without{mma}; shared accesses charged the wavefronts of their "
                  "lane addresses where the SASS gives them, else conflict-free")
    console.print("binds: the pipe the hot loop saturates first (a/b: within 5%); next: the runner-up's "
                  "load then. TFLOP/s: FlashAttention's count; KB: shared memory per block; w/SM: "
                  f"resident warps; kernel names less '{SHORT_PREFIX}', '{SHORT_BACKWARD[0]}' as "
                  f"'{SHORT_BACKWARD[1]}'")
    for note in r.notes:
        console.print(f"[yellow]no geometry from {escape(note)}[/yellow]")
    for k in r.kernels:
        for note in k.notes:
            console.print(f"[dim]{escape(k.kernel)}: {escape(note)}[/dim]")
