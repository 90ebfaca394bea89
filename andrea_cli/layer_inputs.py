"""x and the weights of one attention layer: seeded random, initialised as GPT-2 does, or read
from --x x.npy and --weights w.npz (arrays w_q, w_k, w_v, w_o), validated like inputs.py does.
With n_kv_head K/V heads (grouped-query attention, as Llama 2 70B has it), W_K and W_V are
(d_model, n_kv_head·d_k): fewer columns, so a K/V cache n_head / n_kv_head times smaller."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from andrea_cli.defaults import DEFAULT_D_K, DEFAULT_T
from andrea_cli.errors import AndreaError
from andrea_cli.inputs import (HOST_BYTES_PER_INPUT, HOST_BYTES_PER_SCORE, check_fits_in_memory, check_sizes, load_npy_matrix,
                               load_npz_matrices, require_memory)

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
    weights: dict[str, np.ndarray]  # w_q, w_o (d_model, d_model); w_k, w_v (d_model, n_kv_head·d_k) float32
    source: str

    @property
    def T(self) -> int:
        return self.x.shape[0]

    @property
    def d_model(self) -> int:
        return self.x.shape[1]


def random_layer(T: int, d_model: int, seed: int, kv_columns: int | None = None) -> LayerInputs:
    """x with N(0, 1) entries, as a LayerNorm output is (unit variance per entry, so the scaled
    scores come out O(1)); weights as GPT-2 initialises them (see INIT_STD, W_O_STD).
    kv_columns: W_K's and W_V's, n_kv_head·d_k (d_model unless given).
    The same draws as `layer_inputs` makes for the same seed."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T, d_model), dtype=np.float32)
    return LayerInputs(x, random_weights(d_model, rng, kv_columns),
                       f"x random N(0, 1), weights {_init_text()} (seed {seed})")


def random_weights(d_model: int, rng: np.random.Generator, kv_columns: int | None = None) -> dict[str, np.ndarray]:
    kv = d_model if kv_columns is None else kv_columns
    w = {name: rng.standard_normal((d_model, kv if name in ("w_k", "w_v") else d_model), dtype=np.float32)
         for name in WEIGHT_NAMES}
    for name in ("w_q", "w_k", "w_v"):
        w[name] *= np.float32(INIT_STD)
    w["w_o"] *= np.float32(W_O_STD)
    return w


def _init_text() -> str:
    return f"GPT-2 init: W_Q/W_K/W_V N(0, {INIT_STD}), W_O N(0, {INIT_STD}/sqrt(2·{N_LAYER}))"


def load_weights(path: Path) -> dict[str, np.ndarray]:
    """w_q, w_k, w_v, w_o from one .npz, each a finite 2-D matrix (shapes checked by the caller)."""
    return load_npz_matrices(path, "--weights", WEIGHT_NAMES)


def check_weights(weights: dict[str, np.ndarray], T: int, d_model: int, kv_columns: int | None = None) -> None:
    """Each weight (d_model, d_model) for x (T, d_model), W_K and W_V (d_model, kv_columns) where
    the K/V heads are grouped: checked once, before anything is drawn."""
    for name in WEIGHT_NAMES:
        shape = weights[name].shape
        grouped = kv_columns is not None and kv_columns != d_model and name in ("w_k", "w_v")
        if grouped and shape != (d_model, kv_columns):
            raise AndreaError(f"{name} is {shape} but the layer has {kv_columns} K/V columns (n_kv_head·d_k): "
                              f"{name} must be (d_model, n_kv_head·d_k) = ({d_model}, {kv_columns}); fix the file or --n-kv-head")
        if not grouped and shape != (d_model, d_model):
            raise AndreaError(
                f"{name} is {shape} but x is {(T, d_model)}: each weight must be (d_model, d_model) = ({d_model}, {d_model})"
            )


def check_kv_heads(n_head: int, n_kv_head: int) -> None:
    """Each K/V head serves n_head / n_kv_head query heads: a whole number of them."""
    if n_kv_head < 1:
        raise AndreaError(f"--n-kv-head must be >= 1 (got {n_kv_head}): pass a positive number of K/V heads")
    if n_head % n_kv_head:
        divisors = ", ".join(str(d) for d in range(1, n_head + 1) if n_head % d == 0)
        raise AndreaError(f"--n-kv-head {n_kv_head} does not divide n_head {n_head}: each K/V head serves "
                          f"n_head / n_kv_head query heads; pick one of {divisors}")


def kv_heads_of(weights: dict[str, np.ndarray], d_model: int, n_head: int) -> int | None:
    """The K/V heads a --weights file's W_K implies (its columns / d_k), or None where that is no
    whole divisor of n_head (then check_weights names the file's shape, not a flag never given)."""
    columns, d_k = weights["w_k"].shape[-1], d_model // n_head
    heads = columns // d_k if columns % d_k == 0 else 0
    return heads if heads >= 1 and n_head % heads == 0 else None


