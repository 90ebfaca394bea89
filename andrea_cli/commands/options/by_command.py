"""Every command's options, one dataclass each, fields in the order --help lists them. A field is
the one declaration of its option: cli.py makes it a flag, api.py a checked keyword."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from andrea_cli.commands.options.declare import option
from andrea_cli.commands.options.keyword import convert
from andrea_cli.commands.options.shared import (BACKEND, D_K, D_MODEL, D_V, FUSED, JSON, KERNEL, KEYS, LAYER_WEIGHTS,
                                                MASK, N_HEAD, N_KV_HEAD, PLAN, PLOT, PRECISION, PRESET, PROGRESS, QKV, QUERIES,
                                                RACECHECK, SCALE, SEED, SEQ_LEN, THREADS, TIMEOUT, VARIANT, K, Q, V, X,
                                                check_scale)
from andrea_cli.defaults import DEFAULT_BLAS_THREADS, DEFAULT_D_K, DEFAULT_T
from andrea_cli.errors import AndreaError


class HeadOptions:
    """What every command that runs one head from Q, K, V reads of its options (attend, grad, generate)."""

    @property
    def scaled(self) -> bool | float:
        """What the runs take: True (1/sqrt(d_k)), False (--no-scale) or the factor given."""
        return True if self.scale is None else self.scale

    @property
    def has_qkv_files(self) -> bool:
        return any(p is not None for p in (self.q, self.k, self.v, self.qkv))


class RunOptions(HeadOptions):
    """What `attend` and `grad` both read of their options: a head's, and the layer's flags."""

    @property
    def wants_layer(self) -> bool:
        return any(o is not None for o in (self.d_model, self.n_head, self.preset, self.x, self.layer_weights,
                                           self.n_kv_head))


@dataclass
class AttendOptions(RunOptions):
    """`andrea attend`: one head, fused or staged, or the multi-head layer."""

    T: int | None = SEQ_LEN.field()
    T_q: int | None = QUERIES.field()
    T_k: int | None = KEYS.field()
    d_k: int | None = D_K.field()
    d_v: int | None = D_V.field()
    seed: int = SEED.field()
    q: Path | None = Q.field()
    k: Path | None = K.field()
    v: Path | None = V.field()
    qkv: Path | None = QKV.field()
    mask: str = MASK.field()
    mask_file: Path | None = option("--mask-file", help="A mask as a (T, T) .npy array instead of --mask: bool "
                                    "(True = take part, as torch's SDPA) or float (added to the scaled scores; "
                                    "-inf hides). A row that sees no key gets zeros. Staged kernels only.")
    scale: float | bool | None = SCALE.field()  # None: 1/sqrt(d_k); False: --no-scale; Python's factor
    backend: str = BACKEND.field()
    plan: str = PLAN.field()
    strict: bool = option("--strict", default=False, help="Exit 1 when the run is not the equation (sampled rows "
                                                          "of each stage against float64, verify's tolerances).")
    out: Path | None = option("--out", help="Save the (T, d_v) output as float32 .npy.")
    save_weights: Path | None = option("--save-weights", help="Save the (T, T) weights ((L, S) for L queries, S keys) as float32 .npy.")
    kernel: Path | None = KERNEL.field()
    json: bool = JSON.field()
    d_model: int | None = D_MODEL.field()
    n_head: int | None = N_HEAD.field()
    n_kv_head: int | None = N_KV_HEAD.field()
    preset: str | None = PRESET.field()
    x: Path | None = X.field()
    layer_weights: Path | None = LAYER_WEIGHTS.field()
    show_weights: bool = option("--show-weights", help="Draw the (T, T) weights in the terminal.", default=False)
    fused: bool = FUSED.field()
    sample_rows: int = option("--sample-rows", help="With --fused: weight statistics on N rows.", default=0)
    plot: Path | None = PLOT.but(help="Save the weights, row entropy and largest weight to FILE.png; for the "
                                      "layer every head in a grid (--head N: head N alone).").field()
    head: int | None = option("--head", help="With the layer's --plot: draw head N (from 0) alone.", metavar="N",
                              kind=("a whole number", "0"))
    precision: str = PRECISION.field()
    variant: str | None = VARIANT.field()
    racecheck: bool = RACECHECK.field()
    timeout: float | None = TIMEOUT.field()
    threads: int | None = THREADS.field()


@dataclass
class GradOptions(RunOptions):
    """`andrea grad`: attend's inputs and an upstream gradient dO."""

    T: int | None = SEQ_LEN.field()
    T_q: int | None = QUERIES.field()
    T_k: int | None = KEYS.field()
    d_k: int | None = D_K.field()
    d_v: int | None = D_V.field()
    seed: int = SEED.but(help="Seed of the random Q, K, V and dO.").field()
    q: Path | None = Q.field()
    k: Path | None = K.field()
    v: Path | None = V.field()
    qkv: Path | None = QKV.field()
    mask: str = MASK.field()
    scale: float | bool | None = SCALE.field()
    backend: str = BACKEND.field()
    kernel: Path | None = KERNEL.field()
    json: bool = JSON.field()
    fused: bool = FUSED.but(help="The fused backward kernels; no T×T matrix (cuda, cpu).").field()
    precision: str = PRECISION.but(help="With --fused: fp32, or bf16 (the tensor-core forward and backward; "
                                        "d_k = d_v = 64 or 128).").field()
    d_out: Path | None = option("--d-out", help="The upstream gradient dO from a .npy (T, d_v).")
    out: Path | None = option("--out", help="Save dq, dk, dv (the layer: dx, dw_q...) to one .npz.")
    d_model: int | None = D_MODEL.but(help="The whole layer's backward, from x (T, d_model).").field()
    n_head: int | None = N_HEAD.field()
    n_kv_head: int | None = N_KV_HEAD.field()
    preset: str | None = PRESET.field()
    x: Path | None = X.field()
    layer_weights: Path | None = LAYER_WEIGHTS.field()
    racecheck: bool = RACECHECK.field()


