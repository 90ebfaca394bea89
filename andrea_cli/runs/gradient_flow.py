"""Do the gradients flow? One backward pass measured: the norms of dQ and dK in total and for the
typical query row, and the share of rows whose softmax passes back almost nothing. compare-scaling
puts the unscaled and the scaled run side by side; the course says that without the division by
sqrt(d_k) "the gradients vanish", and this is where that is tested."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from andrea_cli import stats


@dataclass(frozen=True)
class GradientFlow:
    dq_norm: float  # ||dQ||, all rows together
    dk_norm: float  # ||dK||
    median_row_dq_norm: float  # the median over query rows of ||dQ_i||: what a typical row receives
    quiet_rows: float  # share of rows passing back almost nothing (stats.quiet_row_share)
    score_share: float  # ||dS|| / ||dP||
    backward_ms: float
    # ||dQ_i|| of every query row (T,): what compare-scaling's plot draws; not in the JSON
    row_dq_norms: np.ndarray | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict:
        return {key: value for key, value in asdict(self).items() if key != "row_dq_norms"}


def gradient_flow(out) -> GradientFlow:
    """From a staged backward run of one head (BackwardOutputs with its T×T arrays)."""
    rows = np.sqrt((out.dq[0].astype(np.float64) ** 2).sum(axis=-1))
    return GradientFlow(
        dq_norm=stats.norm(out.dq), dk_norm=stats.norm(out.dk), median_row_dq_norm=float(np.median(rows)),
        quiet_rows=stats.quiet_row_share(out.weights, out.d_weights, out.d_scores),
        score_share=stats.score_share(out.d_weights, out.d_scores), backward_ms=out.timings_ms["total"],
        row_dq_norms=rows,
    )


def d_out_for(T: int, d_v: int, seed: int) -> np.ndarray:
    """The upstream gradient dO, N(0, 1), seeded apart from Q, K, V.          (1, T, d_v)"""
    return np.random.default_rng([seed, 1]).standard_normal((1, T, d_v), dtype=np.float32)
