"""Why divide by sqrt(d_k), measured: for each d_k, random Q, K, V through a backend twice,
unscaled and scaled, and the statistics of both runs side by side."""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from andrea_cli import stats
from andrea_cli.backends.base import Backend
from andrea_cli.errors import AndreaError
from andrea_cli.inputs import check_fits_in_memory, check_sizes, random_qkv
from andrea_cli.masks import MaskSpec
from andrea_cli.runs.gradient_flow import GradientFlow, d_out_for, gradient_flow

DISTRIBUTIONS = ("normal", "unit")
D_V = 64  # V does not change a score or a weight: a narrow one keeps the av stage cheap
FIRST_ROWS = 16  # rows and columns of the weights kept for the plot's heatmaps
HISTOGRAM_SAMPLES = 200_000  # scores kept per run for the plot's histograms


def parse_d_k_list(text: str) -> list[int]:
    """"64,256,4096" -> [64, 256, 4096]; anything else is a one-line AndreaError."""
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(not p for p in parts):
        raise AndreaError(f"--d-k {text!r}: give a comma-separated list of widths, e.g. --d-k 64,256,4096")
    widths = []
    for p in parts:
        if not p.lstrip("-").isdigit():
            raise AndreaError(f"--d-k {text!r}: {p!r} is not a whole number; e.g. --d-k 64,256,4096")
        if int(p) < 1:
            raise AndreaError(f"--d-k {text!r}: every width must be >= 1 (got {int(p)})")
        widths.append(int(p))
    return widths


def check_distribution(dist: str) -> str:
    if dist not in DISTRIBUTIONS:
        raise AndreaError(f"--dist {dist!r} is not a distribution: use normal (unit-variance entries) or unit (unit-norm rows)")
    return dist


def expected_std(dist: str, d_k: int, scaled: bool) -> float:
    """The std the mathematics predicts for q·k (then divided by sqrt(d_k) when scaled).

    normal: d_k products of independent N(0, 1) entries -> variance d_k, std sqrt(d_k).
    unit: two random unit-norm directions -> variance 1/d_k, std 1/sqrt(d_k)."""
    raw = math.sqrt(d_k) if dist == "normal" else 1.0 / math.sqrt(d_k)
    return raw / math.sqrt(d_k) if scaled else raw


@dataclass(frozen=True)
class ScalingRun:
    """One run of a width, scaled or not: its scores' magnitude and how peaky its softmax is."""

    expected_std: float
    magnitude: stats.Magnitude
    softmax: stats.Peakiness
    median_jacobian_norm: float  # the typical row: the mean hides how many rows are saturated
    total_ms: float

    def to_json(self) -> dict:
        return {"expected_std": self.expected_std, **asdict(self.magnitude), **asdict(self.softmax),
                "median_jacobian_norm": self.median_jacobian_norm, "total_ms": self.total_ms}


@dataclass
class ScalingRow:
    d_k: int
    unscaled: ScalingRun
    scaled: ScalingRun
    samples: dict[str, np.ndarray] = field(repr=False)  # "unscaled"/"scaled" -> some scores
    first_rows: dict[str, np.ndarray] = field(repr=False)  # "unscaled"/"scaled" -> (16, 16) weights
    # "unscaled"/"scaled" -> the backward pass measured; empty where the backend has no backward
    gradients: dict[str, GradientFlow] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"d_k": self.d_k, "unscaled": self.unscaled.to_json(), "scaled": self.scaled.to_json(),
                "gradients": {which: flow.to_json() for which, flow in self.gradients.items()}}


@dataclass
class ScalingReport:
    backend: str
    device: str
    T: int
    d_v: int
    mask: str
    distribution: str
    seed: int
    rows: list[ScalingRow]
    wall_s: float
    notices: list[str] = field(default_factory=list)

    @property
    def conclusion(self) -> str:
        return conclude(self)

    def to_json(self) -> dict:
        return {
            "backend": self.backend, "device": self.device, "T": self.T, "d_v": self.d_v,
            "mask": self.mask, "distribution": self.distribution, "seed": self.seed,
            "rows": [row.to_json() for row in self.rows],
            "conclusion": self.conclusion, "wall_s": self.wall_s, "notices": self.notices,
        }


