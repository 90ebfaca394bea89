"""`andrea bench`: what each attention implementation costs, against what the hardware allows.

Pure measuring code: a sweep that times implementations (bench/cpu.py, bench/gpu.py) against the
costs in roofline.py and returns dataclasses. Rendering is apart.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np

from andrea_cli import reference, reference_backward
from andrea_cli.backends.base import DeviceFault
from andrea_cli.errors import AndreaError
from andrea_cli.bench import yardstick
from andrea_cli.bench.roofline import DevicePeak, attention_bytes, attention_flops, backward_bytes, backward_flops
from andrea_cli.masks import MaskSpec

GPU_T = (256, 1024, 4096, 16384)
CPU_T = (128, 256, 512, 1024)
D_KS = (64, 128)
VALIDATE_ROWS = 16  # rows of head 0 checked against the float64 reference before timing
NO_MASK, CAUSAL = MaskSpec("none"), MaskSpec("causal")  # the masks bench sweeps (its --mask: none, causal, both)


def swept_mask(causal: bool) -> MaskSpec:
    """The mask a measurement's `causal` flag stands for (what bench's JSON has always shown)."""
    return CAUSAL if causal else NO_MASK


# ------------------------------------------------------------------------------------------------
# Results.

@dataclass
class Measurement:
    impl: str
    T: int
    d_k: int
    H: int
    causal: bool  # the point's mask hides the future (bench sweeps no mask and causal)
    median_ms: float | None  # None: skipped (see `skipped`)
    min_ms: float | None = None
    max_ms: float | None = None  # with min_ms, the spread of the repeats: a wide one is a noisy figure
    repeats: int = 0
    tflops: float | None = None
    gbs: float | None = None
    pct_peak: float | None = None  # of the device's peak for its precision (FP32, or bf16 tensor cores); GPU only
    roofline_ms: float | None = None
    bound: str | None = None  # "compute" or "memory": which roof the roofline time comes from
    ratio: float | None = None  # median_ms / the baseline implementation's median_ms at this point
    max_abs_err: float | None = None  # sampled rows against the float64 reference
    # the most a right implementation at its precision is off there (yardstick.py), and whether
    # max_abs_err keeps to it: False is a wrong output, its timing no figure to rank
    tolerance: float | None = None
    within_tolerance: bool | None = None
    speed_path: bool = True  # False: the CPU build of the kernels, a correctness tool
    skipped: str = ""
    direction: str = "forward"  # or "backward": dQ, dK, dV from dO, with the backward's FLOPs
    precision: str = "fp32"  # what it multiplies: fp32, or bf16 (tensor cores)
    vs_peer: float | None = None  # the peer's median_ms / this median_ms: > 1 is faster than the peer
    # GPU side, the kernel file's paths on a modelled GPU: the static bound of what run() launches at
    # this shape (useful FLOPs / the bound's time), and tflops / it (1 would reach the bound)
    bound_tflops: float | None = None
    measured_over_bound: float | None = None
    chose: str | None = None  # what a dispatching implementation ran at this point (torch SDPA's default: its backend)
    kernels: list[str] | None = None  # the kernel file's kernels one timed run launched; None: not the kernel file


@dataclass
class BenchResult:
    side: str  # "gpu" or "cpu"
    device: str
    peak: DevicePeak | None
    baseline: str  # the implementation the ratios divide by
    warmup: int
    repeats: int
    measurements: list[Measurement] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # CPU side: the BLAS/OpenMP threads each measurement ran with, as threadpoolctl saw them inside
    # the limit: {"limit": N, "libraries": {"openblas": N, ...}}; None on the GPU side
    threads: dict | None = None
    # torch SDPA's peers: {"torch": version, "cuda": torch's CUDA, "cudnn": cuDNN's version}, or
    # {"reason": why torch could not be measured}; None when no torch implementation was asked for
    torch: dict | None = None
    decode: list = field(default_factory=list)  # bench/decode.py's DecodeMeasurement rows: a step at each cache length

    def to_json(self) -> dict:
        return {
            "side": self.side, "device": self.device,
            "peak": asdict(self.peak) if self.peak else None,
            "baseline": self.baseline, "warmup": self.warmup, "repeats": self.repeats, "threads": self.threads,
            "torch": self.torch,
            "measurements": [asdict(m) for m in self.measurements],
            "decode": [m.to_json() for m in self.decode],
            "notes": self.notes,
        }


# ------------------------------------------------------------------------------------------------
# The sweep.

def io_bytes(H: int, T: int, d_k: int, arrays: int = 4) -> float:
    """float32 (H, T, d_k) arrays: Q, K, V and the output by default."""
    return 4.0 * arrays * H * T * d_k


def tt_bytes(H: int, T: int, arrays: float) -> float:
    """float32 (H, T, T) arrays: scores, weights and their temporaries."""
    return 4.0 * arrays * H * T * T


@dataclass
class Impl:
    """One way to compute attention. `prepare(q, k, v, mask)` puts inputs where the
    implementation wants them and returns `run() -> output` (on its device) and `to_host`."""

    name: str
    prepare: Callable
    to_host: Callable = np.asarray
    speed_path: bool = True
    max_T: int | None = None  # sizes beyond this are skipped (too slow to be useful)
    why_max_T: str = ""
    repeats: int | None = None  # fewer repeats (and no warm-up) for a slow correctness tool
    # peak_bytes(H, T, d_k, mask): what it holds at once on its side (inputs, outputs, temporaries),
    # so a size that cannot fit is skipped, or refused, before anything is allocated
    peak_bytes: Callable[[int, int, int, MaskSpec], float] = lambda H, T, d_k, mask: io_bytes(H, T, d_k)
    max_d_k: int | None = None
    why_max_d_k: str = ""
    # "backward": run() returns dQ for upstream_gradient(q), and the costs are the backward's
    direction: str = "forward"
    only_d_ks: tuple[int, ...] | None = None  # head sizes it is built for (the tensor-core kernel)
    precision: str = "fp32"
    peer: str | None = None  # the implementation its vs_peer compares with (same precision)
    # prepare_on(dev, q, k, v, mask): prepare on any KernelDevice; one of the kernel file's paths
    # has it, so the static bound can record what its run() launches (bench/bound/measured.py)
    prepare_on: Callable | None = None
    # chooser(run) -> what run() dispatched to (torch SDPA's default choice of backend), asked once
    # after the timing; None for an implementation that runs one fixed kernel
    chooser: Callable | None = None
    on_request: bool = False  # runs only when --impl names it (a peer most sweeps need not time)
    cannot_run: str = ""  # why it runs at no size on this device (a kernel the GPU lacks the instructions of)


def costs(direction: str, H: int, T: int, d_k: int, causal: bool) -> tuple[float, float]:
    """(FLOPs, compulsory bytes) of one pass, by the FlashAttention conventions (roofline.py:
    causal halves the FLOPs)."""
    if direction == "backward":
        return backward_flops(H, T, d_k, causal), backward_bytes(H, T, d_k)
    return attention_flops(H, T, d_k, causal), attention_bytes(H, T, d_k)


@dataclass
class Side:
    """Where a sweep runs: its clock, the memory implementations share, how to free cached memory."""

    name: str  # "gpu" or "cpu"
    device: str
    timer: Callable  # timer(run, warmup, repeats) -> ms per repeat, on the side's own clock
    free_bytes: Callable[[], int]
    memory: str = "host memory"  # what free_bytes counts, for messages
    release: Callable[[], None] = lambda: None  # e.g. cupy's memory pool, between implementations
    out_of_memory: tuple[type[BaseException], ...] = (MemoryError,)  # cupy's OutOfMemoryError is one


MEMORY_FRACTION = 0.8  # of the memory free when the sweep starts: room for what the estimates miss


def gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def why_not(impl: Impl, H: int, T: int, d_k: int, mask: MaskSpec, budget: float, memory: str) -> str:
    """Why impl does not run at this size ("" when it does)."""
    if impl.cannot_run:
        return impl.cannot_run
    if impl.max_T is not None and T > impl.max_T:
        return impl.why_max_T
    if impl.max_d_k is not None and d_k > impl.max_d_k:
        return impl.why_max_d_k
    if impl.only_d_ks is not None and d_k not in impl.only_d_ks:
        return f"built for d_k {' or '.join(map(str, impl.only_d_ks))}"
    need = impl.peak_bytes(H, T, d_k, mask)
    if need > budget:
        return f"needs about {gib(need)} of {memory}, over {gib(budget)} ({MEMORY_FRACTION:.0%} of what was free)"
    return ""


def check_options(Ts, d_ks, heads: int | None, repeats: int, warmup: int) -> None:
    for flag, values in (("--T", Ts or ()), ("--d-k", d_ks or ()), ("--heads", () if heads is None else (heads,)),
                         ("--repeats", (repeats,))):
        for x in values:
            if x < 1:
                raise AndreaError(f"{flag} must be >= 1 (got {x})")
    if warmup < 0:
        raise AndreaError(f"--warmup must be >= 0 (got {warmup})")


def check_baseline_fits(impls: list[Impl], baseline: str, H: int, Ts, d_ks, masks, budget: float,
                        memory: str) -> None:
    """The ratios divide by the baseline: a size it cannot run is refused before the sweep starts."""
    base = next(impl for impl in impls if impl.name == baseline)
    for d_k in d_ks:
        for T in Ts:
            for mask in masks:
                why = why_not(base, H, T, d_k, mask, budget, memory)
                if why:
                    fix = "use a smaller --d-k" if base.max_d_k and d_k > base.max_d_k else \
                        f"use a smaller --T{' or fewer --heads' if H > 1 else ''}"
                    raise AndreaError(f"{baseline} (the baseline) cannot run at T={T}, d_k={d_k}, H={H}: {why}; {fix}")


def select_impls(impls: list[Impl], only, baseline: str, side: str, unavailable=()) -> list[Impl]:
    """--impl: the implementations named, in the sweep's order, and the baseline (the ratios divide
    by it); None: all but those run only on request. unavailable: names this side has but cannot
    run here (torch not importable, no C++ compiler): accepted, the notes say why they have no rows."""
    if not only:
        return [impl for impl in impls if not impl.on_request]
    names = [impl.name for impl in impls]
    for name in only:
        if name not in names and name not in unavailable:
            raise AndreaError(f"--impl {name}: no such implementation on the {side} side; "
                              f"choose from {', '.join(names + [n for n in unavailable if n not in names])}")
    return [impl for impl in impls if impl.name in only or impl.name == baseline]


def exact_rows(q, k, v, mask: MaskSpec, direction: str) -> tuple[np.ndarray, np.ndarray]:
    """VALIDATE_ROWS rows of head 0 and their float64 answer: the output, or dQ. A row of dQ needs
    only its own row of P and dP (dS_i = P_i ∘ (dP_i − P_i·dP_i), dQ_i = scale · dS_i · K), so it
    is cheap."""
    rows = reference.sample_rows(q.shape[1], VALIDATE_ROWS)
    _, p, out = reference.attention_rows(q[0], k[0], v[0], mask, True, rows)  # (n, T) float64
    if direction != "backward":
        return rows, out
    dp = upstream_gradient(q)[0, rows].astype(np.float64) @ v[0].astype(np.float64).T
    ds = reference_backward.softmax_backward(p, dp)
    return rows, ds @ k[0].astype(np.float64) / math.sqrt(q.shape[2])


def upstream_gradient(q: np.ndarray) -> np.ndarray:
    """The dO every backward implementation gets: N(0, 1), the output's shape (d_v = d_k here)."""
    return np.random.default_rng(1).standard_normal(q.shape, dtype=np.float32)


