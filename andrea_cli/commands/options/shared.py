"""The options several commands share, declared once (flags, default, help); a command takes one
by a field `d_k: int | None = D_K.field()`, or a variant: `SEED.but(help=...).field()`."""

from __future__ import annotations

import math

from andrea_cli.commands.options.declare import Option
from andrea_cli.defaults import DEFAULT_D_K, DEFAULT_T
from andrea_cli.errors import AndreaError


def check_scale(scale) -> float | bool | None:
    """PyTorch's convention: None is 1/sqrt(d_k); a number is the factor itself, used as given and
    recorded. True and False keep their meaning (1/sqrt(d_k), no scaling): True becomes None."""
    import numpy as np  # here, not at the top: the command line starts without NumPy

    if isinstance(scale, (bool, np.bool_)):
        return None if scale else False
    if scale is None:
        return None
    if isinstance(scale, (int, float, np.integer, np.floating)) and math.isfinite(scale) and scale > 0:
        return float(scale)
    raise AndreaError(f"scale={scale!r}: pass None (1/sqrt(d_k)), False (no scaling) or a positive number "
                      "used as given, e.g. scale=0.125")


def check_variant(value) -> str | None:
    """Python's variant=: a fused kernel's name, or its number (variant=7)."""
    import numpy as np  # here, not at the top: the command line starts without NumPy

    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return str(int(value))
    raise AndreaError(f"variant={value!r}: pass a fused kernel's name or number, e.g. variant='kernel7' or 7")


# The head's inputs: sizes, or files, and how the equation runs
SEQ_LEN = Option(("--T", "-T", "--seq-len"), f"Sequence length [default: {DEFAULT_T}].")
QUERIES = Option(("--T-q",), "Queries L, against --T-k keys [default: --T]; with causal, the last L positions.",
                 metavar="L")
KEYS = Option(("--T-k",), "Keys and values S [default: --T].", metavar="S")
D_K = Option(("--d-k",), f"Query/key width per head [default: {DEFAULT_D_K}].")
D_V = Option(("--d-v",), "Value width [default: d_k].")
SEED = Option(("--seed",), "Seed of the random Q, K, V.", default=0)
Q = Option(("--q",), "Q from a 2-D .npy file (L, d_k).")
K = Option(("--k",), "K from a 2-D .npy file (S, d_k): S keys, S = L or not.")
V = Option(("--v",), "V from a 2-D .npy file (S, d_v).")
QKV = Option(("--qkv",), "Q, K, V from one .npz with arrays q, k, v.")
MASK = Option(("--mask",), "causal, none, window:W (query i sees keys i-W+1..i), window:L,R (two-sided, as FlashAttention's window_size: i-L..i+R), sinks:N,window:W (the first N keys seen by every query beside its window, StreamingLLM's attention sinks), alibi (causal plus ALiBi's bias -m_h*(i-j) on head h's scores, m_h = 2^(-8(h+1)/H); alibi,window:W with a window). Terms join with commas. With L queries and S keys (L != S) the queries are the last L positions (bottom-right, as FlashAttention >= 2.1; SDPA's is_causal is top-left: andrea_cli.scaled_dot_product_attention); a query that sees no key gets zeros.", default="causal")
SCALE = Option(("--no-scale",), "Skip the division by sqrt(d_k).", off_switch=True, check=check_scale)
BACKEND = Option(("--backend",), "auto, cuda, cpu or numpy.", default="auto")
KERNEL = Option(("--kernel",), "Run an edited copy of the kernel file (e.g. --kernel cuda/microgpt_cuda.cu).")
PLAN = Option(("--plan",), "The staged kernels: fast (register-tiled), or textbook (scores_kernel1, "
                           "scale_kernel1, mask_kernel1, softmax_kernel1, av_kernel1, as the course writes them).",
              default="fast")
FUSED = Option(("--fused",), "One fused kernel; no T×T matrix (cuda, cpu).", default=False)
PRECISION = Option(("--precision",), "With --fused: fp32, or bf16 (tensor cores; d_k = d_v = 64 or 128).",
                   default="fp32")
# the names are the kernel table's (catalogue.py); tests/commands/test_attend_variant.py holds them to it
VARIANT = Option(("--variant",), "With --fused: one fused kernel by name, e.g. kernel7 (or attention_fused_kernel7, "
                                 "or 7): kernel1-3 in fp32, kernel4-7 with --precision bf16; kernel6 and 7 need "
                                 "sm_90a (H100, H200), or the CPU build, which emulates them [default: the "
                                 "device's fastest].", metavar="NAME", check=check_variant)

# The CPU build
RACECHECK = Option(("--racecheck",), "CPU build under ThreadSanitizer told CUDA's memory model: a data race "
                                     "a GPU could expose is an error naming both lines (slower).", default=False)
TIMEOUT = Option(("--timeout",), "CPU build: the most CPU seconds one block of a launch may run "
                                 "(default: 2 s, more for a larger launch).", metavar="SECONDS")
THREADS = Option(("--threads",), "CPU build: OS threads a launch's blocks are spread over "
                                 "(default: every core).", metavar="N",
                 kind=("a whole number of OS threads, at least 1", "2"))

# The multi-head layer, from x
D_MODEL = Option(("--d-model",), "Run the whole multi-head layer from x (T, d_model).")
N_HEAD = Option(("--n-head",), "Heads of the layer [default: d_model / d_k].")
N_KV_HEAD = Option(("--n-kv-head",), "K/V heads of the layer, dividing n_head: query head h reads K/V head "
                   "h // (n_head / n_kv_head) (grouped-query attention) [default: n_head].")
PRESET = Option(("--preset",), "andrea-120m: the layer at d_model 768, 12 heads, T 1024.")
X = Option(("--x",), "The layer's input x from a 2-D .npy file (T, d_model).")
LAYER_WEIGHTS = Option(("--weights",), "w_q, w_k, w_v, w_o from one .npz.")

# What comes out
JSON = Option(("--json",), "Print one JSON document instead of tables.", default=False)
PLOT = Option(("--plot",), "Save the weights, row entropy and largest weight to FILE.png.")
# Python only: the command line shows progress unless --json
PROGRESS = Option((), "Print a line per case to stderr.", default=False,
                  kind=("True (a line per case on stderr) or False", "True"))
