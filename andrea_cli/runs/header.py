"""What every run's report opens with, and its JSON: where it ran (backend, device, the kernel
file and each stage's kernel), on what
(source, the sizes, the shapes) and how the equation was set (mask, scale). AttentionReport,
FusedReport, GradReport and LayerGradReport are a RunHeader and their own fields."""

from __future__ import annotations

from dataclasses import dataclass

from pathlib import Path

from andrea_cli.kernel_file import packaged_kernel_path
from andrea_cli.masks import MaskSpec
from andrea_cli.reference import given_scale, scale_for


@dataclass
class RunHeader:
    backend: str
    device: str
    kernel_file: str | None  # the kernel file that ran (the installed copy, or --kernel FILE); None: NumPy
    kernel_file_installed: bool  # the installed copy (edits to a checkout's cuda/ need --kernel)
    kernels: dict[str, str]  # {stage: the kernel it ran}, in launch order; {} on the NumPy path
    source: str  # "random (seed 0)", or the files the inputs came from
    T: int  # the queries, L
    S: int  # the keys and values: T, unless the run attends L queries to S keys
    d_k: int
    d_v: int
    mask: str
    scaled: bool | float  # True: 1/sqrt(d_k); False: --no-scale; a float: the factor given (the Python API)
    scale: float  # the factor applied to the scores: 1/sqrt(d_k), 1.0 with --no-scale, or the one given
    shapes: dict[str, list[int]]

    def header_json(self, *, after_source: dict | None = None, after_T: dict | None = None,
                    after_scale: dict | None = None) -> dict:
        """The header's keys, each report's own ones where its JSON has always had them (the fused
        run's after source, the layer's sizes after T, grad's `fused` after scale)."""
        return {"backend": self.backend, "device": self.device, "kernel_file": self.kernel_file,
                "kernel_file_installed": self.kernel_file_installed, "kernels": self.kernels,
                "source": self.source, **(after_source or {}),
                "T": self.T, "L": self.T, "S": self.S, **(after_T or {}), "d_k": self.d_k, "d_v": self.d_v,
                "mask": self.mask,
                "scaled": bool(self.scaled), "scale": self.scale, "scale_given": given_scale(self.scaled), **(after_scale or {}), "shapes": self.shapes}


def kernel_file_of(backend) -> tuple[str | None, bool]:
    """The kernel file a backend runs, as given (None: the NumPy path), and whether it is the
    installed copy."""
    path = getattr(backend, "kernel_path", None)
    if path is None:
        return None, False
    return str(path), Path(path).resolve() == packaged_kernel_path().resolve()


def header_fields(backend, *, source: str, T: int, d_k: int, d_v: int, mask: MaskSpec, scaled: bool,
                  shapes: dict[str, list[int]], kernels: dict[str, str] | None = None, S: int | None = None) -> dict:
    """A report's header fields for a run on `backend` (a Backend: its name and device) that ran
    `kernels` ({stage: kernel}, as the launchers return them): T (= L) queries against S keys
    (S = T unless given)."""
    kernel_file, installed = kernel_file_of(backend)
    return dict(backend=backend.name, device=backend.device_name(), kernel_file=kernel_file,
                kernel_file_installed=installed, kernels=dict(kernels or {}), source=source, T=T,
                S=T if S is None else S, d_k=d_k, d_v=d_v,
                mask=str(mask), scaled=scaled, scale=scale_for(d_k, scaled), shapes=shapes)