def sample_dq_error(q, k, v, dq, mask: MaskSpec) -> float:
    """Max |dQ - reference| over VALIDATE_ROWS rows of head 0, the reference in float64."""
    rows, want = exact_rows(q, k, v, mask, "backward")
    return float(np.abs(dq[0, rows] - want).max())


def tolerance_on(q, k, v, mask: MaskSpec, rows: np.ndarray, exact: np.ndarray, direction: str,
                 precision: str) -> float:
    """The most a right implementation at this precision may be off on those rows (yardstick.py):
    a multiple of a plain float32 (or bf16) path's own error there."""
    if direction == "backward":
        plain = yardstick.plain_dq_rows(q[0], k[0], v[0], upstream_gradient(q)[0], mask, rows, precision)
    else:
        plain = yardstick.plain_output_rows(q[0], k[0], v[0], mask, rows, precision)
    return yardstick.tolerance(plain, exact, precision)


def sample_tolerance(q, k, v, mask: MaskSpec, direction: str, precision: str) -> float:
    """tolerance_on the VALIDATE_ROWS rows bench checks (exact_rows)."""
    rows, exact = exact_rows(q, k, v, mask, direction)
    return tolerance_on(q, k, v, mask, rows, exact, direction, precision)


def measure(impl: Impl, timer, q, k, v, mask: MaskSpec, warmup: int,
            repeats: int) -> tuple[list[float], float, float, str | None, list[str] | None]:
    """Validate (the error on the sampled rows, and its tolerance), time, then ask what ran
    (impl.chooser; a kernel-file run keeps the launcher's {stage: kernel} on itself, run.kernels).
    `run` and the buffers it holds die with this frame, so the next implementation never shares
    memory with this one."""
    run = impl.prepare(q, k, v, mask)
    rows, exact = exact_rows(q, k, v, mask, impl.direction)  # the output's rows, or dQ's
    err = float(np.abs(impl.to_host(run())[0, rows] - exact).max())
    tol = tolerance_on(q, k, v, mask, rows, exact, impl.direction, impl.precision)
    times = timer(run, warmup, repeats) if impl.repeats is None else timer(run, 0, impl.repeats)
    kernels = getattr(run, "kernels", None)
    return (times, err, tol, impl.chooser(run) if impl.chooser else None,
            list(kernels.values()) if kernels else None)


