"""`attend --fused`: one fused-kernel run turned into a report. The T×T matrices never exist, so
the statistics that need them are computed only on a sample of rows, recomputed from Q and K."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from andrea_cli import reference, stats
from andrea_cli.errors import AndreaError
from andrea_cli.inputs import QKV
from andrea_cli.masks import MaskSpec
from andrea_cli.overflow import overflow_notice
from andrea_cli.reference import scale_for
from andrea_cli.runs.head import heads, input_shapes
from andrea_cli.runs.header import RunHeader, header_fields


@dataclass
class RowSample:
    """Statistics over `rows` of the weight matrix, recomputed with the NumPy reference."""

    rows: list[int]
    weight_stats: stats.WeightStats
    output_max_abs_err: float  # the fused output of these rows against the reference

    def to_json(self) -> dict:
        return {"rows": self.rows, **self.weight_stats.to_json(), "output_max_abs_err": self.output_max_abs_err}


@dataclass
class FusedReport(RunHeader):
    sample: RowSample | None  # None unless --sample-rows asked for one
    timings_ms: dict[str, float]
    transfer_ms: dict[str, float]
    load_ms: float
    notices: list[str] = field(default_factory=list)
    output: np.ndarray | None = field(default=None, repr=False)  # (T, d_v); (H, T, d_v) from (H, T, d) inputs
    device_output: Any = field(default=None, repr=False)  # the output on the GPU (cuda), shaped like output
    precision: str = "fp32"  # the inputs the kernel multiplies: fp32, or bf16 copies (tensor cores)
    kernel: str = ""  # the fused kernel that ran, as the launcher reports it
    check: Any = None  # a Verdict: sampled rows against float64 (the FP32 kernels); None where not checked

    def to_json(self) -> dict:
        """The single-head contract's keys, so scripts read both runs alike: the weight statistics
        come from the row sample (`statistics_from` says so) or are null without one; the staged
        stages that the fused kernel does not have are null in `timings_ms`."""
        sample = self.sample.to_json() if self.sample else None
        return {
            **self.header_json(after_source={"fused": True, "precision": self.precision, "kernel": self.kernel}),
            "statistics_from": f"a sample of {len(self.sample.rows)} rows" if self.sample else None,
            "row_sums": sample["row_sums"] if sample else None,
            "magnitude": sample["magnitude"] if sample else None,
            "softmax": sample["softmax"] if sample else None,
            "hidden_weight_max": sample["hidden_weight_max"] if sample else None,
            "sampled_rows": len(self.sample.rows) if self.sample else 0,
            "sample": sample,
            "timings_ms": {"scores": None, "scale": None, "mask": None, "softmax": None, "av": None,
                           **self.timings_ms},
            "transfer_ms": self.transfer_ms, "load_ms": self.load_ms,
            "notices": self.notices,
            "check": self.check.to_json() if self.check is not None else None,
        }


def row_sample(qkv: QKV, mask: MaskSpec, scaled: bool, output: np.ndarray, n: int) -> RowSample:
    rows = reference.sample_rows(qkv.T, n)
    raw, weights, want = reference.attention_rows(qkv.q, qkv.k, qkv.v, mask, scaled, rows)  # float64
    return RowSample(
        rows=rows.tolist(),
        weight_stats=stats.weight_stats(raw, raw * scale_for(qkv.d_k, True), weights,
                                        mask.visible(qkv.T, rows, S=qkv.S)),
        output_max_abs_err=float(np.abs(output[rows] - want).max()),
    )


def run_fused_attention(qkv: QKV, backend, mask: MaskSpec, scaled: bool, n_sample: int = 0,
                        notices: list[str] | None = None, precision: str = "fp32", check=None,
                        variant: int | None = None) -> FusedReport:
    """One head's (T, d) inputs, or H heads' (H, T, d) in one launch; a row sample on one head.
    variant: the fused kernel of the precision to run (None: the launcher's pick for the device).
    check(q, k, v, output, mask, scaled): whether the FP32 kernel's output is the equation on
    sampled rows (verification's fused_spot_check); the bf16 kernels' rounding is verify's to judge."""
    if n_sample > 0 and (qkv.H is not None or qkv.on_device):
        raise AndreaError("sample_rows recomputes rows from one head's Q and K on the host: pass (T, d) NumPy arrays")
    out = backend.attention_fused(heads(qkv.q), heads(qkv.k), heads(qkv.v), mask=mask, scaled=scaled,
                                  precision=precision, variant=variant)
    one = qkv.H is None
    output = out.output[0] if one else out.output
    T, d_k, d_v = qkv.T, qkv.d_k, qkv.d_v
    notes = list(notices or [])
    if precision == "bf16":
        notes.append("--precision bf16: Q, K, V and the weights are rounded to bf16 (8 significant bits) "
                     "for the tensor cores, with fp32 sums: expect about 1e-3 from the fp32 result")
    overflow = overflow_notice(qkv.q, qkv.k)
    if overflow:
        notes.append(overflow)
    sample = None
    if n_sample > 0:
        sample = row_sample(qkv, mask, scaled, output, n_sample)
        notes.append(f"--fused: statistics over a sample of {len(sample.rows)} of {T} rows, "
                     "recomputed with the NumPy reference from Q and K (the kernel never builds the T×T matrix)")
    else:
        notes.append("--fused: no weight statistics (the T×T matrix is never built); --sample-rows N computes them on N rows")
    device_output = None
    if out.device_output is not None and qkv.on_device:
        device_output = out.device_output[0] if one else out.device_output
    verdict = None
    if check is not None and precision == "fp32" and not qkv.on_device:
        verdict = check(heads(qkv.q), heads(qkv.k), heads(qkv.v), out.output, mask, scaled)
    return FusedReport(
        **header_fields(backend, source=qkv.source, T=T, S=qkv.S, d_k=d_k, d_v=d_v, mask=mask, scaled=scaled,
                        shapes={**input_shapes(qkv), "output": ([] if one else [qkv.H]) + [T, d_v]},
                        kernels=out.kernels),
        sample=sample, timings_ms=out.timings_ms, transfer_ms=out.transfer_ms, load_ms=out.load_ms,
        notices=notes, output=output, device_output=device_output, precision=precision,
        kernel=out.kernel, check=verdict,
    )
