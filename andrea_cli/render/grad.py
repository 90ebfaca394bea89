"""`andrea grad`'s report as Rich tables: shapes, gradient norms, how much reaches the scores,
the float64 check, per-stage timings."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from andrea_cli.render.common import fmt, lengths_note, lengths_text, print_header, scale_text, shapes_table, timings_table
from andrea_cli.render.kernels import print_kernels

NORM_LABELS = {  # what each gradient is, in the order the chain rule meets them
    "d_out": "dO, the upstream gradient",
    "dv": "dV = P^T · dO",
    "d_weights": "dP = dO · V^T",
    "d_scores": "dS = P ∘ (dP − rowsum(dP ∘ P))",
    "dq": "dQ = scale · dS · K",
    "dk": "dK = scale · dS^T · Q",
    "dx": "dx = dQ·W_Q^T + dK·W_K^T + dV·W_V^T",
    "dw_q": "dW_Q = x^T · dQ",
    "dw_k": "dW_K = x^T · dK",
    "dw_v": "dW_V = x^T · dV",
    "dw_o": "dW_O = concat^T · dOut",
}


# FlashAttention's rule for a bf16 backward: its error within this many times a bf16 autograd's
AUTOGRAD_FACTOR = 3


def print_bf16_verdict(console: Console, errors: dict[str, float], yardstick: dict[str, float]) -> None:
    """The bf16 run's max |error| / max |exact| per gradient beside an emulated bf16 autograd's."""
    ratios = {name: errors[name] / yardstick[name] if yardstick[name] else (0.0 if not errors[name] else float("inf"))
              for name in errors}
    parts = ", ".join(f"{name} {fmt(errors[name])} ({ratios[name]:.2f}x)" for name in errors)
    ok = max(ratios.values()) <= AUTOGRAD_FACTOR
    console.print(f"against the float64 NumPy backward, max |error| / max |exact| (x a bf16 autograd's, "
                  f"emulated): {parts}" + (f" [green](within {AUTOGRAD_FACTOR}x: bf16 rounding)[/green]" if ok
                                           else f" [bold red](over {AUTOGRAD_FACTOR}x)[/bold red]"))


def render_grad(console: Console, r) -> None:
    """A GradReport (one head) or a LayerGradReport (the layer: it has n_head)."""
    layer = hasattr(r, "n_head")
    grouped = layer and r.n_kv_head != r.n_head
    kv = f" ({r.n_head // r.n_kv_head} per K/V head, {r.n_kv_head} K/V)" if grouped else ""
    what = (f"the layer, d_model={r.d_model}, {r.n_head} heads{kv} of d_k={r.d_k}" if layer else
            f"d_k={r.d_k} d_v={r.d_v}{', fused kernels' if r.fused else ''}"
            f"{', bf16 on tensor cores' if getattr(r, 'precision', 'fp32') == 'bf16' else ''}")
    print_header(console, r.notices,
                 f"[bold]Backward: dQ, dK, dV of softmax(mask(Q·K^T / sqrt(d_k))) · V[/bold]  "
                 f"{lengths_text(r.T, r.S)} {what} mask={r.mask} scale={scale_text(r.d_k, r.scaled, r.scale)}",
                 r.backend, r.device, r.source)
    print_kernels(console, r)
    note = None if layer else lengths_note(r.T, r.S, r.mask)
    if note:
        console.print(note)
    console.print(shapes_table("Gradient shapes", r.shapes))

    norms = Table(title="Gradient norms (Frobenius)", title_justify="left")
    norms.add_column("gradient")
    norms.add_column("norm", justify="right")
    for name, label in NORM_LABELS.items():
        if name in r.grad_norms:
            value = r.grad_norms[name]
            norms.add_row(label, f"- (fused: no {'T×T' if r.S == r.T else 'L×S'})" if value is None else fmt(value))
    console.print(norms)

    if r.score_share is not None:
        console.print(f"‖dS‖ / ‖dP‖ = {fmt(r.score_share)}: the share of the gradient reaching the weights that "
                      f"the softmax passes on to the scores")
        console.print(f"{r.quiet_rows:.1%} of rows pass back almost nothing (‖dS_i‖ < 1% of ‖P_i ∘ dP_i‖: "
                      f"a saturated softmax, whose gradient vanishes)")
    yardstick = getattr(r, "autograd_bf16_rel_error", None)
    if r.max_rel_error is not None and yardstick is not None:
        print_bf16_verdict(console, r.max_rel_error, yardstick)
    elif r.max_rel_error is not None:
        worst = max(r.max_rel_error.values())
        parts = ", ".join(f"{name} {fmt(e)}" for name, e in r.max_rel_error.items())
        console.print(f"against the float64 NumPy backward, max |error| / max |exact|: {parts}"
                      + (" [green](float32 rounding)[/green]" if worst < 1e-4 else " [bold red](too large)[/bold red]"))

    stages = r.attention_timings_ms if layer else r.timings_ms
    host = [(f"host: {stage}", ms) for stage, ms in r.host_timings_ms.items()
            if stage not in ("attention", "total")] if layer else []
    console.print(timings_table(
        [(stage, ms) for stage, ms in stages.items() if stage != "total"],
        {} if layer else r.transfer_ms, 0.0 if layer else r.load_ms,
        total=("total", stages["total"]), after_total=host,
        caption="the CPU build emulates each CUDA thread: these times say nothing about a GPU"
        if r.backend == "cpu" else None))
