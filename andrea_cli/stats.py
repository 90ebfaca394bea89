"""Pure statistics over a run's matrices: magnitudes, row sums, how peaky the softmax is."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class Magnitude:
    """Over every score, before masking: the course's "order of sqrt(d_k)" is the std."""

    mean_abs: float
    std: float
    max_abs: float


@dataclass(frozen=True)
class RowSums:
    min: float
    max: float
    max_abs_dev: float  # max over rows of |sum - 1|


@dataclass(frozen=True)
class Peakiness:
    mean_max_weight: float  # mean over rows of the largest weight: 1.0 means one position wins
    mean_entropy: float  # nats; log(n) for a uniform row over n positions
    mean_effective_positions: float  # mean of exp(entropy): how many positions a row really mixes
    share_rows_over_99: float  # fraction of rows whose largest weight exceeds 0.99
    mean_jacobian_norm: float  # mean Frobenius norm of d softmax / d scores = diag(p) - p p^T


def magnitude(scores: np.ndarray) -> Magnitude:
    s = scores.astype(np.float64, copy=False)
    a = np.abs(s)
    return Magnitude(float(a.mean()), float(s.std()), float(a.max()))


def row_sums(weights: np.ndarray) -> RowSums:
    sums = weights.astype(np.float64).sum(axis=-1)
    return RowSums(float(sums.min()), float(sums.max()), float(np.abs(sums - 1.0).max()))


def row_entropy(weights: np.ndarray) -> np.ndarray:
    """-sum_j p log p per row, with 0 log 0 = 0 (masked entries contribute nothing)."""
    p = weights.astype(np.float64, copy=False)
    logp = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -(p * logp).sum(axis=-1)


def jacobian_norm(weights: np.ndarray) -> np.ndarray:
    """||diag(p) - p p^T||_F per row, without building the (T, T) Jacobian of each row:
    ||J||^2 = sum p^2 - 2 sum p^3 + (sum p^2)^2. Near 0 when one weight is ~1: no gradient."""
    p = weights.astype(np.float64, copy=False)
    s2 = (p * p).sum(axis=-1)
    s3 = (p * p * p).sum(axis=-1)
    return np.sqrt(np.maximum(s2 - 2 * s3 + s2 * s2, 0.0))


def peakiness(weights: np.ndarray) -> Peakiness:
    weights = weights.astype(np.float64, copy=False)  # once, for the three measures below
    top = weights.max(axis=-1)
    entropy = row_entropy(weights)
    return Peakiness(
        mean_max_weight=float(top.mean()),
        mean_entropy=float(entropy.mean()),
        mean_effective_positions=float(np.exp(entropy).mean()),
        share_rows_over_99=float((top > 0.99).mean()),
        mean_jacobian_norm=float(jacobian_norm(weights).mean()),
    )


def largest_hidden_weight(weights: np.ndarray, visible: np.ndarray) -> float | None:
    """The largest weight on a position the mask hides (it must be exactly 0), or None when the
    mask hides nothing. weights (..., T, T) or (..., rows, T); visible broadcasts to them."""
    hidden = weights[..., ~visible]
    return float(hidden.max()) if hidden.size else None


def as_dict(stat) -> dict:
    return asdict(stat)


@dataclass(frozen=True)
class WeightStats:
    """What a report says about a set of weight rows (one head, every head, a layer's head, or
    the rows the fused run samples): the statistics above, under one set of JSON keys."""

    row_sums: RowSums
    magnitude_unscaled: Magnitude
    magnitude_scaled: Magnitude
    softmax: Peakiness
    hidden_weight_max: float | None  # the largest weight on a masked position: must be 0.0
    rows_seeing_no_key: int = 0  # query rows the mask hides every key from (L > S, bottom-right causal)

    def to_json(self) -> dict:
        return {
            "row_sums": as_dict(self.row_sums),
            "magnitude": {"unscaled": as_dict(self.magnitude_unscaled), "scaled": as_dict(self.magnitude_scaled)},
            "softmax": as_dict(self.softmax),
            "hidden_weight_max": self.hidden_weight_max,
            "rows_seeing_no_key": self.rows_seeing_no_key,
        }


def weight_stats(scores: np.ndarray, scaled_scores: np.ndarray, weights: np.ndarray,
                 visible: np.ndarray) -> WeightStats:
    """scores and scaled_scores before masking, weights after the softmax: (..., rows, S) each;
    visible (rows, S) broadcasts to them. A row that sees no key (L queries after fewer S keys,
    bottom-right causal) has weights 0 by design: the row sums and the softmax's measures are
    over the rows that see a key, and the others are counted."""
    seeing = visible.any(axis=-1)
    blind = int((~seeing).sum())
    seen = weights[..., seeing, :] if blind and seeing.any() else weights
    return WeightStats(row_sums(seen), magnitude(scores), magnitude(scaled_scores), peakiness(seen),
                       largest_hidden_weight(weights, visible), blind)


# --- gradients: how much of dL/dP the softmax passes back to the scores -------------------------

QUIET_ROW = 0.01  # a row "passes back almost nothing" below 1% (see quiet_row_share)


def norm(a: np.ndarray) -> float:
    """Frobenius norm, in float64."""
    return float(np.sqrt((a.astype(np.float64, copy=False) ** 2).sum()))


def score_share(d_weights: np.ndarray, d_scores: np.ndarray) -> float:
    """||dS|| / ||dP||: the share of the gradient reaching the weights that reaches the scores."""
    total = norm(d_weights)
    return norm(d_scores) / total if total else 0.0


def quiet_row_share(weights: np.ndarray, d_weights: np.ndarray, d_scores: np.ndarray,
                    threshold: float = QUIET_ROW) -> float:
    """The share of rows whose softmax passes back almost nothing: ||dS_i|| < threshold ·
    ||P_i ∘ dP_i||. P_i ∘ dP_i is dS_i without the rowsum term, what the row would pass back if
    its normalisation did not cancel it; for a spread-out row the two are alike, for a row with
    one weight 1 - e the rowsum term cancels all but about e of it (rows with a max weight over
    0.99 are the quiet ones). A row that sees one key only is quiet exactly: its softmax is 1.
    A row that sees no key (L queries after S < L keys, bottom-right) has no softmax: left out."""
    p, dp, ds = (a.astype(np.float64, copy=False) for a in (weights, d_weights, d_scores))
    passed = np.sqrt((ds * ds).sum(axis=-1))
    reaching = np.sqrt(((p * dp) ** 2).sum(axis=-1))
    seen = p.sum(axis=-1) > 0
    return float((passed <= threshold * reaching)[seen].mean()) if seen.any() else 0.0
