"""What `andrea attend` runs: one head (staged or fused) or the whole multi-head layer, chosen
from its options. One direction: every option checked, the inputs made or loaded, the backend
chosen, the kernels run, one report made, the outputs saved."""

from __future__ import annotations

from typing import Callable

from andrea_cli.backends import check_timeout
from andrea_cli.backends.launch.fused import check_fused_shape
from andrea_cli.backends.launch.fused_bf16 import PRECISIONS, check_bf16_shape
from andrea_cli.commands.backend import check_plan, choose_backend, use_plan
from andrea_cli.commands.fused_variant import check_variant_runs, choose_variant
from andrea_cli.commands.options import AttendOptions, RunOptions
from andrea_cli.commands.options.shared import MASK
from andrea_cli.defaults import head_sizes
from andrea_cli.errors import AndreaError
from andrea_cli.inputs import (HOST_BYTES_PER_SCORE, QKV, check_fits_in_memory, check_seed, check_sizes,
                               check_sizes_match_files, load_npy, load_qkv, random_qkv)
from andrea_cli.masks import MaskSpec, mask_array, parse_mask
from andrea_cli.outputs import check_distinct, check_writable, save_npy_atomic


def check_combinations(o: AttendOptions) -> None:
    """Options that cannot go together, refused before any work."""
    check_seed(o.seed)
    if o.show_weights and o.json:
        raise AndreaError("--show-weights draws in the terminal: drop --json, or keep the weights with --save-weights")
    if o.sample_rows < 0 or (o.sample_rows and not o.fused):
        raise AndreaError("--sample-rows N (N >= 0) goes with --fused; without it every row's statistics are shown")
    if o.fused and o.plot is not None:
        raise AndreaError("--plot draws the T×T weights, which --fused never builds: drop one of them")
    if o.fused and o.show_weights:
        raise AndreaError("--show-weights draws the T×T weights, which --fused never builds: drop one of them")
    check_precision(o)
    choose_variant(o.variant, o.precision, o.fused)
    if o.mask_file is not None:
        if o.fused and o.precision != "fp32":
            raise AndreaError("--mask-file runs the fp32 kernels (staged, or --fused kernels 1-3): drop --precision bf16")
        if o.wants_layer:
            raise AndreaError("--mask-file masks one head's (T, T) scores: drop the layer flags, or use --mask")
        if o.mask != MASK.default:
            raise AndreaError(f"--mask-file gives the mask, so --mask {o.mask} would be ignored: drop one of them")
    if o.fused and o.save_weights is not None:
        raise AndreaError("--save-weights needs the T×T weights, which --fused never builds: drop one of them")
    if o.wants_layer and o.has_qkv_files:
        raise AndreaError("--q/--k/--v/--qkv give one head's Q, K, V; the layer flags "
                          "(--d-model, --n-head, --n-kv-head, --preset, --x, --weights) start from x: pass one or "
                          "the other")
    if o.wants_layer and (o.T_q is not None or o.T_k is not None):
        raise AndreaError("--T-q/--T-k size one head's queries and keys; the layer attends x to itself "
                          "(one --T): drop --T-q/--T-k, or drop the layer flags")
    if o.head is not None and not o.wants_layer:
        raise AndreaError(f"--head {o.head} picks one of the layer's heads: add the layer flags (--d-model, "
                          "--n-head or --preset), or drop --head")
    if o.head is not None and o.plot is None:
        raise AndreaError(f"--head {o.head} picks the head --plot draws: add --plot FILE.png")
    one_head = [flag for flag, given in (("--fused", o.fused), ("--show-weights", o.show_weights)) if given]
    if o.wants_layer and one_head:
        given = " and ".join(one_head)
        raise AndreaError(f"{given} work{'s' if len(one_head) == 1 else ''} on one head: drop {given}, "
                          "or drop the layer flags")


def check_precision(o) -> None:
    """--precision, for attend and grad (RunOptions): a known one, and only with --fused."""
    if o.precision not in PRECISIONS:
        raise AndreaError(f"--precision {o.precision!r} is not one of {', '.join(PRECISIONS)}: e.g. --precision bf16")
    if o.precision != "fp32" and not o.fused:
        raise AndreaError(f"--precision {o.precision} runs the tensor-core fused kernels: add --fused")


