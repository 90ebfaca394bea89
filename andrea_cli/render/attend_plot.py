"""`andrea attend --plot FILE.png`: the (T, T) weights on a log colour scale, masked cells grey,
beside each query row's entropy and largest weight (rows aligned with the heatmap's); a sliding
window narrow against T also straightened into a band panel, query by key offset, so its few
keys per row are seen at full size. For the layer: every head in a grid, as bertviz's head view
shows them (or, with --head N, head N alone as above)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np

from andrea_cli import stats
from andrea_cli.masks import parse_mask
from andrea_cli.render.plot_common import pyplot, save_figure

FLOOR = 1e-8  # visible weights below this (underflowed to 0 at large scores) are drawn at it
BAND_SHARE = 0.25  # a window narrower than this share of T gets the band panel: the heatmap shows it as a hairline


def window_band(weights: np.ndarray, W: int) -> np.ndarray:
    """(T, T) -> (T, W): row i, column o is the weight of key i - o (o = 0 the diagonal); NaN where
    i - o < 0, before the first key."""
    T = weights.shape[0]
    band = np.full((T, W), np.nan)
    for o in range(min(W, T)):
        rows = np.arange(o, T)
        band[o:, o] = weights[rows, rows - o]
    return band


def _colour_limits(w: np.ndarray, visible: np.ndarray) -> float:
    seen = w[visible]
    return max(float(seen[seen > 0].min()) if (seen > 0).any() else FLOOR, FLOOR)


def save_attend_plot(weights: np.ndarray, *, mask: str, title: str, path: Path) -> None:
    """weights (T, T), or (L, S) for L queries against S keys: one head's softmax output; mask as
    the report names it."""
    plt = pyplot()
    from matplotlib.colors import LogNorm

    L, T = weights.shape[-2:]
    spec = parse_mask(mask)
    visible = spec.visible(L, S=T)  # (L, S)
    w = weights.astype(np.float64)
    low = _colour_limits(w, visible)
    shown = np.ma.masked_where(~visible, np.maximum(w, low))  # hidden cells: "bad", drawn grey
    rows = np.arange(L)
    # keys each query may see; a row that sees none (L > S, causal) is drawn as nothing: NaN
    n_visible = np.where(visible.any(axis=1), visible.sum(axis=1), np.nan)
    band = spec.kind == "window" and spec.window < BAND_SHARE * T and L == T

    ratios = [3.2, 1, 1] + ([1.2] if band else [])
    fig, axes = plt.subplots(1, len(ratios), figsize=(14 + 3.5 * band, 6.2), sharey=True, layout="constrained",
                             gridspec_kw={"width_ratios": ratios})
    heat, ent, top = axes[:3]
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
    if band:
        zoom = axes[3]
        values = window_band(w, spec.window)
        zoom.imshow(np.ma.masked_invalid(np.maximum(values, low)), cmap=colours, norm=LogNorm(vmin=low, vmax=1.0),
                    interpolation="nearest", aspect="auto", extent=(-0.5, spec.window - 0.5, T - 0.5, -0.5))
        zoom.set_xlabel("key offset o (key j = i − o)")
        zoom.set_title(f"the window's band, straightened:\n{spec.window} keys per row at full size", fontsize=10)
    heat.set_ylim(L - 0.5, -0.5)  # query 0 at the top, as in the course's triangle
    for ax in (ent, top):
        ax.grid(alpha=0.3)
    save_figure(fig, path)


def save_heads_grid(weights: np.ndarray, *, mask: str, title: str, path: Path, head_stats=None) -> None:
    """weights (H, T, T): every head of the layer, side by side on one log colour scale."""
    plt = pyplot()
    from matplotlib.colors import LogNorm

    H, T = weights.shape[0], weights.shape[-1]
    visible = parse_mask(mask).visible(T)
    w = weights.astype(np.float64)
    low = min(_colour_limits(w[h], visible) for h in range(H))
    columns = min(H, 4 if H > 6 else 3 if H > 4 else H)
    grid_rows = -(-H // columns)
    fig, axes = plt.subplots(grid_rows, columns, figsize=(3.3 * columns + 1.2, 3.3 * grid_rows + 0.9),
                             squeeze=False, layout="constrained")
    fig.suptitle(title, fontsize=12)
    colours = plt.get_cmap("magma").with_extremes(bad="lightgrey")
    image = None
    for h, ax in enumerate(axes.ravel()):
        if h >= H:
            ax.axis("off")
            continue
        shown = np.ma.masked_where(~visible, np.maximum(w[h], low))
        image = ax.imshow(shown, cmap=colours, norm=LogNorm(vmin=low, vmax=1.0), interpolation="nearest")
        detail = ""
        if head_stats is not None:
            peak = head_stats[h].weight_stats.softmax
            detail = f"\nmean max p {peak.mean_max_weight:.2f}, exp(H) {peak.mean_effective_positions:.3g}"
        ax.set_title(f"head {h}{detail}", fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    axes[0, 0].set_ylabel("query i (top: 0)")
    axes[-1, 0].set_xlabel("key j (left: 0)")
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.7, label="softmax weight, log scale (grey: masked)")
    save_figure(fig, path)


def save_attend_report_plot(report, path: Path, head: int | None = None) -> None:
    """One head's report; or the layer's: every head in a grid, or head `head` alone."""
    from andrea_cli.runs.layer import LayerReport

    run, weights, which = report, report.weights, ""
    layer = isinstance(report, LayerReport)
    if layer:
        if head is not None:
            weights, which = report.weights[head], f", head {head} of {report.n_head}"
        else:
            which = f", all {report.n_head} heads"
    scaled = f"÷ sqrt({run.d_k})" if run.scaled is True else f"scale {run.scale:.4g}" if run.scaled else "unscaled"
    inputs = textwrap.shorten(f"backend {run.backend}; inputs: {run.source}", width=150, placeholder=" ...")
    sizes = f"T={run.T}" if run.S == run.T else f"L={run.T} S={run.S}"
    title = f"andrea attend: {sizes}, d_k={run.d_k}, mask={run.mask}, {scaled}{which}\n{inputs}"
    if layer and head is None:
        save_heads_grid(report.weights, mask=run.mask, title=title, path=path, head_stats=report.heads)
    else:
        save_attend_plot(weights, mask=run.mask, title=title, path=path)
