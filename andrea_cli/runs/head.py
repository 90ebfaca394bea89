"""One attention run on a backend, turned into a report: shapes, statistics, timings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from andrea_cli import stats
from andrea_cli.backends.base import Backend, StageOutputs
from andrea_cli.inputs import QKV
from andrea_cli.masks import MaskSpec
from andrea_cli.overflow import overflow_notice
from andrea_cli.reference import scale_for
from andrea_cli.runs.header import RunHeader, header_fields

CORNER = 8  # rows and columns of the weight matrix shown, like the course's triangle picture


@dataclass
class AttentionReport(RunHeader):
    weight_stats: stats.WeightStats  # over every head together
    timings_ms: dict[str, float]
    transfer_ms: dict[str, float]
    load_ms: float
    corner: list[list[float]]
    masked_corner: list[list[float]] = field(default_factory=list)  # the mask stage's output there: -inf where hidden
    notices: list[str] = field(default_factory=list)
    weights: np.ndarray | None = field(default=None, repr=False)  # (T, T); (H, T, T) for several heads
    output: np.ndarray | None = field(default=None, repr=False)  # (T, d_v); (H, T, d_v) from (H, T, d) inputs
    scores: np.ndarray | None = field(default=None, repr=False)  # Q·K^T before scaling, shaped like weights
    device_output: Any = field(default=None, repr=False)  # the output on the GPU (cuda), shaped like output
    check: Any = None  # a Verdict: sampled rows of each stage against float64; None where NumPy ran

    def to_json(self) -> dict:
        return {
            **self.header_json(),
            **self.weight_stats.to_json(),
            "timings_ms": self.timings_ms,
            "transfer_ms": self.transfer_ms,
            "load_ms": self.load_ms,
            "corner": self.corner,
            "masked_corner": self.masked_corner,  # -inf as "-inf" (JSON has no infinity)
            "notices": self.notices,
            "check": self.check.to_json() if self.check is not None else None,
        }


def heads(a):
    """(T, d) -> (1, T, d): the kernels take a head dimension; one head is H = 1. (H, T, d) as it is."""
    return a if len(a.shape) == 3 else a[None, :, :]


def input_shapes(qkv: QKV) -> dict[str, list[int]]:
    """The report's shapes, with the head axis where the inputs have one: q (L, d_k), k (S, d_k),
    v (S, d_v)."""
    lead = [] if qkv.H is None else [qkv.H]
    L, S, d_k, d_v = qkv.T, qkv.S, qkv.d_k, qkv.d_v
    return {"q": lead + [L, d_k], "k": lead + [S, d_k], "v": lead + [S, d_v]}


def scaled_scores(out: StageOutputs, d_k: int, scaled: bool) -> np.ndarray:
    """The scores divided by sqrt(d_k): the kernel's, or with --no-scale computed here, since the
    report shows the scaled magnitudes beside the raw ones either way.       (H, T, T)"""
    return out.scaled if scaled else out.scores * np.float32(scale_for(d_k, True))


def report_fields(out: StageOutputs, backend: Backend, *, source: str, d_k: int, mask: MaskSpec, scaled: bool,
                  shapes: dict[str, list[int]], scaled_view: np.ndarray | None = None,
                  notices: list[str] | None = None) -> dict:
    """An AttentionReport's header, statistics and timings for one staged run, the statistics over
    every head together; the arrays it keeps are the caller's to add. The layer's report
    (runs/layer.py) is made from the same fields and its own, once. `scaled_view`:
    scaled_scores(), if the caller has it already. L queries against S keys: the weights' (L, S)."""
    L, S = out.weights.shape[1:]
    scaled_view = scaled_scores(out, d_k, scaled) if scaled_view is None else scaled_view
    return dict(
        **header_fields(backend, source=source, T=L, S=S, d_k=d_k, d_v=out.output.shape[-1], mask=mask,
                        scaled=scaled, shapes=shapes, kernels=out.kernels),
        weight_stats=stats.weight_stats(out.scores, scaled_view, out.weights, mask.visible(L, S=S)),
        timings_ms=out.timings_ms,
        transfer_ms=out.transfer_ms,
        load_ms=out.load_ms,
        corner=out.weights[0, :CORNER, :CORNER].astype(float).round(6).tolist(),  # head 0
        masked_corner=out.masked[0, :CORNER, :CORNER].astype(float).round(6).tolist(),
        notices=list(notices or []),
    )


def run_attention(qkv: QKV, backend: Backend, mask: MaskSpec, scaled: bool,
                  notices: list[str] | None = None, check=None) -> AttentionReport:
    """One head's (T, d) inputs, or H heads' (H, T, d) in one launch per stage (statistics over all);
    Q's L rows against K's and V's S (the mask's bottom-right alignment places the queries last).
    The caller has checked that it fits (head_inputs; the API's attend). check(q, k, v, out, mask,
    scaled): whether the kernels' stages are the equation (verification's spot_check), asked
    where kernels ran."""
    q, k, v = heads(qkv.q), heads(qkv.k), heads(qkv.v)
    out: StageOutputs = backend.attention(q, k, v, mask=mask, scaled=scaled)
    lead = [] if qkv.H is None else [qkv.H]
    L, S, d_v = qkv.T, qkv.S, qkv.d_v
    shapes = {**input_shapes(qkv), "scores": lead + [L, S], "weights": lead + [L, S], "output": lead + [L, d_v]}
    one = qkv.H is None
    overflow = overflow_notice(qkv.q, qkv.k)
    report = AttentionReport(**report_fields(out, backend, source=qkv.source, d_k=qkv.d_k, mask=mask, scaled=scaled,
                                             shapes=shapes,
                                             notices=list(notices or []) + ([overflow] if overflow else [])),
                             output=out.output[0] if one else out.output,
                             # one head's (T, T), also of (1, T, d) inputs; several heads' (H, T, T)
                             weights=out.weights[0] if len(out.weights) == 1 else out.weights,
                             scores=out.scores[0] if len(out.scores) == 1 else out.scores)
    if out.device_output is not None and qkv.on_device:
        report.device_output = out.device_output[0] if one else out.device_output
    if check is not None and out.kernels:
        report.check = check(np.asarray(q), np.asarray(k), np.asarray(v), out, mask, scaled)
    return report