def lengths(o) -> tuple[int | None, int | None, tuple[str, str]]:
    """The queries (L) and keys (S) asked for, None where not given, and the flags that gave
    them: --T-q/--T-k each override --T (attend's and grad's options)."""
    T_q, T_k = getattr(o, "T_q", None), getattr(o, "T_k", None)
    L = o.T if T_q is None else T_q
    S = o.T if T_k is None else T_k
    return L, S, ("--T" if T_q is None else "--T-q", "--T" if T_k is None else "--T-k")


def head_inputs(o, bytes_per_score: int = HOST_BYTES_PER_SCORE) -> QKV:
    """Q, K, V from files, or random at the requested sizes: L queries against S keys (L = S = T
    unless --T-q/--T-k say otherwise). The run's one memory check: before drawing, or once the
    files are read. `o`: RunOptions (attend's or grad's)."""
    data = None
    L, S, flags = lengths(o)
    if o.has_qkv_files:
        data = load_qkv(o.q, o.k, o.v, o.qkv)
        check_sizes_match_files(((flags[0], L, data.T), (flags[1], S, data.S), ("--d-k", o.d_k, data.d_k),
                                 ("--d-v", o.d_v, data.d_v)))
        L, S, d_k, d_v = data.T, data.S, data.d_k, data.d_v
    else:
        L, d_k, d_v = head_sizes(L, o.d_k, o.d_v)
        S = head_sizes(S, d_k, d_v)[0]
        check_sizes(L, d_k, d_v, S, flags=flags)
    if o.fused:
        check_fused_shape(d_k, d_v)
    if o.precision == "bf16":
        check_bf16_shape(d_k, d_v)
    # the fused kernels never hold L×S
    check_fits_in_memory(1, L, d_k, d_v, square=not o.fused, bytes_per_score=bytes_per_score, S=S)
    return data if data is not None else random_qkv(L, d_k, d_v, o.seed, S=S)


def check_head(head: int | None, n_head: int) -> None:
    if head is not None and not 0 <= head < n_head:
        raise AndreaError(f"--head {head}: the layer has {n_head} heads, numbered 0 to {n_head - 1}")


def check_given_arrays(o: RunOptions, data: QKV, bytes_per_score: int = HOST_BYTES_PER_SCORE) -> None:
    """Arrays given to the Python API: no sizes or files besides, and the run's one memory check."""
    if o.wants_layer or o.has_qkv_files:
        raise AndreaError("q, k, v are given as arrays: drop the files and the layer options")
    if any(getattr(o, name, None) is not None for name in ("T", "T_q", "T_k", "d_k", "d_v")):
        raise AndreaError("T, T_q, T_k, d_k, d_v size the random inputs; with q, k, v the arrays give the sizes: "
                          "drop them")
    if o.fused:
        check_fused_shape(data.d_k, data.d_v)
    if getattr(o, "precision", "fp32") == "bf16":
        check_bf16_shape(data.d_k, data.d_v)
    check_fits_in_memory(data.H or 1, data.T, data.d_k, data.d_v, square=not o.fused, bytes_per_score=bytes_per_score,
                         S=data.S, kv_heads=data.H_kv or 1)


def check_options(o: AttendOptions) -> MaskSpec:
    """The options, alone and together, before anything is drawn or loaded; the mask it names.
    (Whether the backend takes the head's inputs is checked once they are built: check_backend_takes.)"""
    check_combinations(o)
    check_plan(o.plan, fused=o.fused)
    check_timeout(o.timeout)
    mask = parse_mask(o.mask)
    check_writable(o.out, "--out")
    check_writable(o.save_weights, "--save-weights")
    check_distinct(("--out", o.out), ("--save-weights", o.save_weights), ("--plot", o.plot))
    return mask


Progress = Callable[[str], None]

# T×T entries (over every head) from which a run is said on a progress line: about 2 s at T 2048
# on the CPU build; smaller runs end before a line would be read.
PROGRESS_FROM_SCORES = 2048 * 2048


def say_large_run(progress: Progress | None, what: str, n_heads: int, T: int, backend: str,
                  S: int | None = None) -> None:
    S = T if S is None else S
    if progress is not None and n_heads * T * S >= PROGRESS_FROM_SCORES:
        sizes = f"T={T}" if S == T else f"L={T} S={S}"
        progress(f"attend {sizes} on {backend}: {n_heads * T * S:,} scores, {what}")  # the figures first: 80 columns