@dataclass
class Point:
    """One point of the sweep: its sizes and the inputs every implementation there shares."""

    H: int
    T: int
    d_k: int
    mask: MaskSpec
    q: np.ndarray  # (H, T, d_k) float32
    k: np.ndarray  # (H, T, d_k) float32
    v: np.ndarray  # (H, T, d_k) float32

    def describe(self) -> str:
        return f"T={self.T} d_k={self.d_k} {self.mask} H={self.H}"


def run_sweep(side: Side, impls: list[Impl], *, Ts, d_ks, masks=(NO_MASK, CAUSAL), H: int = 1, warmup: int = 1,
              repeats: int = 5, baseline: str, peak: DevicePeak | None = None,
              progress: Callable[[str], None] = lambda s: None, seed: int = 0) -> BenchResult:
    """Every implementation at every (d_k, mask, T), on the same inputs at each point; a size an
    implementation cannot hold is skipped with the reason, one that fails costs its row only."""
    side.release()
    budget = MEMORY_FRACTION * side.free_bytes()
    check_baseline_fits(impls, baseline, H, Ts, d_ks, masks, budget, side.memory)
    result = BenchResult(side.name, side.device, peak, baseline, warmup, repeats)
    rng = np.random.default_rng(seed)
    for d_k in d_ks:
        for mask in masks:
            for T in Ts:
                point = Point(H, T, d_k, mask, *(rng.standard_normal((H, T, d_k), dtype=np.float32) for _ in range(3)))
                row = [measure_impl(side, impl, point, budget, warmup, repeats, peak, progress) for impl in impls]
                set_ratios(row, baseline, impls)
                result.measurements.extend(row)
    return result


