"""compare-scaling's report as a PNG, a column per d_k: score histograms, first-rows weight
heatmaps, and (where the backend ran the backward pass) the gradient each query row receives,
‖dQ_i‖ unscaled against scaled, with the share of quiet rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from andrea_cli.masks import parse_mask
from andrea_cli.render.plot_common import pyplot, save_figure
from andrea_cli.runs.scaling import FIRST_ROWS, ScalingReport, percent


def _gradient_panel(ax, row, first_column: bool) -> None:
    """‖dQ_i‖ per query row, unscaled and scaled, on a log axis: the unscaled curve drops to
    nothing on the saturated rows; the quiet rows' share is in the title."""
    u, s = row.gradients["unscaled"], row.gradients["scaled"]
    floor = 1e-12  # a row that receives exactly 0 is drawn at the floor of the log axis
    for flow, colour, label in ((u, "tab:red", "unscaled"), (s, "tab:blue", f"÷ sqrt({row.d_k})")):
        norms = np.maximum(flow.row_dq_norms, floor)
        ax.plot(np.arange(norms.size), norms, color=colour, lw=0.8, alpha=0.85,
                label=f"{label}: median {flow.median_row_dq_norm:.2g}")
    ax.set_yscale("log")
    ax.set_title(f"gradient per query row ‖dQ_i‖\nquiet rows: {percent(u.quiet_rows)} unscaled, "
                 f"{percent(s.quiet_rows)} scaled", fontsize=10)
    ax.set_xlabel("query row i")
    if first_column:
        ax.set_ylabel("‖dQ_i‖ (log scale)")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3, which="both")


def save_scaling_plot(r: ScalingReport, path: Path) -> None:
    plt = pyplot()
    n = len(r.rows)
    gradients = all(row.gradients and row.gradients["unscaled"].row_dq_norms is not None for row in r.rows)
    heights = [1, 1.15, 1.15] + ([1] if gradients else [])
    fig, axes = plt.subplots(len(heights), n, figsize=(4.2 * n + 1, 4 * sum(heights)), squeeze=False,
                             layout="constrained", gridspec_kw={"height_ratios": heights})
    hidden = ~parse_mask(r.mask).visible(r.T)[:FIRST_ROWS, :FIRST_ROWS]
    colours = plt.get_cmap("viridis").with_extremes(bad="lightgrey")
    fig.suptitle(f"Why divide by sqrt(d_k): T={r.T}, mask={r.mask}, {r.distribution} inputs, backend {r.backend}",
                 fontsize=13)
    for col, row in enumerate(r.rows):
        ax = axes[0, col]
        unscaled, scaled = row.samples["unscaled"], row.samples["scaled"]
        near = float(np.percentile(np.abs(scaled), 99.9)) or 1.0
        reach = max(float(np.percentile(np.abs(unscaled), 99.9)), near) * 1.05
        bins = np.linspace(-reach, reach, 81)
        ax.hist(unscaled, bins=bins, density=True, alpha=0.6, color="tab:red",
                label=f"unscaled, std {row.unscaled.magnitude.std:.3g}")
        ax.hist(scaled, bins=np.linspace(-near, near, 41), density=True, alpha=0.6,
                color="tab:blue", label=f"÷ sqrt({row.d_k}), std {row.scaled.magnitude.std:.3g}")
        ax.set_yscale("log")
        ax.set_xlim(-reach, reach)
        ax.set_title(f"d_k = {row.d_k}: scores Q·K^T")
        ax.set_xlabel("score")
        if col == 0:
            ax.set_ylabel("density (log scale)")
        ax.legend(fontsize=8, loc="upper right")
        for r_i, (which, run) in enumerate((("unscaled", row.unscaled), ("scaled", row.scaled)), start=1):
            ax = axes[r_i, col]
            weights = np.ma.masked_where(hidden, row.first_rows[which])  # both (min(T, 16),) * 2
            image = ax.imshow(weights, vmin=0, vmax=1, cmap=colours, interpolation="nearest")
            ax.set_title(f"{which} weights, first {weights.shape[0]} rows\n"
                         f"mean max p {run.softmax.mean_max_weight:.2f}, exp(H) {run.softmax.mean_effective_positions:.3g}",
                         fontsize=10)
            ax.set_xticks(range(0, weights.shape[1], 4))
            ax.set_yticks(range(0, weights.shape[0], 4))
            ax.set_xlabel("key j")
            ax.set_ylabel("query i")
        if gradients:
            _gradient_panel(axes[3, col], row, col == 0)
    fig.colorbar(image, ax=axes[1:3, :].ravel().tolist(), shrink=0.6,
                 label="softmax weight (grey: masked, exactly 0)")
    save_figure(fig, path)
