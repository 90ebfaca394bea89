"""The backend a run goes to, chosen in one place for attend, grad and compare-scaling."""

from __future__ import annotations

from pathlib import Path

from andrea_cli.backends import select_backend
from andrea_cli.backends.base import Backend
from andrea_cli.backends.launch.catalogue import resolve_kernel_path


def choose_backend(name: str, kernel: Path | None, *, fused: bool = False, on_device: bool = False,
                   timeout: float | None = None, racecheck: bool = False) -> tuple[Backend, list[str]]:
    """The backend `name` (an edited --kernel copy, if given) and the notices to show: for `auto`,
    which one and why. auto tries cuda first, then numpy; for a fused run the CPU build instead
    (the NumPy path would build T×T); GPU arrays go to cuda only, where they are."""
    order = ("cuda",) if on_device else ("cuda", "cpu") if fused else ("cuda", "numpy")
    chosen, notice = select_backend(name, resolve_kernel_path(kernel), auto_order=order, timeout=timeout,
                                    racecheck=racecheck)
    return chosen, [notice] if notice else []
