"""The backend a run goes to, chosen in one place for attend, grad and compare-scaling."""

from __future__ import annotations

from pathlib import Path

from andrea_cli.backends import AUTO_ORDER, select_backend
from andrea_cli.backends.base import Backend
from andrea_cli.backends.launch.catalogue import resolve_kernel_path


def choose_backend(name: str, kernel: Path | None, *, fused: bool = False, on_device: bool = False,
                   timeout: float | None = None, racecheck: bool = False) -> tuple[Backend, list[str]]:
    """The backend `name` (an edited --kernel copy, if given) and the notices to show: for `auto`,
    which one and why. auto tries cuda, then the CPU build of the kernel file, then (where no C++
    compiler is found) numpy; a fused run has no NumPy path (it would build T×T); GPU arrays go to
    cuda only, where they are."""
    order = ("cuda",) if on_device else ("cuda", "cpu") if fused else AUTO_ORDER
    chosen, notice = select_backend(name, resolve_kernel_path(kernel), auto_order=order, timeout=timeout,
                                    racecheck=racecheck)
    return chosen, [notice] if notice else []


def check_plan(plan: str, *, fused: bool = False) -> None:
    """--plan, before any work: a known plan, and staged kernels to choose."""
    from andrea_cli.backends.launch.staged import NAMED_PLANS
    from andrea_cli.errors import AndreaError

    if plan not in NAMED_PLANS:
        raise AndreaError(f"--plan {plan!r} is not a plan: use one of {', '.join(NAMED_PLANS)}, "
                          "e.g. --plan textbook")
    if plan != "fast" and fused:
        raise AndreaError(f"--plan {plan} picks the staged kernels; --fused runs one fused kernel: drop one of them")


def use_plan(backend: Backend, plan: str) -> None:
    """--plan (checked): which staged kernels the kernel-file backend launches (fast, the default,
    or the course's textbook five). The NumPy path launches no kernels to choose."""
    from andrea_cli.backends.launch.staged import NAMED_PLANS
    from andrea_cli.errors import AndreaError

    if plan == "fast":
        return
    if not hasattr(backend, "plan"):
        raise AndreaError(f"--plan {plan} runs the kernel file's own kernels, which the {backend.name} backend does "
                          "not: use --backend cpu (or cuda on a GPU)")
    backend.plan = NAMED_PLANS[plan]
