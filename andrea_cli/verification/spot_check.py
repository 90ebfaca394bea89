"""Whether a run is the equation: a sample of rows of each stage a run produced, against the
float64 reference on the run's own previous stage (verify's way, so the first stage that
differs is the one that is wrong), with verify's derived tolerances, plus the rows' sums. Cheap
enough for every attend (a few rows, not T×T in float64), so an edited copy that computes
something else says so without anyone asking."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from andrea_cli import reference
from andrea_cli.masks import MaskSpec
from andrea_cli.verification import tolerances
from andrea_cli.verification.case import compare

SAMPLE_ROWS = 16  # spread over 0..T-1, first and last included


@dataclass
class Verdict:
    rows: list[int]  # the query rows checked (every head's)
    first_differs: str | None  # the first stage, in launch order, outside its tolerance; None: agrees
    where: dict | None = None  # that stage's first bad entry: head, row, key, got, expected, tol

    @property
    def agrees(self) -> bool:
        return self.first_differs is None

    def to_json(self) -> dict:
        return {"agrees": self.agrees, "checked_rows": self.rows, "first_differs": self.first_differs,
                "where": self.where}


def spot_check(q, k, v, out, mask: MaskSpec, scaled) -> Verdict:
    """q: (H, L, d_k), k: (H_kv, S, d_k), v: (H_kv, S, d_v) float32 (H a multiple of H_kv) (L = S = T for one sequence);
    out: the run's StageOutputs (host arrays)."""
    H, T, d_k = q.shape
    S = k.shape[1]
    rows = reference.sample_rows(T, SAMPLE_ROWS)
    visible = mask.visible(T, rows, S=S)  # (n, S)
    q_rows = q[:, rows]
    got = {name: getattr(out, name)[:, rows] for name in ("scores", "scaled", "masked", "weights", "output")}
    exact_scores = np.matmul(q_rows.astype(np.float64), reference.kv_heads_for(k, H).astype(np.float64).transpose(0, 2, 1))
    checks = {"scores": (got["scores"], exact_scores, tolerances.scores_tol(q_rows, k))}
    if scaled:
        s = reference.scale(got["scores"].astype(np.float64), d_k, scaled)
        checks["scale"] = (got["scaled"], s, tolerances.scale_tol(s))
    if mask.kind != "none":
        checks["mask"] = (got["masked"], np.where(visible, got["scaled"].astype(np.float64), -np.inf), 0.0)
    p = reference.softmax(got["masked"].astype(np.float64))
    softmax_tol = tolerances.softmax_tol(got["masked"], p)
    checks["softmax"] = (got["weights"], p, softmax_tol)
    checks["av"] = (got["output"], reference.weighted_sum(got["weights"].astype(np.float64), v),
                    tolerances.av_tol(got["weights"], v))
    for stage, (have, want, tol) in checks.items():
        check = compare(have, want, tol)
        if not check.passed:
            return Verdict(rows.tolist(), stage, _where(check.first_bad, rows))
    # each row's weights sum to 1 (a row that sees nothing sums to 0)
    sums = got["weights"].astype(np.float64).sum(axis=-1)
    due = visible.any(axis=-1).astype(np.float64)
    bad = np.abs(sums - due) > softmax_tol.sum(axis=-1) + tolerances.gamma(S)
    if bad.any():
        h, r = (int(i) for i in np.argwhere(bad)[0])
        return Verdict(rows.tolist(), "row sums", {"head": h, "row": int(rows[r]), "got": float(sums[h, r]),
                                                   "expected": float(due[r])})
    return Verdict(rows.tolist(), None)


def _where(first_bad: dict, rows: np.ndarray) -> dict:
    h, r, j = first_bad["index"]
    return {"head": h, "row": int(rows[r]), "column": j, "got": first_bad["got"], "expected": first_bad["expected"],
            "tol": first_bad["tol"]}


def fused_spot_check(q, k, v, output, mask: MaskSpec, scaled) -> Verdict:
    """A fused FP32 run (no stages to compare, only its output): sampled rows of every head
    against the float64 equation, within verify's bound for the fused kernels (fused_tol).
    q: (H, L, d_k), k: (H, S, d_k), v: (H, S, d_v) float32; output (H, L, d_v)."""
    H, T, d_k = q.shape
    k, v = reference.kv_heads_for(k, H), reference.kv_heads_for(v, H)  # grouped K/V: each query head's own
    rows = reference.sample_rows(T, SAMPLE_ROWS)
    visible = mask.visible(T, rows, S=k.shape[1])  # (n, S)
    q_rows = q[:, rows]
    s = np.matmul(q_rows.astype(np.float64), k.astype(np.float64).transpose(0, 2, 1))  # (H, n, T)
    s = reference.scale(s, d_k, scaled) if scaled else s
    p = reference.softmax(np.where(visible, s, -np.inf))
    want = reference.weighted_sum(p, v)
    tol = tolerances.fused_tol(q_rows, k, v, p, visible, d_k, scaled)
    check = compare(output[:, rows], want, tol)
    if not check.passed:
        h, r, c = check.first_bad["index"]
        return Verdict(rows.tolist(), "fused", {"head": h, "row": int(rows[r]), "column": c,
                                                "got": check.first_bad["got"], "expected": check.first_bad["expected"],
                                                "tol": check.first_bad["tol"]})
    return Verdict(rows.tolist(), None)
