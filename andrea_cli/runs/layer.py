"""One multi-head attention layer, from x to the layer's output, as GPT-2 computes it:

    Q = x·W_Q, K = x·W_K, V = x·W_V            (T, d_model) each
    head h = Attention(Q, K, V restricted to columns h·d_k .. (h+1)·d_k)   (T, d_k)
    output = concat(head 0 .. head H-1) · W_O  (T, d_model)

The projections, the split, the concatenation and W_O run on the host in NumPy float32 (they
are plain matmuls, not what andrea teaches); the attention runs on the backend, every head in
one launch per stage (heads on the grid's z dimension).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from andrea_cli import reference, stats
from andrea_cli.backends.base import Backend
from andrea_cli.layer_inputs import LayerInputs
from andrea_cli.masks import MaskSpec
from andrea_cli.runs.head import AttentionReport, report_fields, scaled_scores


def split_heads(a: np.ndarray, n_head: int) -> np.ndarray:
    """(T, d_model) -> (H, T, d_k), contiguous: head h is columns h·d_k .. (h+1)·d_k."""
    T, d_model = a.shape
    return np.ascontiguousarray(a.reshape(T, n_head, d_model // n_head).transpose(1, 0, 2))


def concat_heads(a: np.ndarray) -> np.ndarray:
    """(H, T, d_v) -> (T, H·d_v): head h's output lands in columns h·d_v .. (h+1)·d_v."""
    H, T, d_v = a.shape
    return np.ascontiguousarray(a.transpose(1, 0, 2).reshape(T, H * d_v))


def layer_reference(x, weights: dict[str, np.ndarray], n_head: int, mask: MaskSpec, scaled: bool = True) -> np.ndarray:
    """The whole layer in float64, the yardstick for tests.        (T, d_model) -> (T, d_model)"""
    x = x.astype(np.float64)
    w = {name: a.astype(np.float64) for name, a in weights.items()}
    q, k, v = (split_heads(x @ w[name], n_head) for name in ("w_q", "w_k", "w_v"))  # (H, T, d_k)
    heads = reference.attention(q, k, v, mask, scaled)  # (H, T, d_k)
    return concat_heads(heads) @ w["w_o"]  # (T, d_model)


@dataclass
class HeadStats:
    head: int
    columns: tuple[int, int]  # the slice of W_Q/W_K/W_V (and of concat) this head owns
    weight_stats: stats.WeightStats

    def to_json(self) -> dict:
        return {"head": self.head, "columns": list(self.columns), **self.weight_stats.to_json()}


@dataclass(kw_only=True)
class LayerReport(AttentionReport):
    """The whole layer's report, made once: the single-head contract's fields computed over all
    heads together (its `output` is the layer's output (T, d_model), its `weights` every head's
    (H, T, T)), plus the layer's sizes, the per-head statistics and the host work."""

    n_head: int
    d_model: int
    heads: list[HeadStats]
    host_timings_ms: dict[str, float]  # host work (projections, split, concat, w_o), the attention, the total

    def to_json(self) -> dict:
        return {
            **super().to_json(),
            "n_head": self.n_head,
            "d_model": self.d_model,
            "heads": [h.to_json() for h in self.heads],
            "layer_timings_ms": self.host_timings_ms,  # the key the JSON has always had
        }


def run_layer(inputs: LayerInputs, n_head: int, backend: Backend, mask: MaskSpec, scaled: bool,
              notices: list[str] | None = None, check=None) -> LayerReport:
    """x to the layer's output. The inputs were checked where they were built (layer_inputs: the
    weights' shapes, n_head, and that it fits, before drawing). check: as run_attention's, over
    every head."""
    T, d_model = inputs.T, inputs.d_model
    d_k = d_model // n_head
    w = inputs.weights
    host: dict[str, float] = {}

    start = time.perf_counter()
    q, k, v = (inputs.x @ w[name] for name in ("w_q", "w_k", "w_v"))  # (T, d_model) float32
    host["projections"] = (time.perf_counter() - start) * 1e3
    start = time.perf_counter()
    qh, kh, vh = (split_heads(a, n_head) for a in (q, k, v))  # (H, T, d_k)
    host["split"] = (time.perf_counter() - start) * 1e3

    out = backend.attention(qh, kh, vh, mask=mask, scaled=scaled)  # one launch per stage, all heads

    start = time.perf_counter()
    concat = concat_heads(out.output)  # (T, d_model)
    host["concat"] = (time.perf_counter() - start) * 1e3
    start = time.perf_counter()
    output = concat @ w["w_o"]  # (T, d_model)
    host["w_o"] = (time.perf_counter() - start) * 1e3
    host["attention"] = out.timings_ms["total"]
    host["total"] = sum(host.values())

    scaled_view = scaled_scores(out, d_k, scaled)
    visible = mask.visible(T)
    heads = [HeadStats(h, (h * d_k, (h + 1) * d_k),
                       stats.weight_stats(out.scores[h], scaled_view[h], out.weights[h], visible))
             for h in range(n_head)]
    w_shape = [d_model, d_model]
    shapes = {"x": [T, d_model], "w_q": w_shape, "w_k": w_shape, "w_v": w_shape,
              "q": [n_head, T, d_k], "k": [n_head, T, d_k], "v": [n_head, T, d_k],
              "scores": [n_head, T, T], "weights": [n_head, T, T], "heads": [n_head, T, d_k],
              "concat": [T, d_model], "w_o": w_shape, "output": [T, d_model]}
    report = LayerReport(**report_fields(out, backend, source=inputs.source, d_k=d_k, mask=mask, scaled=scaled,
                                         shapes=shapes, scaled_view=scaled_view, notices=notices),
                         weights=out.weights, output=output,  # (H, T, T) even for one head; (T, d_model)
                         n_head=n_head, d_model=d_model, heads=heads, host_timings_ms=host)
    if check is not None and out.kernels:
        report.check = check(qh, kh, vh, out, mask, scaled)
    return report
