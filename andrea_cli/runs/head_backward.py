"""One backward pass of one head on a backend, turned into a report: the gradients' shapes and
norms, how much of the gradient the softmax passes back to the scores, agreement with the
float64 NumPy backward, and per-stage timings."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from andrea_cli import reference_backward, stats
from andrea_cli.inputs import QKV
from andrea_cli.masks import MaskSpec
from andrea_cli.runs.header import RunHeader, header_fields

CHECK_MAX_T = 2048  # the float64 check builds (L, S) float64 matrices: past this L or S, it is skipped


@dataclass
class GradReport(RunHeader):  # its scale is applied once more to dQ and dK
    fused: bool
    precision: str  # fp32, or bf16: the tensor-core kernels' bf16 operands (fused only)
    kernel: str | None  # the backward's kernels, by name (None: the NumPy path)
    grad_norms: dict[str, float | None]  # d_weights and d_scores are None on the fused path
    score_share: float | None  # ||dS|| / ||dP||
    quiet_rows: float | None  # share of rows whose softmax passes back almost nothing
    max_rel_error: dict[str, float] | None  # vs the float64 backward: max|err| / max|exact|
    timings_ms: dict[str, float]
    transfer_ms: dict[str, float]
    load_ms: float
    notices: list[str] = field(default_factory=list)
    dq: np.ndarray | None = field(default=None, repr=False)  # (L, d_k), L = T queries
    dk: np.ndarray | None = field(default=None, repr=False)  # (S, d_k), S keys
    dv: np.ndarray | None = field(default=None, repr=False)  # (S, d_v)
    # bf16: an emulated bf16 autograd's max_rel_error, the yardstick for this run's (commands/grad.py)
    autograd_bf16_rel_error: dict[str, float] | None = None

    def arrays(self) -> dict[str, np.ndarray]:
        """What --out saves."""
        return {"dq": self.dq, "dk": self.dk, "dv": self.dv}

    def to_json(self) -> dict:
        return {
            **self.header_json(after_scale={"fused": self.fused, "precision": self.precision,
                                            "kernel": self.kernel}),
            "grad_norms": self.grad_norms,
            "score_share": self.score_share, "quiet_rows": self.quiet_rows,
            "max_rel_error": self.max_rel_error, "autograd_bf16_rel_error": self.autograd_bf16_rel_error,
            "timings_ms": self.timings_ms, "transfer_ms": self.transfer_ms, "load_ms": self.load_ms,
            "notices": self.notices,
        }


def relative_errors(got: dict[str, np.ndarray], exact: dict[str, np.ndarray]) -> dict[str, float]:
    """max|got - exact| / max|exact| per array (0 where both are all zeros)."""
    errors = {}
    for name, e in exact.items():
        err = float(np.abs(got[name].astype(np.float64) - e).max())
        top = float(np.abs(e).max())
        errors[name] = err / top if top else err
    return errors


def backward_kernel_name(kernels: dict[str, str], fused: bool) -> str | None:
    """The kernels that computed dQ, dK, dV, as the launchers report them (the forward and delta
    that feed the fused ones aside); None on the NumPy path, which runs none."""
    if not kernels:
        return None
    if fused:
        return f"{kernels['dkdv']} + {kernels['dq']}"
    return ", ".join(kernels[stage] for stage in ("dv", "dp", "ds", "dq", "dk"))


def run_backward(qkv: QKV, d_out: np.ndarray, backend, mask: MaskSpec, scaled: bool, fused: bool,
                 notices: list[str] | None = None, precision: str = "fp32") -> GradReport:
    """qkv: (L, d_k), (S, d_k), (S, d_v), L = S = T for one sequence; d_out: (L, d_v), dL/dO. Or,
    from the Python API, H heads' (H, L or S, d) each, run in one launch per stage (K and V may
    have H_kv heads, grouped: dK, dV then (H_kv, S, d)). precision bf16 (fused only): the
    tensor-core forward and backward."""
    notices = list(notices or [])
    one = qkv.H is None
    q, k, v, do = (a[None] if one else a for a in (qkv.q, qkv.k, qkv.v, d_out))  # one head: H = 1
    if fused:
        out = backend.attention_backward_fused(q, k, v, do, mask=mask, scaled=scaled, precision=precision)
        if precision == "bf16":
            notices.append("--precision bf16: Q, K, V, dO, and the weights P and dS as operands, are rounded "
                           "to bf16 (8 significant bits) for the tensor cores, with fp32 sums: expect about "
                           "1e-2 from the float64 gradients")
    else:
        out = backend.attention_backward(q, k, v, do, mask=mask, scaled=scaled)
    T, S, d_k, d_v = qkv.T, qkv.S, qkv.d_k, qkv.d_v
    norms = {"d_out": stats.norm(d_out), "dv": stats.norm(out.dv), "d_weights": None, "d_scores": None,
             "dq": stats.norm(out.dq), "dk": stats.norm(out.dk)}
    share = quiet = None
    if out.d_scores is not None:
        norms["d_weights"], norms["d_scores"] = stats.norm(out.d_weights), stats.norm(out.d_scores)
        share = stats.score_share(out.d_weights, out.d_scores)
        quiet = stats.quiet_row_share(out.weights, out.d_weights, out.d_scores)
    else:
        notices.append("the fused backward builds no T×T matrix: the norms of dP and dS, and the "
                       "statistics that need them, come from the staged run (drop --fused)")
    errors = None
    if max(T, S) <= CHECK_MAX_T:
        exact = reference_backward.backward(q, k, v, do, mask, scaled)
        errors = relative_errors({"dq": out.dq, "dk": out.dk, "dv": out.dv},
                                 {"dq": exact.dq, "dk": exact.dk, "dv": exact.dv})
    else:
        notices.append(f"{'T' if S == T else 'L or S'} > {CHECK_MAX_T}: the float64 check "
                       f"({'T×T' if S == T else 'L×S'} matrices in float64) was skipped")
    return GradReport(
        **header_fields(backend, source=qkv.source, T=T, S=S, d_k=d_k, d_v=d_v, mask=mask, scaled=scaled,
                        shapes={name: ([] if one else [heads]) + shape for name, shape, heads in
                                (("dq", [T, d_k], qkv.H), ("dk", [S, d_k], qkv.H_kv), ("dv", [S, d_v], qkv.H_kv),
                                 ("d_scores", [T, S], qkv.H))},
                        kernels=out.kernels),
        fused=fused, precision=precision, kernel=backward_kernel_name(out.kernels, fused),
        grad_norms=norms, score_share=share, quiet_rows=quiet, max_rel_error=errors,
        timings_ms=out.timings_ms, transfer_ms=out.transfer_ms, load_ms=out.load_ms, notices=notices,
        dq=out.dq[0] if one else out.dq, dk=out.dk[0] if one else out.dk, dv=out.dv[0] if one else out.dv,
    )
