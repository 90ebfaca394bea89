"""`andrea bench --plot FILE.png`: time and TFLOP/s against T per implementation, log axes, one
column per (d_k, mask); on a GPU the roofline (the least time the device's peak and bandwidth
allow) and the FP32 peak drawn in."""

from __future__ import annotations

from pathlib import Path

from andrea_cli.render.plot_common import pyplot, save_figure


def _series(r, impl: str, d_k: int, causal: bool) -> list:
    """The measured points of one implementation in one panel, by T (skipped sizes left out)."""
    return sorted((m for m in r.measurements if m.impl == impl and m.d_k == d_k and m.causal == causal
                   and m.median_ms is not None), key=lambda m: m.T)


def save_bench_plot(r, path: Path) -> None:
    """r: a BenchResult (bench/sweep.py)."""
    plt = pyplot()
    panels = sorted({(m.d_k, m.causal) for m in r.measurements})
    impls = list(dict.fromkeys(m.impl for m in r.measurements))  # in the sweep's order
    colours = {impl: plt.get_cmap("tab10")(i % 10) for i, impl in enumerate(impls)}
    fig, axes = plt.subplots(2, max(len(panels), 1), figsize=(4.8 * max(len(panels), 1) + 0.6, 8.6),
                             squeeze=False, sharex="col", layout="constrained")
    no_roof = "" if r.peak is not None else "\nno roofline: a device peak is computed for GPUs only"
    threads = "" if not r.threads else f", {r.threads['limit']} BLAS thread{'s' if r.threads['limit'] > 1 else ''}"
    fig.suptitle(f"andrea bench on {r.device} (median of {r.repeats}{threads}){no_roof}", fontsize=12)
    handles = {}
    for col, (d_k, causal) in enumerate(panels):
        time_ax, rate_ax = axes[0, col], axes[1, col]
        for impl in impls:
            points = _series(r, impl, d_k, causal)
            if not points:
                continue
            speed = all(m.speed_path for m in points)
            label = impl if speed else f"{impl} (CPU build: a correctness tool, not a speed path)"
            style = dict(color=colours[impl], marker="o", ms=4, ls="-" if speed else ":")
            Ts = [m.T for m in points]
            medians = [m.median_ms for m in points]
            # the spread of the repeats as error bars: min to max around the median
            spread = [[m.median_ms - (m.min_ms if m.min_ms is not None else m.median_ms) for m in points],
                      [(m.max_ms if m.max_ms is not None else m.median_ms) - m.median_ms for m in points]]
            handles[label] = time_ax.errorbar(Ts, medians, yerr=spread, capsize=3, elinewidth=1, label=label,
                                              **style)[0]
            rate_ax.plot(Ts, [m.tflops for m in points], **style)
        roof = sorted({(m.T, m.roofline_ms, m.tflops * m.median_ms / m.roofline_ms)
                       for m in r.measurements if m.d_k == d_k and m.causal == causal
                       and m.roofline_ms and m.median_ms})
        if r.peak is not None and roof:
            label = "roofline: least time at peak FLOP/s and bandwidth"
            handles[label] = time_ax.plot([p[0] for p in roof], [p[1] for p in roof], "k--", lw=1.2, label=label)[0]
            rate_ax.plot([p[0] for p in roof], [p[2] for p in roof], "k--", lw=1.2)
            label = f"FP32 peak, {r.peak.peak_tflops:.1f} TFLOP/s"
            handles[label] = rate_ax.axhline(r.peak.peak_tflops, color="grey", lw=1, label=label)
        time_ax.set_title(f"d_k = {d_k}, {'causal' if causal else 'no'} mask", fontsize=11)
        time_ax.set_ylabel("time per run, ms (bars: min to max)")
        rate_ax.set_ylabel("TFLOP/s (4·T²·d_k per head, half if causal)")
        rate_ax.set_xlabel("T (sequence length)")
        Ts = sorted({m.T for m in r.measurements if m.d_k == d_k and m.causal == causal})
        for ax in (time_ax, rate_ax):
            ax.set_xscale("log", base=2)
            ax.set_xticks(Ts, [str(T) for T in Ts])
            ax.set_yscale("log")
            ax.grid(alpha=0.3, which="both")
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncols=min(len(handles), 3),
                   fontsize=9)
    save_figure(fig, path)
