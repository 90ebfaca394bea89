"""`andrea bench`'s decode rows: one step of generation (kv_append, attention_decode, the merge) at
a few cache lengths, timed per kernel on the side's device, and the cache bytes the decode kernel
reads over its own time in GB/s: a step is memory-bound by design, so the figure that counts is
that GB/s against the device's HBM bandwidth (on a GPU; the CPU build's figures say only what the
CPU build does)."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass

import numpy as np

from andrea_cli.backends.launch import decode as launch
from andrea_cli.errors import AndreaError
from andrea_cli.masks import MaskSpec
from andrea_cli.scale import course_scale

DECODE_ROWS = "decode"  # --impl's name for these rows
CAUSAL = MaskSpec("causal")  # the newest position's query sees every cached key
STAGES = ("append", "decode", "merge")


@dataclass
class DecodeMeasurement:
    kernel: str  # the decode kernel (its append and merge in `kernels`)
    precision: str  # the cache's: fp32 or bf16
    S: int  # cached keys the step reads
    d_k: int
    H: int  # query heads (K/V heads as many)
    slices: int
    median_ms: dict[str, float]  # {stage: median ms}, and "step": their sum per repeat, median
    cache_bytes: int  # K and V rows the decode kernel reads
    gbs: float  # cache_bytes / the decode kernel's median time
    hbm_gbs: float | None  # the GPU's memory bandwidth; None off a GPU
    max_abs_err: float  # the step's output against the float64 softmax over what the cache holds
    kernels: list[str]
    speed_path: bool = True  # False: the CPU build

    @property
    def share_of_hbm(self) -> float | None:
        return self.gbs / self.hbm_gbs if self.hbm_gbs else None

    def to_json(self) -> dict:
        return {**asdict(self), "share_of_hbm": self.share_of_hbm}


def exact_step(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """(H, d_v): each head's query against all its keys, in float64 (k, v as the cache holds them)."""
    s = np.einsum("hd,hsd->hs", q.astype(np.float64), k.astype(np.float64)) / np.sqrt(q.shape[-1])
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return np.einsum("hs,hsd->hd", p / p.sum(axis=-1, keepdims=True), v.astype(np.float64))


def measure_step(dev, timer, *, S: int, d_k: int, H: int, precision: str, warmup: int, repeats: int,
                 hbm_gbs: float | None, speed_path: bool, seed: int = 0) -> DecodeMeasurement:
    """A cache of S rows (the last written by the append kernel inside the timed step), then the
    step at position S - 1: append, decode, merge, each on the device's own clock."""
    from andrea_cli.verification.bf16_attention import round_bf16
    from andrea_cli.verification.decode import fill_cache

    rng = np.random.default_rng(seed)
    q, k_new, v_new = (rng.standard_normal((H, d_k), dtype=np.float32) for _ in range(3))
    k, v = (rng.standard_normal((H, S, d_k), dtype=np.float32) for _ in range(2))
    k[:, -1], v[:, -1] = k_new, v_new
    cache = fill_cache(dev, k, v, precision)
    dq, dk_new, dv_new = (dev.to_device(x) for x in (q, k_new, v_new))
    times: dict[str, list[float]] = {stage: [] for stage in STAGES}

    def run():
        clock = dev.clock()
        clock.start("append")
        run.kernels = launch.append(dev, cache, dk_new, dv_new, S - 1)
        clock.stop("append")
        run.step = launch.decode(dev, cache, dq, S, H, mask=CAUSAL, scale=course_scale(d_k), clock=clock)
        run.kernels.update(run.step.kernels)
        ms = clock.elapsed_ms()
        for stage in STAGES:
            times[stage].append(ms[stage])

    run()
    want = exact_step(q, *((round_bf16(k), round_bf16(v)) if precision == "bf16" else (k, v)))
    err = float(np.abs(dev.to_host(run.step.output) - want).max())
    for stage in STAGES:
        times[stage].clear()  # the checked run is not timed
    step_ms = timer(run, warmup, repeats)
    skip = len(times["decode"]) - len(step_ms)  # the warm-up runs' stage times
    median = {stage: statistics.median(times[stage][skip:]) for stage in STAGES}
    median["step"] = statistics.median(step_ms)
    nbytes = cache.bytes_read(run.step.keys)
    return DecodeMeasurement(run.kernels["decode"], precision, S, d_k, H, run.step.slices, median, nbytes,
                             nbytes / (median["decode"] * 1e-3) / 1e9, hbm_gbs, err,
                             [run.kernels[s] for s in STAGES], speed_path)


def bench_decode(dev, timer, *, lengths, d_ks, H: int, warmup: int, repeats: int, hbm_gbs: float | None,
                 speed_path: bool, progress=lambda s: None) -> tuple[list[DecodeMeasurement], list[str]]:
    """Every (d_k, cache precision, cache length): the measurements, and a note for each that could
    not run (the bf16 cache needs sm_80, as the tensor-core kernels do)."""
    from andrea_cli.backends.launch.fused_bf16 import device_cc

    rows, notes = [], []
    precisions = ("fp32", "bf16") if launch.DECODE[2].runs_on(device_cc(dev)) else ("fp32",)
    if len(precisions) == 1:
        notes.append(f"decode bf16 not measured: {launch.DECODE[2].entry()} needs a GPU of sm_80 or later")
    for d_k in d_ks:
        for precision in precisions:
            for S in lengths:
                progress(f"bench: decode {precision} S={S} d_k={d_k} H={H}")
                try:
                    rows.append(measure_step(dev, timer, S=S, d_k=d_k, H=H, precision=precision, warmup=warmup,
                                             repeats=repeats, hbm_gbs=hbm_gbs, speed_path=speed_path))
                except AndreaError as exc:  # a shape the decode kernels refuse costs its row only
                    notes.append(f"decode {precision} d_k={d_k} S={S} not measured: {str(exc).splitlines()[0]}")
    return rows, notes
