"""One multi-head attention layer, from x to the layer's output, as GPT-2 computes it:

    Q = x·W_Q, K = x·W_K, V = x·W_V            (T, d_model) each
    head h = Attention(Q, K, V restricted to columns h·d_k .. (h+1)·d_k)   (T, d_k)
    output = concat(head 0 .. head H-1) · W_O  (T, d_model)

With n_kv_head K/V heads (grouped-query attention): K = x·W_K and V = x·W_V are (T, n_kv_head·d_k),
and query head h reads K/V head h // (n_head / n_kv_head). The kernels take the n_kv_head heads
as they are (no copy per query head), so the K/V a decoder keeps per token shrinks by that factor.

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
    n_kv_head = kv_heads(weights, n_head)
    q = split_heads(x @ w["w_q"], n_head)  # (H, T, d_k)
    k, v = (split_heads(x @ w[name], n_kv_head) for name in ("w_k", "w_v"))  # (H_kv, T, d_k)
    heads = reference.attention(q, k, v, mask, scaled)  # (H, T, d_k)
    return concat_heads(heads) @ w["w_o"]  # (T, d_model)


def kv_heads(weights: dict[str, np.ndarray], n_head: int) -> int:
    """The layer's K/V heads, read off W_K (n_kv_head·d_k columns; layer_inputs checked them)."""
    d_k = weights["w_q"].shape[1] // n_head
    return weights["w_k"].shape[1] // d_k


@dataclass(frozen=True)
class KVCache:
    """What a decoder keeps per layer for T tokens: K and V, float32, n_kv_head heads of d_k each,
    against the n_head heads it keeps without grouping."""

    T: int
    n_head: int
    n_kv_head: int
    d_k: int

    def bytes_for(self, heads: int) -> int:
        return 2 * self.T * heads * self.d_k * 4  # K and V, 4 bytes a float32

    @property
    def bytes(self) -> int:
        return self.bytes_for(self.n_kv_head)

    @property
    def saved(self) -> int:
        return self.bytes_for(self.n_head) - self.bytes

    def to_json(self) -> dict:
        return {"n_kv_head": self.n_kv_head, "bytes": self.bytes, "bytes_saved": self.saved,
                "bytes_ungrouped": self.bytes_for(self.n_head)}


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
    kv_cache: KVCache
    heads: list[HeadStats]
    host_timings_ms: dict[str, float]  # host work (projections, split, concat, w_o), the attention, the total

    def to_json(self) -> dict:
        return {
            **super().to_json(),
            "n_head": self.n_head,
            "n_kv_head": self.kv_cache.n_kv_head,
            "d_model": self.d_model,
            "kv_cache": self.kv_cache.to_json(),  # float32 K and V for T tokens, and what grouping saves
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
    n_kv_head = kv_heads(w, n_head)
    host: dict[str, float] = {}

    start = time.perf_counter()
    q, k, v = (inputs.x @ w[name] for name in ("w_q", "w_k", "w_v"))  # (T, d_model) float32
    host["projections"] = (time.perf_counter() - start) * 1e3
    start = time.perf_counter()
    qh = split_heads(q, n_head)  # (H, T, d_k)
    kh, vh = (split_heads(a, n_kv_head) for a in (k, v))  # (H_kv, T, d_k): the kernels read them grouped
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
    w_shape, kv_shape = [d_model, d_model], [d_model, n_kv_head * d_k]
    shapes = {"x": [T, d_model], "w_q": w_shape, "w_k": kv_shape, "w_v": kv_shape,
              "q": [n_head, T, d_k], "k": [n_kv_head, T, d_k], "v": [n_kv_head, T, d_k],
              "scores": [n_head, T, T], "weights": [n_head, T, T], "heads": [n_head, T, d_k],
              "concat": [T, d_model], "w_o": w_shape, "output": [T, d_model]}
    report = LayerReport(**report_fields(out, backend, source=inputs.source, d_k=d_k, mask=mask, scaled=scaled,
                                         shapes=shapes, scaled_view=scaled_view, notices=notices),
                         weights=out.weights, output=output,  # (H, T, T) even for one head; (T, d_model)
                         n_head=n_head, d_model=d_model, kv_cache=KVCache(T, n_head, n_kv_head, d_k), heads=heads, host_timings_ms=host)
    if check is not None and out.kernels:
        report.check = check(qh, kh, vh, out, mask, scaled)
    return report