def check_course_scale(scale) -> bool | None:
    """verify's scale: the course's 1/sqrt(d_k) (None) or none (False), never a factor."""
    checked = check_scale(scale)
    if checked not in (None, False):
        raise AndreaError(f"scale={scale!r}: verify checks the course's 1/sqrt(d_k) (None or True) or no "
                          "scaling (False); a factor of your own is attend's and grad's")
    return checked


@dataclass
class VerifyOptions:
    """`andrea verify`: the sweep, or the one case T/d_k/d_v/mask/--no-scale name."""

    backend: str = BACKEND.but(help="auto (cuda if a GPU answers, else cpu), cuda or cpu.").field()
    quick: bool = option("--quick", help="A smaller sweep (seconds on the CPU build).", default=False)
    T: int | None = SEQ_LEN.but(help="Verify one case of this length.").field()
    d_k: int | None = D_K.but(help=f"Width for the one case [default: {DEFAULT_D_K}].").field()
    d_v: int | None = D_V.but(help="Value width for the one case [default: d_k].").field()
    mask: str | None = MASK.but(default=None, help="Mask for the one case: as attend's --mask (causal, none, "
                                                   "window:W, window:L,R, sinks:N,window:W, alibi) "
                                                   "[default: causal].").field()
    scale: bool | None = SCALE.but(help="The one case without scaling.", check=check_course_scale).field()
    kernel: Path | None = KERNEL.but(help="Verify an edited copy of the kernel file.").field()
    sanitize: bool = option("--sanitize", default=False, help="The CPU build under AddressSanitizer and "
                            "UndefinedBehaviorSanitizer: out-of-bounds accesses with the kernel file's line.")
    racecheck: bool = RACECHECK.field()
    timeout: float | None = TIMEOUT.field()
    threads: int | None = THREADS.field()
    json: bool = JSON.field()
    progress: bool = PROGRESS.field()


# --bound reads each kernel at a fixed shape: of bench's other options it takes only these
BOUND_TAKES = ("bound", "gpu", "kernel", "json")