def _run_stats(out, which: str, dist: str, d_k: int) -> ScalingRun:
    scores = out.scaled[0] if which == "scaled" else out.scores[0]
    weights = out.weights[0]
    return ScalingRun(
        expected_std=expected_std(dist, d_k, which == "scaled"),
        magnitude=stats.magnitude(scores),
        softmax=stats.peakiness(weights),
        median_jacobian_norm=float(np.median(stats.jacobian_norm(weights))),
        total_ms=out.timings_ms["total"],
    )


def _sample(scores: np.ndarray) -> np.ndarray:
    flat = scores.reshape(-1)
    step = max(1, flat.size // HISTOGRAM_SAMPLES)
    return flat[::step].copy()


def compare_scaling(backend: Backend, d_ks: list[int], T: int, mask: MaskSpec, dist: str, seed: int,
                    notices: list[str] | None = None) -> ScalingReport:
    check_distribution(dist)
    for d_k in d_ks:
        check_sizes(T, d_k, D_V)
    check_fits_in_memory(1, T, max(d_ks), D_V)
    start = time.perf_counter()
    rows = []
    for d_k in d_ks:
        qkv = random_qkv(T, d_k, D_V, seed, dist=dist)
        q, k, v = (a[None] for a in (qkv.q, qkv.k, qkv.v))  # one head: (1, T, d)
        d_out = d_out_for(T, D_V, seed)  # the same upstream gradient for both runs
        runs, samples, first, flows = {}, {}, {}, {}
        for which in ("unscaled", "scaled"):
            out = backend.attention(q, k, v, mask=mask, scaled=which == "scaled")
            runs[which] = _run_stats(out, which, dist, d_k)
            samples[which] = _sample(out.scaled[0])  # == out.scores[0] for the unscaled run
            first[which] = out.weights[0, :FIRST_ROWS, :FIRST_ROWS].copy()
            del out  # free the (T, T) arrays before the next run
            if hasattr(backend, "attention_backward"):  # the backward kernels (or NumPy's), measured
                flows[which] = gradient_flow(backend.attention_backward(q, k, v, d_out, mask=mask,
                                                                        scaled=which == "scaled"))
        rows.append(ScalingRow(d_k, runs["unscaled"], runs["scaled"], samples, first, flows))
    return ScalingReport(
        backend=backend.name, device=backend.device_name(), T=T, d_v=D_V, mask=str(mask),
        distribution=dist, seed=seed, rows=rows, wall_s=time.perf_counter() - start,
        notices=list(notices or []),
    )


def _span(values: list[float], fmt: str) -> str:
    lo, hi = min(values), max(values)
    return format(lo, fmt) if format(lo, fmt) == format(hi, fmt) else f"{format(lo, fmt)}–{format(hi, fmt)}"


def percent(share: float) -> str:
    """A share of rows as the tables and the conclusion both print it: one decimal, so a share the
    table shows as 0.1% is never summed up as 0%."""
    return f"{share:.1%}"


def _arrow(a: float, b: float) -> str:
    return f"{a:.3g}" if f"{a:.3g}" == f"{b:.3g}" else f"{a:.3g} → {b:.3g}"


def conclude(r: ScalingReport) -> str:
    """One paragraph read off the numbers: what grew, what stayed, what the softmax did."""
    if not r.rows:
        return ""
    first, last = r.rows[0], r.rows[-1]
    raw_ratio = [row.unscaled.magnitude.std / row.unscaled.expected_std for row in r.rows]
    scaled_std = [row.scaled.magnitude.std for row in r.rows]
    unit_scale = all(abs(std - 1) <= 0.1 for std in scaled_std)
    trend = "grows" if last.unscaled.magnitude.std > first.unscaled.magnitude.std * 1.1 else (
        "shrinks" if last.unscaled.magnitude.std < first.unscaled.magnitude.std / 1.1 else "stays")
    law = "sqrt(d_k)" if r.distribution == "normal" else "1/sqrt(d_k)"
    if first is last:
        growth = f"is {first.unscaled.magnitude.std:.3g} at d_k = {first.d_k}, "
    else:
        growth = (f"{trend} from d_k = {first.d_k} to {last.d_k} "
                  f"({_arrow(first.unscaled.magnitude.std, last.unscaled.magnitude.std)}), ")
    text = [
        f"Unscaled, the score std {growth}"
        f"{_span(raw_ratio, '.2f')} × {law} as predicted; divided by sqrt(d_k) it is "
        + (f"{_span(scaled_std, '.3g')} at every width." if unit_scale else
           f"{_arrow(first.scaled.magnitude.std, last.scaled.magnitude.std)}."),
    ]
    peaky = [row for row in r.rows if row.unscaled.softmax.mean_max_weight > row.scaled.softmax.mean_max_weight]
    if peaky:
        worst = max(r.rows, key=lambda row: row.unscaled.softmax.mean_max_weight)
        u, s = worst.unscaled, worst.scaled
        text.append(
            f"Without the division the softmax is peakier at {len(peaky)} of {len(r.rows)} widths; at d_k = {worst.d_k} "
            f"the largest weight averages {u.softmax.mean_max_weight:.2f} (scaled {s.softmax.mean_max_weight:.2f}), "
            f"{percent(u.softmax.share_rows_over_99)} of rows put more than 0.99 on one position "
            f"(scaled {percent(s.softmax.share_rows_over_99)}), a row mixes about {u.softmax.mean_effective_positions:.3g} "
            f"positions instead of {s.softmax.mean_effective_positions:.3g}, and the median row's softmax Jacobian norm "
            f"is {u.median_jacobian_norm:.2g} against {s.median_jacobian_norm:.2g}: "
            + ("gradients through the saturated rows vanish." if u.median_jacobian_norm < s.median_jacobian_norm
               else "here the gradients have not vanished yet.")
        )
    else:
        text.append("The unscaled softmax is nowhere peakier than the scaled one at these widths.")
    text.append(gradient_sentence(r))
    if r.distribution == "unit":
        text.append(
            f"With unit-norm rows the raw scores are already small (std {last.unscaled.magnitude.std:.2g} at d_k = {last.d_k}), "
            "so dividing by sqrt(d_k) flattens the softmax towards uniform: the course's sqrt(d_k) argument assumes "
            "unit-variance entries (--dist normal)."
        )
    elif unit_scale:
        text.append("Scaling keeps the scores at unit scale whatever d_k, as the course says.")
    else:
        text.append("The scaled std strays more than 10% from 1 here: too few scores (small T) to measure it well.")
    return " ".join(t for t in text if t)


def gradient_sentence(r: ScalingReport) -> str:
    """What the backward pass measured: the total norms, and what the typical row receives."""
    rows = [row for row in r.rows if row.gradients]
    if not rows:
        return ""
    worst = max(rows, key=lambda row: row.gradients["unscaled"].quiet_rows)
    u, s = worst.gradients["unscaled"], worst.gradients["scaled"]
    totals = ("larger" if u.dq_norm > s.dq_norm else "smaller")
    typical = u.median_row_dq_norm < s.median_row_dq_norm
    return (
        f"The backward pass, measured: at d_k = {worst.d_k} unscaled, ||dQ|| is {u.dq_norm:.3g} and ||dK|| "
        f"{u.dk_norm:.3g} (scaled {s.dq_norm:.3g} and {s.dk_norm:.3g}), {totals} in total, but the median query row "
        f"receives ||dQ_i|| = {u.median_row_dq_norm:.2g} against {s.median_row_dq_norm:.2g} scaled and "
        f"{percent(u.quiet_rows)} of rows pass back almost nothing (scaled {percent(s.quiet_rows)}): "
        + ("for most rows the gradient vanishes, as the course says, and the total is carried by the few "
           "unsaturated ones."
           if typical and u.quiet_rows > s.quiet_rows else
           "here the typical row's gradient has not vanished.")
    )
