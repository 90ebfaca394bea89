"""One multi-head attention layer, from x to the layer's output, as GPT-2 computes it:

    Q = x·W_Q, K = x·W_K, V = x·W_V            (T, d_model) each
    head h = Attention(Q, K, V restricted to columns h·d_k .. (h+1)·d_k)   (T, d_k)
    output = concat(head 0 .. head H-1) · W_O  (T, d_model)

The projections, the split, the concatenation and W_O run on the host in NumPy float32 (they
are plain matmuls, not what andrea teaches); the attention runs on the backend, every head in
one launch per stage (heads on the grid's z dimension).
"""

from __future__ import annotations

import math
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from andrea_cli import reference, stats
from andrea_cli.backends.base import Backend
from andrea_cli.errors import AndreaError
from andrea_cli.inputs import _as_matrix, _check_readable, _load_npy, check_fits_in_memory, check_sizes
from andrea_cli.masks import MaskSpec
from andrea_cli.pipeline import CORNER, AttentionReport

WEIGHT_NAMES = ("w_q", "w_k", "w_v", "w_o")
PRESETS = {"andrea-120m": {"d_model": 768, "n_head": 12, "T": 1024}}  # d_k = 768 / 12 = 64

# Initialisation as GPT-2 (and nanoGPT) does it: every weight N(0, 0.02), and the projections
# that write into the residual stream (W_O here) N(0, 0.02 / sqrt(2·n_layer)), so the residual's
# variance does not grow with depth. ANDREA-120M is taken to be GPT-2 small's depth: 12 layers.
INIT_STD = 0.02
N_LAYER = 12
W_O_STD = INIT_STD / math.sqrt(2 * N_LAYER)


@dataclass
class LayerInputs:
    x: np.ndarray  # (T, d_model) float32
    weights: dict[str, np.ndarray]  # w_q, w_k, w_v, w_o: (d_model, d_model) float32 each
    source: str

    @property
    def T(self) -> int:
        return self.x.shape[0]

    @property
    def d_model(self) -> int:
        return self.x.shape[1]


def random_layer(T: int, d_model: int, seed: int) -> LayerInputs:
    """x with N(0, 1) entries, as a LayerNorm output is (unit variance per entry, so the scaled
    scores come out O(1)); weights as GPT-2 initialises them (see INIT_STD, W_O_STD)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T, d_model), dtype=np.float32)
    return LayerInputs(x, random_weights(d_model, rng), f"random x N(0, 1), {_init_text()} (seed {seed})")


def random_weights(d_model: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    w = {name: rng.standard_normal((d_model, d_model), dtype=np.float32) for name in WEIGHT_NAMES}
    for name in ("w_q", "w_k", "w_v"):
        w[name] *= np.float32(INIT_STD)
    w["w_o"] *= np.float32(W_O_STD)
    return w


def _init_text() -> str:
    return f"GPT-2 init: W_Q/W_K/W_V N(0, {INIT_STD}), W_O N(0, {INIT_STD}/sqrt(2·{N_LAYER}))"


def load_weights(path: Path) -> dict[str, np.ndarray]:
    """w_q, w_k, w_v, w_o from one .npz, each a finite 2-D matrix (shapes checked by the caller)."""
    fix = "save with np.savez(path, w_q=w_q, w_k=w_k, w_v=w_v, w_o=w_o)"
    _check_readable(path, "--weights", (".npz",))
    try:
        with np.load(path, allow_pickle=False) as archive:
            missing = [name for name in WEIGHT_NAMES if name not in archive.files]
            if missing:
                raise AndreaError(
                    f"--weights {path}: no array named {', '.join(missing)} (it has {', '.join(archive.files) or 'none'}); {fix}"
                )
            return {name: _as_matrix(archive[name], f"--weights {path} [{name}]") for name in WEIGHT_NAMES}
    except AndreaError:
        raise
    except ValueError as exc:
        if "pickle" in str(exc).lower() or "object" in str(exc).lower():
            raise AndreaError(f"--weights {path}: holds pickled/object data, which andrea never loads; save numeric arrays with np.savez") from None
        raise AndreaError(f"--weights {path}: not a valid .npz file ({exc}); {fix}") from None
    except (OSError, EOFError, zipfile.BadZipFile) as exc:
        raise AndreaError(f"--weights {path}: cannot read it as .npz ({exc.__class__.__name__}); {fix}") from None


def check_layer(inputs: LayerInputs, n_head: int) -> None:
    d_model = inputs.d_model
    for name in WEIGHT_NAMES:
        shape = inputs.weights[name].shape
        if shape != (d_model, d_model):
            raise AndreaError(
                f"{name} is {shape} but x is {inputs.x.shape}: each weight must be (d_model, d_model) = ({d_model}, {d_model})"
            )
    if n_head < 1:
        raise AndreaError(f"--n-head must be >= 1 (got {n_head}): pass a positive number of heads")
    if d_model % n_head:
        raise AndreaError(
            f"d_model {d_model} is not divisible by n_head {n_head}: each head takes d_k = d_model / n_head columns; "
            f"pick --n-head dividing {d_model}"
        )


@dataclass(frozen=True)
class LayerFlags:
    """The sizes as given on the command line (None: not given), and the preset's defaults."""

    T: int | None = None
    d_model: int | None = None
    n_head: int | None = None
    d_k: int | None = None
    d_v: int | None = None
    preset: str | None = None

    def defaults(self) -> dict[str, int]:
        if self.preset is None:
            return {}
        if self.preset.lower() not in PRESETS:
            raise AndreaError(f"--preset {self.preset!r} is not a preset: use one of {', '.join(PRESETS)}")
        return PRESETS[self.preset.lower()]


