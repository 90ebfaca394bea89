"""What `andrea grad` runs: the backward pass of one head (staged or fused) or of the whole layer,
from `attend`'s inputs and an upstream gradient dO. One direction, as attend's: every option
checked, the inputs and dO made or loaded, the backend chosen, the kernels run, one report made,
the gradients saved."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from andrea_cli.commands.attend import check_given_arrays, check_precision, head_inputs
from andrea_cli.commands.backend import choose_backend
from andrea_cli.commands.options import GradOptions
from andrea_cli.errors import AndreaError
from andrea_cli.inputs import QKV, check_seed, load_npy_matrix
from andrea_cli.masks import MaskSpec, parse_mask
from andrea_cli.outputs import check_writable, save_npz_atomic
from andrea_cli.runs.gradient_flow import d_out_for

# The staged backward holds the forward's four T×T arrays and dP, dS, on the device and the host,
# and the float64 check its own: about twice what a forward run needs per score.
BACKWARD_BYTES_PER_SCORE = 128


def check_combinations(o: GradOptions) -> None:
    check_seed(o.seed)
    if o.wants_layer and o.has_qkv_files:
        raise AndreaError("--q/--k/--v/--qkv give one head's Q, K, V; the layer flags "
                          "(--d-model, --n-head, --n-kv-head, --preset, --x, --weights) start from x: pass one or "
                          "the other")
    if o.wants_layer and (o.T_q is not None or o.T_k is not None):
        raise AndreaError("--T-q/--T-k size one head's queries and keys; the layer attends x to itself "
                          "(one --T): drop --T-q/--T-k, or drop the layer flags")
    if o.wants_layer and o.fused:
        raise AndreaError("--fused works on one head: drop it, or drop the layer flags")
    if o.fused and o.backend == "numpy":
        raise AndreaError("--fused runs the fused backward kernels, on --backend cuda or cpu; the NumPy path has "
                          "no fused kernel (drop --fused to run it)")
    check_precision(o)


def upstream_gradient(o: GradOptions, T: int, width: int, what: str) -> np.ndarray:
    """dO from --d-out (checked against the output's shape), or seeded N(0, 1).     (T, width)
    T: the output's rows, the L queries."""
    if o.d_out is None:
        return d_out_for(T, width, o.seed)[0]
    d_out = load_npy_matrix(o.d_out, "--d-out")
    if d_out.shape != (T, width):
        raise AndreaError(f"--d-out {o.d_out} is {d_out.shape} but the {what} is ({T}, {width}): "
                          f"dO must have the output's shape")
    return d_out


def run_grad_head(data: QKV, d_out: np.ndarray, *, backend: str, kernel: Path | None, mask: MaskSpec,
                  scaled: bool, fused: bool = False, precision: str = "fp32",
                  racecheck: bool = False):
    """One head's backward (also the Python API's), staged or fused (fp32 or bf16), on the backend
    named. bf16: the report also gets an emulated bf16 autograd's error, the yardstick its own
    error is read against (FlashAttention's rule: within 3x of it)."""
    from andrea_cli.runs.head_backward import CHECK_MAX_T, relative_errors, run_backward

    chosen, notices = choose_backend(backend, kernel, fused=fused, racecheck=racecheck)
    report = run_backward(data, d_out, chosen, mask, scaled=scaled, fused=fused, notices=notices,
                          precision=precision)
    if precision == "bf16" and max(data.T, data.S) <= CHECK_MAX_T:
        from andrea_cli.verification.bf16_backward import autograd_bf16, exact_gradients

        q, k, v, do = (a if data.H is not None else a[None] for a in (data.q, data.k, data.v, d_out))  # (H, L, d)
        emulated, exact = autograd_bf16(q, k, v, do, mask, scaled), exact_gradients(q, k, v, do, mask, scaled)
        report.autograd_bf16_rel_error = relative_errors(
            {name: getattr(emulated, name) for name in ("dq", "dk", "dv")},
            {name: getattr(exact, name) for name in ("dq", "dk", "dv")})
    return report


def check_options(o: GradOptions) -> MaskSpec:
    """Every option, alone and together, before anything is drawn or loaded; the mask it names."""
    check_combinations(o)
    mask = parse_mask(o.mask)
    check_writable(o.out, "--out", suffix=".npz")
    return mask


def run_grad(o: GradOptions, data: QKV | None = None, d_out: np.ndarray | None = None):
    """GradReport (one head, staged or fused) or LayerGradReport (layer flags), in one direction:
    the options checked, the inputs and dO built, the backend chosen, the kernels run, one report
    made, the gradients saved. data, d_out: what the Python API was given as arrays (d_out:
    (..., T, d_v), else --d-out or seeded)."""
    mask = check_options(o)
    report = grad_layer(o, mask) if o.wants_layer else grad_head(o, mask, data, d_out)
    if o.out is not None:
        save_npz_atomic(o.out, report.arrays())
    return report


def grad_layer(o: GradOptions, mask: MaskSpec):
    """x, the weights and dO built (and checked) once, then every head's backward on the backend chosen."""
    from andrea_cli.layer_inputs import LayerFlags, layer_inputs
    from andrea_cli.runs.layer_backward import run_layer_backward

    inputs, n_head = layer_inputs(LayerFlags(o.T, o.d_model, o.n_head, o.d_k, o.d_v, o.preset, o.n_kv_head),
                                  o.x, o.layer_weights, o.seed, bytes_per_score=BACKWARD_BYTES_PER_SCORE,
                                  grouped_ok=True)
    d_out = upstream_gradient(o, inputs.T, inputs.d_model, "layer's output")
    backend, notices = choose_backend(o.backend, o.kernel, racecheck=o.racecheck)
    return run_layer_backward(inputs, n_head, d_out, backend, mask, scaled=o.scaled, notices=notices)


def grad_head(o: GradOptions, mask: MaskSpec, data: QKV | None, d_out: np.ndarray | None):
    """One head's backward (or, from the Python API, H heads'): Q, K, V and dO built (or the API's
    arrays checked) once, then run on the backend chosen."""
    if data is not None:
        check_given_arrays(o, data, BACKWARD_BYTES_PER_SCORE)
    else:
        data = head_inputs(o, BACKWARD_BYTES_PER_SCORE)
    if d_out is None:  # dO is the output's shape: (L, d_v), L queries against S keys
        d_out = upstream_gradient(o, data.T, data.d_v, "output")
        if data.H is not None:  # every head the same seeded dO
            d_out = np.broadcast_to(d_out, (data.H, data.T, data.d_v)).copy()
    return run_grad_head(data, d_out, backend=o.backend, kernel=o.kernel, mask=mask, scaled=o.scaled,
                         fused=o.fused, precision=o.precision, racecheck=o.racecheck)