@dataclass
class BenchOptions:
    """`andrea bench`: the timed sweep, or --bound's static bounds."""

    side: str = option("--side", help="gpu, cpu, or auto (gpu when a device answers).", default="auto")
    T: list[int] | None = SEQ_LEN.but(flags=("--T", "-T"), help="Sequence lengths (repeat the flag).").field()
    d_k: list[int] | None = D_K.but(help="Head widths [default: 64 and 128].").field()
    mask: str = MASK.but(default="both", help="causal, none, or both.").field()
    heads: int | None = option("--heads", help="Heads per launch [default: 12 on GPU, 1 on CPU].")
    repeats: int = option("--repeats", help="Timed repeats per size (the median, min and max are reported).",
                          default=5)
    warmup: int = option("--warmup", help="Untimed runs before the repeats.", default=1)
    no_cpu_build: bool = option("--no-cpu-build", help="CPU side: skip the kernels' CPU build.", default=False)
    blas_threads: int = option("--blas-threads", metavar="N", default=DEFAULT_BLAS_THREADS,
                               help="CPU side: BLAS/OpenMP threads of NumPy and torch, pinned per measurement.")
    impl: list[str] | None = option("--impl", metavar="NAME",
                                    help="Only this implementation (repeat the flag; the baseline runs too).")
    kernel: Path | None = KERNEL.field()
    timeout: float | None = TIMEOUT.field()
    threads: int | None = THREADS.field()
    json: bool = JSON.but(help="Print one JSON document instead of a table.").field()
    plot: Path | None = PLOT.but(help="Save time and TFLOP/s against T to FILE.png.").field()
    bound: bool = option("--bound", default=False, help="No timing: each kernel's static bound on --gpu, read "
                                                        "from its SASS (no GPU needed; not a measurement). "
                                                        "Assumed: every pipe at 1.83 GHz with tensor-core work "
                                                        "(1.98 without) on Hopper, mma.sync there at 2/3 of "
                                                        "the tensor rate, bank conflicts counted where the "
                                                        "SASS gives lane addresses (else none).")
    gpu: str | None = option("--gpu", help="With --bound: h200 (default), h100 or a100.")
    progress: bool = PROGRESS.but(help="Print a line per size to stderr.", kind=None).field()


def check_widths(d_k) -> str:
    """compare-scaling's d_k from Python: "64,256" as the command line takes it, one width or a list."""
    if isinstance(d_k, str):
        return d_k
    try:
        return ",".join(str(w) for w in convert(d_k, list[int]))
    except ValueError:
        raise AndreaError(f"d_k={d_k!r}: --d-k takes widths, one or a list (or '64,256'); "
                          "e.g. d_k=[64, 256]") from None


@dataclass
class ScalingOptions:
    """`andrea compare-scaling`: each width run unscaled and scaled."""

    d_k: str = D_K.but(default="64,256,4096", help="Comma-separated query/key widths.", check=check_widths).field()
    T: int = SEQ_LEN.but(default=DEFAULT_T, help="Sequence length.").field()
    seed: int = SEED.field()
    backend: str = BACKEND.field()
    mask: str = MASK.field()
    dist: str = option("--dist", help="normal (unit-variance entries) or unit (unit-norm rows).", default="normal")
    kernel: Path | None = KERNEL.field()
    json: bool = JSON.but(help="Print one JSON document instead of the table.").field()
    plot: Path | None = PLOT.but(help="Save histograms and heatmaps to FILE.png.").field()


@dataclass
class GenerateOptions(HeadOptions):
    """`andrea generate`: T steps of generation through the decode kernels, against one causal pass."""

    T: int | None = SEQ_LEN.but(help=f"Steps (positions) to generate [default: {DEFAULT_T}].").field()
    d_k: int | None = D_K.field()
    d_v: int | None = D_V.field()
    seed: int = SEED.field()
    q: Path | None = Q.field()
    k: Path | None = K.field()
    v: Path | None = V.field()
    qkv: Path | None = QKV.field()
    mask: str = MASK.but(help="causal or window:W (a step's query sees the last W cached keys), "
                              "sinks:N,window:W (and the first N), alibi (ALiBi's bias on the scores); "
                              "none and window:L,R (R > 0) cannot be generated one token at a time.").field()
    scale: float | bool | None = SCALE.field()
    precision: str = PRECISION.but(help="The KV cache: fp32, or bf16 (half the bytes a step reads).").field()
    backend: str = BACKEND.but(help="auto (cuda if a GPU answers, else cpu), cuda or cpu.").field()
    kernel: Path | None = KERNEL.field()
    json: bool = JSON.field()
    plot: Path | None = PLOT.but(help="Save each position's distance to the unmasked pass, and the step "
                                      "times, to FILE.png.").field()
    timeout: float | None = TIMEOUT.field()
    threads: int | None = THREADS.field()


@dataclass
class InfoOptions:
    """`andrea info`."""

    json: bool = JSON.but(help="Print one JSON document.").field()
