"""--variant: one fused kernel picked by name (attend --fused; kernel1-3 in fp32, kernel4-7 with
--precision bf16), checked against the precision, the head's widths and the device before it
runs. The names are the kernel table's (catalogue.py): attention_fused_kernel7, kernel7 or 7."""

from __future__ import annotations

from andrea_cli.backends.launch.catalogue import family, variant_named, why_it_cannot_run
from andrea_cli.backends.launch.kernel_spec import Kernel
from andrea_cli.errors import AndreaError

FAMILIES = {"fp32": ("fused", "fused"), "bf16": ("fused_bf16", "fused")}  # --precision -> the kernels it runs


def kernels_of(precision: str) -> dict[int, Kernel]:
    return family(*FAMILIES[precision])


def short_name(k: Kernel) -> str:
    """kernel7 for attention_fused_kernel7: the name the choices list."""
    return k.stem.rsplit("_", 1)[-1]


def choose_variant(name: str | None, precision: str, fused: bool) -> int | None:
    """The variant --variant names among the precision's fused kernels; None: not given (the
    launcher picks the device's fastest). Refused in one line: without --fused, an unknown name,
    a kernel of the other precision."""
    if name is None:
        return None
    if not fused:
        raise AndreaError(f"--variant {name} picks a fused kernel: add --fused")
    variant = variant_named(str(name), *FAMILIES[precision])
    if variant is not None:
        return variant
    choices = ", ".join(short_name(k) for k in kernels_of(precision).values())
    other = next(p for p in FAMILIES if p != precision)
    if variant_named(str(name), *FAMILIES[other]) is not None:
        fix = "add --precision bf16" if other == "bf16" else "drop --precision bf16"
        raise AndreaError(f"--variant {name} is a{'n' if other == 'fp32' else ''} {other} kernel: {fix}, "
                          f"or choose from {choices}")
    raise AndreaError(f"--variant {name}: no such {precision} fused kernel; choose from {choices} "
                      "(or attention_fused_kernelN, or N)")


def check_variant_runs(variant: int | None, precision: str, d_k: int, d_v: int, cc: tuple[int, int] | None) -> None:
    """The kernel chosen takes these widths and runs on the device (cc: its compute capability;
    None, the CPU build, runs every kernel, the tensor cores, TMA and mbarriers emulated)."""
    if variant is None:
        return
    k = kernels_of(precision)[variant]
    if not k.takes(d_k, d_v):
        raise AndreaError(f"--variant {short_name(k)}: {k.stem} needs {k.needs()} (got d_k {d_k}, d_v {d_v})")
    why = why_it_cannot_run(k, cc)
    if why:
        raise AndreaError(f"--variant {short_name(k)}: {why}")