def layer_inputs(flags: LayerFlags, x_path: Path | None, weights_path: Path | None, seed: int
                 ) -> tuple[LayerInputs, int]:
    """x and the weights (each from its file or drawn at random) and n_head. Each size comes from
    its flag, else the files, else the preset, else the other sizes with d_k = 64, else 1024 for T."""
    preset = flags.defaults()
    for flag, value in (("--T", flags.T), ("--d-model", flags.d_model), ("--n-head", flags.n_head)):
        if value is not None and value < 1:
            raise AndreaError(f"{flag} must be >= 1 (got {value}): pass a positive size")
    x = _load_npy(x_path, "--x") if x_path is not None else None
    w = load_weights(weights_path) if weights_path is not None else None
    T, d_model = flags.T, flags.d_model
    if x is not None:
        for flag, given, actual in (("--T", T, x.shape[0]), ("--d-model", d_model, x.shape[1])):
            if given is not None and given != actual:
                raise AndreaError(f"{flag} {given} disagrees with --x {x_path} (shape {x.shape}); drop {flag} or fix the file")
        T, d_model = x.shape
    if d_model is None and w is not None:
        d_model = w["w_q"].shape[0]  # Q = x · W_Q: W_Q has d_model rows
    T = T or preset.get("T", 1024)
    d_model = d_model or preset.get("d_model")
    n_head = flags.n_head or preset.get("n_head")
    width = flags.d_k or 64
    if d_model is None:
        d_model = n_head * width
    if n_head is None:
        if d_model % width:
            raise AndreaError(f"pass --n-head: d_model {d_model} has no whole number of heads of d_k {width}")
        n_head = d_model // width
    if d_model % n_head:
        raise AndreaError(
            f"d_model {d_model} is not divisible by n_head {n_head}: each head takes d_k = d_model / n_head columns; "
            f"pick --n-head dividing {d_model}"
        )
    for flag, given in (("--d-k", flags.d_k), ("--d-v", flags.d_v)):
        if given is not None and given != d_model // n_head:
            raise AndreaError(f"{flag} {given} disagrees with d_model / n_head = {d_model // n_head}; drop {flag}")
    check_sizes(T, d_model, d_model)
    check_fits_in_memory(n_head, T)  # before drawing T×d numbers, refuse what cannot fit
    rng = np.random.default_rng(seed)
    if x is None:
        x = rng.standard_normal((T, d_model), dtype=np.float32)
    if w is None:
        w = random_weights(d_model, rng)
    source = (f"x {'from ' + str(x_path) if x_path else 'random N(0, 1)'}, "
              f"weights {'from ' + str(weights_path) if weights_path else _init_text()} (seed {seed})")
    inputs = LayerInputs(x, w, source)
    check_layer(inputs, n_head)
    return inputs, n_head