def weight_bytes(d_model: int, kv_columns: int) -> int:
    """W_Q, W_O (d_model, d_model) and W_K, W_V (d_model, kv_columns), float32."""
    return 2 * d_model * (d_model + kv_columns) * HOST_BYTES_PER_INPUT


def check_heads(d_model: int, n_head: int) -> None:
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
    n_kv_head: int | None = None  # None: from --weights' W_K where grouped_ok, else n_head

    def defaults(self) -> dict[str, int]:
        if self.preset is None:
            return {}
        if self.preset.lower() not in PRESETS:
            raise AndreaError(f"--preset {self.preset!r} is not a preset: use one of {', '.join(PRESETS)}")
        return PRESETS[self.preset.lower()]


def layer_inputs(flags: LayerFlags, x_path: Path | None, weights_path: Path | None, seed: int, *,
                 bytes_per_score: int = HOST_BYTES_PER_SCORE, grouped_ok: bool = False) -> tuple[LayerInputs, int]:
    """x and the weights (each from its file or drawn at random) and n_head. Each size comes from
    its flag, else the files, else the preset, else the other sizes with d_k = DEFAULT_D_K, else DEFAULT_T.
    grouped_ok: the caller runs grouped K/V heads (attend; the layer's backward does not), so
    n_kv_head comes from its flag, else --weights' W_K, else n_head; the run reads it off W_K."""
    preset = flags.defaults()
    for flag, value in (("--T", flags.T), ("--d-model", flags.d_model), ("--n-head", flags.n_head)):
        if value is not None and value < 1:
            raise AndreaError(f"{flag} must be >= 1 (got {value}): pass a positive size")
    x = load_npy_matrix(x_path, "--x") if x_path is not None else None
    w = load_weights(weights_path) if weights_path is not None else None
    T, d_model = flags.T, flags.d_model
    if x is not None:
        for flag, given, actual in (("--T", T, x.shape[0]), ("--d-model", d_model, x.shape[1])):
            if given is not None and given != actual:
                raise AndreaError(f"{flag} {given} disagrees with --x {x_path} (shape {x.shape}); drop {flag} or fix the file")
        T, d_model = x.shape
    if d_model is None and w is not None:
        d_model = w["w_q"].shape[0]  # Q = x · W_Q: W_Q has d_model rows
    T = T or preset.get("T", DEFAULT_T)
    d_model = d_model or preset.get("d_model")
    n_head = flags.n_head or preset.get("n_head")
    width = flags.d_k or DEFAULT_D_K
    if d_model is None and n_head is None:  # --n-kv-head alone: the layer it groups has no size
        raise AndreaError("--n-kv-head groups the layer's K/V heads: size the layer too (--d-model, --n-head, "
                          "--preset, or --x/--weights)")
    if d_model is None:
        d_model = n_head * width
    if n_head is None:
        if d_model % width:
            raise AndreaError(f"pass --n-head: d_model {d_model} has no whole number of heads of d_k {width}")
        n_head = d_model // width
    check_heads(d_model, n_head)
    n_kv_head = flags.n_kv_head
    if n_kv_head is None and grouped_ok and w is not None:
        n_kv_head = kv_heads_of(w, d_model, n_head)
    n_kv_head = n_head if n_kv_head is None else n_kv_head
    check_kv_heads(n_head, n_kv_head)
    kv_columns = n_kv_head * (d_model // n_head)
    for flag, given in (("--d-k", flags.d_k), ("--d-v", flags.d_v)):
        if given is not None and given != d_model // n_head:
            raise AndreaError(f"{flag} {given} disagrees with d_model / n_head = {d_model // n_head}; drop {flag}")
    check_sizes(T, d_model, d_model)
    # before drawing anything: the T×T matrices of every query head, Q and the output per query
    # head but K and V per K/V head, and the weights (W_K, W_V: kv_columns wide)
    check_fits_in_memory(n_head, T, d_model // n_head, d_model // n_head, bytes_per_score=bytes_per_score,
                         kv_heads=n_kv_head)
    require_memory(weight_bytes(d_model, kv_columns), f"d_model={d_model} with its four weight matrices",
                   "use a smaller --d-model")
    if w is not None:
        check_weights(w, T, d_model, kv_columns)
    rng = np.random.default_rng(seed)
    if x is None:
        x = rng.standard_normal((T, d_model), dtype=np.float32)
    if w is None:
        w = random_weights(d_model, rng, kv_columns)
    source = (f"x {'from ' + str(x_path) if x_path else 'random N(0, 1)'}, "
              f"weights {'from ' + str(weights_path) if weights_path else _init_text()} (seed {seed})")
    return LayerInputs(x, w, source), n_head
