"""generate's report as a PNG: each position's distance from generation, for the causal pass
(rounding) and the unmasked pass (the future it saw), on a log axis; and each step's time against
the keys it read."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from andrea_cli.render.plot_common import pyplot, save_figure
from andrea_cli.runs.generate import GenerateReport


def save_generate_plot(r: GenerateReport, path: Path) -> None:
    plt = pyplot()
    fig, (dist, times) = plt.subplots(1, 2, figsize=(11, 4))
    floor = 1e-12  # an exact 0 is drawn at the floor of the log axis
    t = np.arange(r.T)
    dist.plot(t, np.maximum(r.vs_unmasked, floor), color="tab:red", lw=0.9, label="unmasked pass")
    dist.plot(t, np.maximum(r.vs_causal, floor), color="tab:blue", lw=0.9, label="causal pass")
    dist.set_yscale("log")
    dist.set_xlabel("position t")
    dist.set_ylabel("max |output - generation's| (log scale)")
    dist.set_title("what training computes, against what generation produces", fontsize=10)
    dist.legend(fontsize=8)
    dist.grid(alpha=0.3, which="both")
    times.plot([s.keys for s in r.steps], r.step_ms, color="tab:green", lw=0.8)
    times.set_xlabel("cached keys read")
    times.set_ylabel("step time (ms)")
    times.set_title(f"one step: append, decode, merge ({r.backend})", fontsize=10)
    times.grid(alpha=0.3)
    fig.suptitle(f"generation, T={r.T} d_k={r.d_k} mask={r.mask} cache {r.precision}")
    save_figure(fig, path)