def run_attend(o: AttendOptions, data: QKV | None = None, progress: Progress | None = None):
    """AttentionReport (one head), FusedReport (--fused) or LayerReport (layer flags), in one
    direction: the options checked, the inputs built, the backend chosen, the kernels run, one
    report made, the outputs saved (rendering is the caller's). data: Q, K, V the Python API was
    given as arrays (instead of sizes or files). progress: told what runs, when it runs long."""
    mask = check_options(o)
    report = attend_layer(o, mask, progress) if o.wants_layer else attend_head(o, mask, data, progress)
    if o.out is not None:
        save_npy_atomic(o.out, report.output)  # (T, d_v); the layer's (T, d_model)
    if o.save_weights is not None:
        save_npy_atomic(o.save_weights, report.weights)  # (T, T); the layer's (H, T, T)
    return report


def attend_layer(o: AttendOptions, mask: MaskSpec, progress: Progress | None = None):
    """x and the weights built (and checked) once, then every head on the backend chosen."""
    from andrea_cli.layer_inputs import LayerFlags, layer_inputs
    from andrea_cli.runs.layer import run_layer

    inputs, n_head = layer_inputs(LayerFlags(o.T, o.d_model, o.n_head, o.d_k, o.d_v, o.preset, o.n_kv_head),
                                  o.x, o.layer_weights, o.seed, grouped_ok=True)
    check_head(o.head, n_head)
    backend, notices = choose_backend(o.backend, o.kernel, timeout=o.timeout, racecheck=o.racecheck)
    use_plan(backend, o.plan)
    say_large_run(progress, f"{n_head} heads, then statistics", n_head, inputs.x.shape[0], backend.name)
    from andrea_cli.verification.spot_check import spot_check

    return run_layer(inputs, n_head, backend, mask, scaled=o.scaled, notices=notices, check=spot_check)


def check_backend_takes(o: AttendOptions, data: QKV) -> None:
    """The backend named can run this head: a fused kernel, arrays where they are. Checked once the
    inputs are built, where it always was, so that of two wrong things the same one is named."""
    if o.fused and o.backend == "numpy":
        raise AndreaError("--fused runs the fused kernel, on --backend cuda or cpu; the NumPy path has "
                          "no fused kernel (drop --fused to run it)")
    if data.on_device and o.backend not in ("auto", "cuda"):
        raise AndreaError(f"Q, K, V are GPU arrays, which the cuda backend runs where they are: use backend "
                          f"'cuda' (or 'auto'), or pass NumPy arrays to run them on {o.backend}")


def attend_head(o: AttendOptions, mask: MaskSpec, data: QKV | None, progress: Progress | None = None):
    """One head (or, from the Python API, H heads at once), staged or fused: Q, K, V built (or the
    API's arrays checked) once, then run on the backend chosen."""
    if data is not None:
        check_given_arrays(o, data)
    else:
        data = head_inputs(o)
    check_backend_takes(o, data)
    if o.mask_file is not None:  # its shape is checked against the head's (T queries, S keys)
        mask = mask_array(load_npy(o.mask_file, "--mask-file"), data.T, data.k.shape[-2], f"--mask-file {o.mask_file}")
    blind = 0 if not mask.is_array else int((~mask.visible(data.T).any(axis=-1)).sum())
    backend, notices = choose_backend(o.backend, o.kernel, fused=o.fused, on_device=data.on_device,
                                      timeout=o.timeout, racecheck=o.racecheck)
    use_plan(backend, o.plan)
    if blind:  # the softmax gives a row with every score -inf zeros, as the fused kernels do
        notices = [*notices, f"{blind} of {data.T} rows see no key (the mask file hides them all): their "
                             "weights and output are zeros"]
    what = f"fused kernel ({o.precision})" if o.fused else "five stages, then statistics"
    say_large_run(progress, what, data.H or 1, data.T, backend.name, S=data.S)
    if o.fused:
        from andrea_cli.backends.launch.fused_bf16 import device_cc
        from andrea_cli.runs.fused import run_fused_attention

        from andrea_cli.verification.spot_check import fused_spot_check

        variant = choose_variant(o.variant, o.precision, o.fused)
        if variant is not None:  # the device compiles here, as the run would first thing
            check_variant_runs(variant, o.precision, data.d_k, data.d_v, device_cc(backend.device()))
        return run_fused_attention(data, backend, mask, o.scaled, o.sample_rows, notices=notices,
                                   precision=o.precision, check=fused_spot_check, variant=variant)
    from andrea_cli.runs.head import run_attention
    from andrea_cli.verification.spot_check import spot_check

    return run_attention(data, backend, mask, scaled=o.scaled, notices=notices, check=spot_check)
