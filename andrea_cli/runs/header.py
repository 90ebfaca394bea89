"""What every run's report opens with, and its JSON: where it ran (backend, device), on what
(source, the sizes, the shapes) and how the equation was set (mask, scale). AttentionReport,
FusedReport, GradReport and LayerGradReport are a RunHeader and their own fields."""

from __future__ import annotations

from dataclasses import dataclass

from andrea_cli.masks import MaskSpec
from andrea_cli.reference import given_scale, scale_for


@dataclass
class RunHeader:
    backend: str
    device: str
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
        return {"backend": self.backend, "device": self.device, "source": self.source, **(after_source or {}),
                "T": self.T, "L": self.T, "S": self.S, **(after_T or {}), "d_k": self.d_k, "d_v": self.d_v, "mask": self.mask,
                "scaled": bool(self.scaled), "scale": self.scale, "scale_given": given_scale(self.scaled), **(after_scale or {}), "shapes": self.shapes}


def header_fields(backend, *, source: str, T: int, d_k: int, d_v: int, mask: MaskSpec, scaled: bool,
                  shapes: dict[str, list[int]], S: int | None = None) -> dict:
    """A report's header fields for a run on `backend` (a Backend: its name and device): T (= L)
    queries against S keys (S = T unless given)."""
    return dict(backend=backend.name, device=backend.device_name(), source=source, T=T, S=T if S is None else S,
                d_k=d_k, d_v=d_v,
                mask=str(mask), scaled=scaled, scale=scale_for(d_k, scaled), shapes=shapes)