def split_heads(a: np.ndarray, n_head: int) -> np.ndarray:
    """(T, d_model) -> (H, T, d_k), contiguous: head h is columns h·d_k .. (h+1)·d_k."""
    T, d_model = a.shape
    return np.ascontiguousarray(a.reshape(T, n_head, d_model // n_head).transpose(1, 0, 2))


def concat_heads(a: np.ndarray) -> np.ndarray:
    """(H, T, d_v) -> (T, H·d_v): head h's output lands in columns h·d_v .. (h+1)·d_v."""
    H, T, d_v = a.shape
    return np.ascontiguousarray(a.transpose(1, 0, 2).reshape(T, H * d_v))


def layer_reference(x, weights: dict[str, np.ndarray], n_head: int, mask: MaskSpec, scaled: bool = True) -> np.ndarray:
    """The whole layer in float64, the yardstick for tests.        (T, d_model) -> (T, d_model)"""
    x = x.astype(np.float64)
    w = {name: a.astype(np.float64) for name, a in weights.items()}
    q, k, v = (split_heads(x @ w[name], n_head) for name in ("w_q", "w_k", "w_v"))  # (H, T, d_k)
    heads = reference.attention(q, k, v, mask, scaled)  # (H, T, d_k)
    return concat_heads(heads) @ w["w_o"]  # (T, d_model)


@dataclass
class HeadStats:
    head: int
    columns: tuple[int, int]  # the slice of W_Q/W_K/W_V (and of concat) this head owns
    row_sums: stats.RowSums
    magnitude_unscaled: stats.Magnitude
    magnitude_scaled: stats.Magnitude
    softmax: stats.Peakiness
    hidden_weight_max: float | None

    def to_json(self) -> dict:
        return {
            "head": self.head,
            "columns": list(self.columns),
            "row_sums": stats.as_dict(self.row_sums),
            "magnitude": {"unscaled": stats.as_dict(self.magnitude_unscaled), "scaled": stats.as_dict(self.magnitude_scaled)},
            "softmax": stats.as_dict(self.softmax),
            "hidden_weight_max": self.hidden_weight_max,
        }


@dataclass
class LayerReport:
    """The whole layer's report: `attention` holds the single-head contract's fields computed over
    all heads together (its `output` is the layer's output), plus the per-head statistics."""

    attention: AttentionReport
    n_head: int
    d_model: int
    heads: list[HeadStats]
    layer_timings_ms: dict[str, float]  # host work (projections, split, concat, w_o) and the total
    output: np.ndarray = field(repr=False)  # (T, d_model)
    weights: np.ndarray = field(repr=False)  # (H, T, T)

    def to_json(self) -> dict:
        return {
            **self.attention.to_json(),
            "n_head": self.n_head,
            "d_model": self.d_model,
            "heads": [h.to_json() for h in self.heads],
            "layer_timings_ms": self.layer_timings_ms,
        }


def _score_stats(scores, scaled_scores, weights, visible):
    hidden = weights[..., ~visible]
    return (stats.row_sums(weights), stats.magnitude(scores), stats.magnitude(scaled_scores),
            stats.peakiness(weights), float(hidden.max()) if hidden.size else None)


def run_layer(inputs: LayerInputs, n_head: int, backend: Backend, mask: MaskSpec, scaled: bool,
              notices: list[str] | None = None) -> LayerReport:
    check_layer(inputs, n_head)
    T, d_model = inputs.T, inputs.d_model
    d_k = d_model // n_head
    check_fits_in_memory(n_head, T)
    w = inputs.weights
    host: dict[str, float] = {}

    start = time.perf_counter()
    q, k, v = (inputs.x @ w[name] for name in ("w_q", "w_k", "w_v"))  # (T, d_model) float32
    host["projections"] = (time.perf_counter() - start) * 1e3
    start = time.perf_counter()
    qh, kh, vh = (split_heads(a, n_head) for a in (q, k, v))  # (H, T, d_k)
    host["split"] = (time.perf_counter() - start) * 1e3

    out = backend.attention(qh, kh, vh, mask=mask, scaled=scaled)  # one launch per stage, all heads

    start = time.perf_counter()
    concat = concat_heads(out.output)  # (T, d_model)
    host["concat"] = (time.perf_counter() - start) * 1e3
    start = time.perf_counter()
    output = concat @ w["w_o"]  # (T, d_model)
    host["w_o"] = (time.perf_counter() - start) * 1e3
    host["attention"] = out.timings_ms["total"]
    host["total"] = sum(host.values())

    factor = 1.0 / math.sqrt(d_k)
    # The scaled magnitudes are shown even with --no-scale, to compare: then computed here.
    scaled_scores = out.scaled if scaled else out.scores * np.float32(factor)
    visible = mask.visible(T)
    heads = [HeadStats(h, (h * d_k, (h + 1) * d_k), *_score_stats(out.scores[h], scaled_scores[h], out.weights[h], visible))
             for h in range(n_head)]
    row_sums, mag_raw, mag_scaled, softmax, hidden_max = _score_stats(out.scores, scaled_scores, out.weights, visible)
    w_shape = [d_model, d_model]
    attention = AttentionReport(
        backend=backend.name,
        device=backend.device_name(),
        source=inputs.source,
        T=T, d_k=d_k, d_v=d_k,
        mask=str(mask),
        scaled=scaled,
        scale=factor if scaled else 1.0,
        shapes={"x": [T, d_model], "w_q": w_shape, "w_k": w_shape, "w_v": w_shape,
                "q": [n_head, T, d_k], "k": [n_head, T, d_k], "v": [n_head, T, d_k],
                "scores": [n_head, T, T], "weights": [n_head, T, T], "heads": [n_head, T, d_k],
                "concat": [T, d_model], "w_o": w_shape, "output": [T, d_model]},
        row_sums=row_sums,
        magnitude_unscaled=mag_raw,
        magnitude_scaled=mag_scaled,
        softmax=softmax,
        hidden_weight_max=hidden_max,
        timings_ms=out.timings_ms,
        transfer_ms=out.transfer_ms,
        load_ms=out.load_ms,
        corner=out.weights[0, :CORNER, :CORNER].astype(float).round(6).tolist(),  # head 0
        notices=list(notices or []),
        weights=out.weights,
        output=output,
    )
    return LayerReport(attention, n_head, d_model, heads, host, output=output, weights=out.weights)