def measure_impl(side: Side, impl: Impl, p: Point, budget: float, warmup: int, repeats: int,
                 peak: DevicePeak | None, progress: Callable[[str], None]) -> Measurement:
    """One implementation at one point: skipped with the reason, or validated, timed and placed
    against the roofline."""
    m = Measurement(impl.name, p.T, p.d_k, p.H, p.mask.hides_future, None, speed_path=impl.speed_path,
                    direction=impl.direction, precision=impl.precision)
    m.skipped = why_not(impl, p.H, p.T, p.d_k, p.mask, budget, side.memory)
    if m.skipped:
        return m
    progress(f"bench: {impl.name} {p.describe()}")
    try:
        times, m.max_abs_err, m.tolerance, m.chose, m.kernels = measure(impl, side.timer, p.q, p.k, p.v, p.mask,
                                                                        warmup, repeats)
        m.within_tolerance = m.max_abs_err <= m.tolerance
    except side.out_of_memory as exc:
        m.skipped = f"ran out of {side.memory}: {type(exc).__name__}"
        return m
    except DeviceFault:
        raise  # the GPU context is gone: nothing after this could run
    except AndreaError as exc:  # one implementation failing costs its row, not the sweep
        m.skipped = f"failed: {str(exc).splitlines()[0]}"
        return m
    finally:
        side.release()
    m.median_ms, m.min_ms, m.max_ms, m.repeats = statistics.median(times), min(times), max(times), len(times)
    flops, nbytes = costs(impl.direction, p.H, p.T, p.d_k, p.mask.hides_future)
    seconds = m.median_ms / 1e3
    m.tflops, m.gbs = flops / seconds / 1e12, nbytes / seconds / 1e9
    if peak is not None and peak.compute_peak(impl.precision):
        m.pct_peak = 100 * m.tflops / peak.compute_peak(impl.precision)
        m.roofline_ms = peak.roofline_ms(flops, nbytes, impl.precision)
        m.bound = peak.bound(flops, nbytes, impl.precision)
    return m


def set_ratios(row: list[Measurement], baseline: str, impls: list[Impl]) -> None:
    """Each measured implementation's median over the baseline's at the same point, and its
    peer's median over its own (vs_peer: > 1 is faster than the peer)."""
    base = next((m for m in row if m.impl == baseline and m.median_ms), None)
    timed = {m.impl: m.median_ms for m in row if m.median_ms}
    for impl, m in zip(impls, row):
        if base and m.median_ms:
            m.ratio = m.median_ms / base.median_ms
        if impl.peer in timed and m.median_ms:
            m.vs_peer = timed[impl.peer] / m.median_ms
