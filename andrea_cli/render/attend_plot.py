"""`andrea attend --plot FILE.png`: the (T, T) weights on a log colour scale, masked cells grey,
beside each query row's entropy and largest weight (rows aligned with the heatmap's)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np

from andrea_cli import stats
from andrea_cli.masks import parse_mask
from andrea_cli.render.plot_common import pyplot, save_figure

FLOOR = 1e-8  # visible weights below this (underflowed to 0 at large scores) are drawn at it


def save_attend_plot(weights: np.ndarray, *, mask: str, title: str, path: Path) -> None:
    """weights (T, T): one head's softmax output; mask as the report names it."""
    plt = pyplot()
    from matplotlib.colors import LogNorm

    T = weights.shape[-1]
    visible = parse_mask(mask).visible(T)  # (T, T)
    w = weights.astype(np.float64)
    seen = w[visible]
    low = max(float(seen[seen > 0].min()) if (seen > 0).any() else FLOOR, FLOOR)
    shown = np.ma.masked_where(~visible, np.maximum(w, low))  # hidden cells: "bad", drawn grey
    rows = np.arange(T)
    n_visible = visible.sum(axis=1)  # (T,) keys each query may see

    fig, (heat, ent, top) = plt.subplots(1, 3, figsize=(14, 6.2), sharey=True, layout="constrained",
                                         gridspec_kw={"width_ratios": [3.2, 1, 1]})
    fig.suptitle(title, fontsize=12)
    colours = plt.get_cmap("magma").with_extremes(bad="lightgrey")
    image = heat.imshow(shown, cmap=colours, norm=LogNorm(vmin=low, vmax=1.0), interpolation="nearest",
                        aspect="auto")
    heat.set_xlabel("key j")
    heat.set_ylabel("query i")
    heat.set_title("softmax weights, log colour scale (grey: masked, exactly 0)", fontsize=10)
    fig.colorbar(image, ax=heat, shrink=0.8, pad=0.01, label="weight")

    # dashed: what a uniform row over the keys it may see would give, the least peaky possible
    ent.plot(stats.row_entropy(w), rows, color="tab:blue", lw=1)
    ent.plot(np.log(n_visible), rows, color="black", lw=1, ls="--")
    ent.set_xlabel("nats")
    ent.set_title("row entropy H\n(dashed: uniform, log(keys seen))", fontsize=10)

    top.plot(w.max(axis=1), rows, color="tab:red", lw=1)
    top.plot(1.0 / n_visible, rows, color="black", lw=1, ls="--")
    top.set_xscale("log")
    top.set_xlabel("weight (log scale)")
    top.set_title("largest weight per row\n(dashed: uniform, 1 / keys seen)", fontsize=10)
    heat.set_ylim(T - 0.5, -0.5)  # query 0 at the top, as in the course's triangle
    for ax in (ent, top):
        ax.grid(alpha=0.3)
    save_figure(fig, path)


def save_attend_report_plot(report, path: Path) -> None:
    """One head's report, or the layer's (its head 0 drawn, the title says so)."""
    from andrea_cli.runs.layer import LayerReport

    head, weights, which = report, report.weights, ""
    if isinstance(report, LayerReport):
        head, weights, which = report.attention, report.weights[0], f", head 0 of {report.n_head}"
    scaled = f"÷ sqrt({head.d_k})" if head.scaled else "unscaled"
    inputs = textwrap.shorten(f"backend {head.backend}; inputs: {head.source}", width=150, placeholder=" ...")
    title = f"andrea attend: T={head.T}, d_k={head.d_k}, mask={head.mask}, {scaled}{which}\n{inputs}"
    save_attend_plot(weights, mask=head.mask, title=title, path=path)
