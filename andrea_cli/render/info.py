"""`andrea info` for people: versions, the kernel file, and which backends work here."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table


def render_info(console: Console, doc: dict) -> None:
    versions = Table(title="andrea", title_justify="left", show_header=False)
    versions.add_column("")
    versions.add_column("")
    for key in ("andrea", "python", "numpy", "cupy", "cuda_runtime", "cuda_driver", "nvrtc", "gpu", "cxx"):
        value = doc.get(key)
        error = doc.get(f"{key}_error")
        versions.add_row(key, escape(str(value)) if value is not None else f"[dim]not available{escape(': ' + error) if error else ''}[/dim]")
    cuda = doc["cuda"]
    versions.add_row("cupy package", escape(", ".join(cuda["cupy_wheels"]) or "none"))
    if doc.get("compiled_for"):
        versions.add_row("kernels built as", escape(doc["compiled_for"]))
    extra = (f'pip install "andrea[{cuda["extra"]}]" (the driver speaks CUDA {cuda["driver"]})' if cuda["driver"] else
             'no NVIDIA driver here: "andrea[cuda13]" goes with a CUDA 13 driver, "andrea[cuda12]" with CUDA 12')
    versions.add_row("GPU extra", escape(extra))
    if cuda["problem"]:
        versions.add_row("[red]CUDA mismatch[/red]", f"[red]{escape(cuda['problem'])}[/red]; {escape(cuda['fix'])}")
    versions.add_row("kernels", ", ".join(doc["kernels"]))
    console.print(versions)
    # paths to copy: never cut or folded by a table cell; one that does not fit beside its label
    # goes on a line of its own, so the terminal splits it only where no line could hold it
    for label, key in (("kernel file", "kernel_file"), ("CPU build cache", "cpu_build_cache")):
        line = f"{label}: {doc[key]}"
        console.print(escape(line) if len(line) <= console.width else f"{label}:\n  {escape(doc[key])}", soft_wrap=True)
    console.print(escape(doc["edit_kernel"]))
    table = Table(title="Backends", title_justify="left")
    table.add_column("backend")
    table.add_column("works here")
    table.add_column("why not / what to do")
    for name, status in doc["backends"].items():
        ok = status["available"]
        table.add_row(name, "[green]yes[/green]" if ok else "[red]no[/red]",
                      "" if ok else escape(f"{status['reason']}; {status['fix']}"))
    console.print(table)
    surface = Table(title="The CPU build runs (RawModule, --backend cpu)", title_justify="left", show_header=False)
    surface.add_column("", style="bold")
    surface.add_column("")
    for what, detail in doc["cpu_build"]["supports"].items():
        surface.add_row(what, escape(detail))
    for what, detail in doc["cpu_build"]["refuses"].items():
        surface.add_row(f"[red]refuses[/red] {escape(what)}", escape(detail))
    console.print(surface)
    races = Table(title="racecheck (verify --racecheck, --backend cpu --racecheck): data races a GPU "
                  "could expose", title_justify="left", show_header=False)
    races.add_column("", style="bold")
    races.add_column("")
    for what, detail in doc["cpu_build"].get("racecheck", {}).items():
        races.add_row(escape(what), escape(detail))
    console.print(races)
