"""The options the commands share, declared once: each flag's names, default and help (cli.py
turns a Flag into a Typer option; api.py takes the same defaults), and the option groups
`attend` and `grad` both read (RunOptions: the head's inputs, the layer's, the output)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from andrea_cli.defaults import DEFAULT_D_K, DEFAULT_T
from andrea_cli.errors import AndreaError


@dataclass(frozen=True)
class Flag:
    """One command-line option: its default, its names (the first is the long one) and help."""

    default: Any
    names: tuple[str, ...]
    help: str
    metavar: str | None = None

    def but(self, **changes) -> Flag:
        """The same flag with another help or default (verify's one case, bench's lists)."""
        return replace(self, **changes)


# The head's inputs: sizes, or files, and how the equation runs
T = Flag(None, ("--T", "-T", "--seq-len"), f"Sequence length [default: {DEFAULT_T}].")
D_K = Flag(None, ("--d-k",), f"Query/key width per head [default: {DEFAULT_D_K}].")
D_V = Flag(None, ("--d-v",), "Value width [default: d_k].")
SEED = Flag(0, ("--seed",), "Seed of the random Q, K, V.")
Q = Flag(None, ("--q",), "Q from a 2-D .npy file (T, d_k).")
K = Flag(None, ("--k",), "K from a 2-D .npy file (T, d_k).")
V = Flag(None, ("--v",), "V from a 2-D .npy file (T, d_v).")
QKV = Flag(None, ("--qkv",), "Q, K, V from one .npz with arrays q, k, v.")
MASK = Flag("causal", ("--mask",), "causal, none, or window:W (query i sees i-W+1..i).")
NO_SCALE = Flag(False, ("--no-scale",), "Skip the division by sqrt(d_k).")
BACKEND = Flag("auto", ("--backend",), "auto, cuda, cpu or numpy.")
KERNEL = Flag(None, ("--kernel",), "Run an edited copy of the kernel file.")
RACECHECK = Flag(False, ("--racecheck",), "CPU build under ThreadSanitizer told CUDA's memory model: a data race "
                                          "a GPU could expose is an error naming both lines (slower).")
TIMEOUT = Flag(None, ("--timeout",), "CPU build: the most CPU seconds one block of a launch may run "
                                     "(default: 2 s, more for a larger launch).", metavar="SECONDS")
THREADS = Flag(None, ("--threads",), "CPU build: OS threads a launch's blocks are spread over "
                                     "(default: every core).", metavar="N")

# The multi-head layer, from x
D_MODEL = Flag(None, ("--d-model",), "Run the whole multi-head layer from x (T, d_model).")
N_HEAD = Flag(None, ("--n-head",), "Heads of the layer [default: d_model / d_k].")
PRESET = Flag(None, ("--preset",), "andrea-120m: the layer at d_model 768, 12 heads, T 1024.")
X = Flag(None, ("--x",), "The layer's input x from a 2-D .npy file (T, d_model).")
LAYER_WEIGHTS = Flag(None, ("--weights",), "w_q, w_k, w_v, w_o from one .npz.")

# What comes out
JSON = Flag(False, ("--json",), "Print one JSON document instead of tables.")
PLOT = Flag(None, ("--plot",), "Save the weights, row entropy and largest weight to FILE.png.")

# The kernels' arithmetic
PRECISION = Flag("fp32", ("--precision",), "With --fused: fp32, or bf16 (tensor cores; d_k = d_v = 64 or 128).")


@dataclass
class RunOptions:
    """What `attend` and `grad` both take, as parsed; None where the user gave nothing."""

    T: int | None = None
    d_k: int | None = None
    d_v: int | None = None
    seed: int = SEED.default
    q: Path | None = None
    k: Path | None = None
    v: Path | None = None
    qkv: Path | None = None
    mask: str = MASK.default
    no_scale: bool = False
    scale: float | None = None  # the Python API's factor, used as given (PyTorch's SDPA scale=); None: 1/sqrt(d_k)
    backend: str = BACKEND.default
    kernel: Path | None = None
    racecheck: bool = False  # the CPU build under ThreadSanitizer (--backend cpu)
    as_json: bool = False
    fused: bool = False
    out: Path | None = None
    d_model: int | None = None
    n_head: int | None = None
    preset: str | None = None
    x: Path | None = None
    layer_weights: Path | None = None
    precision: str = PRECISION.default  # with fused: the FP32 kernels, or the tensor-core (bf16) ones

    @property
    def scaled(self) -> bool | float:
        """What the runs take: True (1/sqrt(d_k)), False (--no-scale) or the factor given."""
        if self.scale is not None:
            if self.no_scale:
                raise AndreaError("scale gives the factor and no_scale drops it: pass one of them")
            return float(self.scale)
        return not self.no_scale

    @property
    def wants_layer(self) -> bool:
        return any(o is not None for o in (self.d_model, self.n_head, self.preset, self.x, self.layer_weights))

    @property
    def has_qkv_files(self) -> bool:
        return any(p is not None for p in (self.q, self.k, self.v, self.qkv))
