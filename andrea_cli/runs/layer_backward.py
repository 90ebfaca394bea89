"""The multi-head layer's backward pass (layer.py's forward, run backwards): from dL/d(output)
to dL/dx and the gradients of W_Q, W_K, W_V, W_O. The attention's backward runs on the backend,
every head in one launch per stage; the projections' gradients are host matmuls in float32:

    d_concat = dOut · W_O^T,  dW_O = concat^T · dOut          (T, d_model), (d_model, d_model)
    dQ_h, dK_h, dV_h = attention backward of head h           (H, T, d_k) each
    dW_Q = x^T · dQ (likewise K, V),  dx = dQ·W_Q^T + dK·W_K^T + dV·W_V^T

With n_kv_head K/V heads (grouped, as layer.py's forward): dK and dV are (H_kv, T, d_k), each
summed over the query heads that read it (in the kernels), so dW_K and dW_V are (d_model,
n_kv_head·d_k), W_K's and W_V's own shape.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from andrea_cli import reference, reference_backward, stats
from andrea_cli.layer_inputs import LayerInputs
from andrea_cli.masks import MaskSpec
from andrea_cli.runs.head_backward import CHECK_MAX_T, relative_errors
from andrea_cli.runs.header import RunHeader, header_fields
from andrea_cli.runs.layer import concat_heads, kv_heads, split_heads

PARAMETERS = ("w_q", "w_k", "w_v")


def input_gradients(x, w, d_qkv: dict[str, np.ndarray], d_out, concat) -> dict[str, np.ndarray]:
    """dx and the weight gradients from the heads' gradients (concatenated to (T, d_model)) and
    the forward's concat; float64 in, float64 out, or float32 in, float32 out."""
    grads = {f"d{name}": x.T @ d_qkv[name] for name in PARAMETERS}  # dw_q = x^T · dQ ...
    grads["dw_o"] = concat.T @ d_out
    grads["dx"] = sum(d_qkv[name] @ w[name].T for name in PARAMETERS)
    return grads


def layer_backward_reference(x, weights, n_head: int, d_out, mask: MaskSpec, scaled: bool = True) -> dict:
    """The layer's gradients in float64, the yardstick for tests and the report's check."""
    x64, do64 = x.astype(np.float64), d_out.astype(np.float64)
    w = {name: a.astype(np.float64) for name, a in weights.items()}
    n_kv_head = kv_heads(weights, n_head)
    q = split_heads(x64 @ w["w_q"], n_head)  # (H, T, d_k)
    k, v = (split_heads(x64 @ w[name], n_kv_head) for name in ("w_k", "w_v"))  # (H_kv, T, d_k)
    d_heads = split_heads(do64 @ w["w_o"].T, n_head)  # (H, T, d_k)
    g = reference_backward.backward(q, k, v, d_heads, mask, scaled)
    concat = concat_heads(reference.weighted_sum(g.weights, v))  # query head h reads V head h // group
    d_qkv = {"w_q": concat_heads(g.dq), "w_k": concat_heads(g.dk), "w_v": concat_heads(g.dv)}
    return input_gradients(x64, w, d_qkv, do64, concat)


@dataclass
class LayerGradReport(RunHeader):  # d_v = d_k: the layer's heads are square
    d_model: int
    n_head: int
    n_kv_head: int
    grad_norms: dict[str, float]
    score_share: float
    quiet_rows: float
    max_rel_error: dict[str, float] | None
    host_timings_ms: dict[str, float]  # host work and the attention's backward ("attention"), "total"
    attention_timings_ms: dict[str, float]  # the backend's stages
    notices: list[str] = field(default_factory=list)
    grads: dict[str, np.ndarray] = field(default_factory=dict, repr=False)  # dx, dw_q, dw_k, dw_v, dw_o

    def arrays(self) -> dict[str, np.ndarray]:
        return self.grads

    def to_json(self) -> dict:
        return {
            **self.header_json(after_T={"d_model": self.d_model, "n_head": self.n_head,
                                                "n_kv_head": self.n_kv_head}),
            "grad_norms": self.grad_norms, "score_share": self.score_share, "quiet_rows": self.quiet_rows,
            "max_rel_error": self.max_rel_error,
            "timings_ms": self.host_timings_ms,  # the key the JSON has always had for the host work
            "attention_timings_ms": self.attention_timings_ms, "notices": self.notices,
        }


def run_layer_backward(inputs: LayerInputs, n_head: int, d_out: np.ndarray, backend, mask: MaskSpec,
                       scaled: bool, notices: list[str] | None = None) -> LayerGradReport:
    """d_out: (T, d_model), dL/d(the layer's output). The inputs were checked where they were built
    (layer_inputs)."""
    notices = list(notices or [])
    x, w = inputs.x, inputs.weights
    T, d_model = x.shape
    d_k = d_model // n_head
    n_kv_head = kv_heads(w, n_head)
    host: dict[str, float] = {}

    def timed(stage, fn):
        start = time.perf_counter()
        result = fn()
        host[stage] = host.get(stage, 0.0) + (time.perf_counter() - start) * 1e3
        return result

    qh, kh, vh = timed("projections", lambda: [split_heads(x @ w[name], heads) for name, heads in
                                               zip(PARAMETERS, (n_head, n_kv_head, n_kv_head))])
    d_heads = timed("d_concat", lambda: split_heads(d_out @ w["w_o"].T, n_head))  # (H, T, d_k)
    out = backend.attention_backward(qh, kh, vh, d_heads, mask=mask, scaled=scaled)
    host["attention"] = out.timings_ms["total"]
    d_qkv = {"w_q": concat_heads(out.dq), "w_k": concat_heads(out.dk), "w_v": concat_heads(out.dv)}
    grads = timed("weight_grads", lambda: input_gradients(x, w, d_qkv, d_out, concat_heads(out.output)))
    host["total"] = sum(host.values())

    norms = {"d_out": stats.norm(d_out), **{name: stats.norm(a) for name, a in grads.items()},
             "dq": stats.norm(out.dq), "dk": stats.norm(out.dk), "dv": stats.norm(out.dv),
             "d_weights": stats.norm(out.d_weights), "d_scores": stats.norm(out.d_scores)}
    errors = None
    if T <= CHECK_MAX_T:
        errors = relative_errors(grads, layer_backward_reference(x, w, n_head, d_out, mask, scaled))
    else:
        notices.append(f"T > {CHECK_MAX_T}: the float64 check (T×T matrices in float64) was skipped")
    square, kv_shape = [d_model, d_model], [d_model, n_kv_head * d_k]
    return LayerGradReport(
        **header_fields(backend, source=inputs.source, T=T, d_k=d_k, d_v=d_k, mask=mask, scaled=scaled,
                        shapes={"d_out": [T, d_model], "dx": [T, d_model], "dw_q": square, "dw_k": kv_shape,
                                "dw_v": kv_shape, "dw_o": square, "dq": [n_head, T, d_k], "dk": [n_kv_head, T, d_k],
                                "dv": [n_kv_head, T, d_k], "d_scores": [n_head, T, T]},
                        kernels=out.kernels),
        d_model=d_model, n_head=n_head, n_kv_head=n_kv_head,
        grad_norms=norms, score_share=stats.score_share(out.d_weights, out.d_scores),
        quiet_rows=stats.quiet_row_share(out.weights, out.d_weights, out.d_scores), max_rel_error=errors,
        host_timings_ms=host, attention_timings_ms=out.timings_ms, notices=notices,
        grads={name: grads[name] for name in ("dx", "dw_q", "dw_k", "dw_v", "dw_o")},
    )
