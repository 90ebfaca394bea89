"""compare-scaling's report as a PNG: score histograms and first-rows weight heatmaps per d_k."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from andrea_cli.masks import parse_mask
from andrea_cli.render.plot_common import pyplot, save_figure
from andrea_cli.runs.scaling import FIRST_ROWS, ScalingReport

def save_scaling_plot(r: ScalingReport, path: Path) -> None:
    plt = pyplot()
    n = len(r.rows)
    fig, axes = plt.subplots(3, n, figsize=(4.2 * n + 1, 12), squeeze=False, layout="constrained",
                             gridspec_kw={"height_ratios": [1, 1.15, 1.15]})
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
    fig.colorbar(image, ax=axes[1:, :].ravel().tolist(), shrink=0.6,
                 label="softmax weight (grey: masked, exactly 0)")
    save_figure(fig, path)
