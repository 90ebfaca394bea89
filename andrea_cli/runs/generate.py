"""`andrea generate`: the course's "ANDREA generates one token at a time ... training must mirror
this", measured. T steps, each appending position t's k and v to a KV cache and attending with
position t's query alone (the decode kernels); then one causal pass over all T positions (what
training computes) and one unmasked pass (a model that could see the future), each compared
with what generation produced."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from andrea_cli import reference
from andrea_cli.backends.launch import decode as launch
from andrea_cli.masks import MaskSpec
from andrea_cli.runs.header import kernel_file_of
from andrea_cli.scale import resolve_scale
from andrea_cli.verification import tolerances
from andrea_cli.verification.bf16_attention import round_bf16


@dataclass
class Step:
    position: int
    keys: int  # the cached keys its query read
    bytes_read: int  # of the cache (K and V rows it read)
    ms: dict[str, float]  # append, decode, merge
    slices: int


@dataclass
class GenerateReport:
    T: int
    d_k: int
    d_v: int
    precision: str  # the cache's: fp32, or bf16 (the pass it is compared with reads the same bf16 values)
    mask: MaskSpec
    seed: int
    source: str
    backend: str
    device: str
    kernel_file: str
    kernels: dict[str, str]  # {stage: kernel}: append, decode, merge, and the passes' fused kernel
    steps: list[Step]
    vs_causal: np.ndarray  # (T,) max |generation - causal pass| per position
    vs_unmasked: np.ndarray  # (T,) max |generation - unmasked pass| per position
    generation_error: float  # max |generation - the float64 equation| / verify's bound (<= 1: rounding)
    causal_error: float  # the same for the causal pass
    elapsed_s: float
    output: np.ndarray  # (T, d_v): what generation produced
    notices: list[str] = field(default_factory=list)
    hbm_gbs: float | None = None  # the GPU's memory bandwidth (its properties), None on the CPU build
    kernel_file_installed: bool = True  # the installed copy (edits to a checkout's cuda/ need --kernel)

    @property
    def decode_gbs(self) -> float:
        """The cache bytes over the decode kernel's own time (the kernel that reads them)."""
        ms = sum(s.ms["decode"] for s in self.steps)
        return self.bytes_read / (ms * 1e-3) / 1e9 if ms > 0 else 0.0

    @property
    def agrees(self) -> bool:
        """Generation and the causal pass are the same equation: both within verify's bound."""
        return self.generation_error <= 1.0 and self.causal_error <= 1.0

    @property
    def step_ms(self) -> np.ndarray:
        return np.array([sum(s.ms.values()) for s in self.steps])

    @property
    def bytes_read(self) -> int:
        return sum(s.bytes_read for s in self.steps)

    def to_json(self) -> dict:
        ms = self.step_ms
        return {
            "T": self.T, "d_k": self.d_k, "d_v": self.d_v, "precision": self.precision, "mask": str(self.mask),
            "seed": self.seed, "inputs": self.source, "backend": self.backend, "device": self.device,
            "kernel_file": self.kernel_file, "kernel_file_installed": self.kernel_file_installed,
            "kernels": self.kernels,
            "generation_vs_causal": {"max_abs_diff": float(self.vs_causal.max()), "agrees": self.agrees,
                                     "generation_error_over_bound": self.generation_error,
                                     "causal_pass_error_over_bound": self.causal_error},
            "unmasked_vs_generation": {"max_abs_diff": float(self.vs_unmasked.max()),
                                       "mean_abs_diff_per_position": float(self.vs_unmasked.mean()),
                                       "per_position": [float(x) for x in self.vs_unmasked]},
            "steps": [{"position": s.position, "keys": s.keys, "bytes_read": s.bytes_read, "slices": s.slices,
                       "ms": {k: round(v, 4) for k, v in s.ms.items()}} for s in self.steps],
            "total_ms": round(float(ms.sum()), 3), "cache_bytes_read": self.bytes_read,
            "decode_gbs": round(self.decode_gbs, 3), "hbm_gbs": self.hbm_gbs,
            "decode_share_of_hbm": round(self.decode_gbs / self.hbm_gbs, 4) if self.hbm_gbs else None,
            "elapsed_s": round(self.elapsed_s, 3),
        }


def sampled_positions(T: int, n: int = 10) -> list[int]:
    """The positions a table shows: the first few, then spread evenly to the last."""
    return sorted({0, 1, 2, *np.linspace(0, T - 1, n - 3).round().astype(int).tolist()} & set(range(T)))


def generate(backend, q: np.ndarray, k: np.ndarray, v: np.ndarray, *, mask: MaskSpec, precision: str = "fp32",
             scaled=True, progress=None) -> tuple[np.ndarray, list[Step], dict[str, str]]:
    """q, k: (T, d_k), v: (T, d_v), one head. Step t appends k[t], v[t] and attends with q[t]:
    (T, d_v) outputs, the steps' times and bytes, and the kernels that ran."""
    dev = backend.device()
    T, d_k = q.shape
    d_v = v.shape[-1]
    cache = launch.new_cache(dev, 1, T, d_k, d_v, precision)
    scale = resolve_scale(d_k, scaled)  # once, for every step
    out = np.empty((T, d_v), dtype=np.float32)
    steps, kernels = [], {}
    for t in range(T):
        clock = dev.clock()
        k_new, v_new, q_new = (dev.to_device(x[t][None]) for x in (k, v, q))  # (1, d): one head
        clock.start("append")
        kernels.update(launch.append(dev, cache, k_new, v_new, t))
        clock.stop("append")
        step = launch.decode(dev, cache, q_new, t + 1, 1, mask=mask, scale=scale, clock=clock)
        kernels.update(step.kernels)
        out[t] = dev.to_host(step.output)[0]
        ms = clock.elapsed_ms()
        steps.append(Step(t, step.keys, cache.bytes_read(step.keys), {s: ms[s] for s in ("append", "decode", "merge")},
                          step.slices))
        if progress is not None:
            progress(t + 1, T)
    return out, steps, kernels


def run_generate(backend, q, k, v, *, mask: MaskSpec, precision: str, seed: int, source: str, kernel_file: str,
                 notices: list[str], scaled=True, progress=None) -> GenerateReport:
    start = time.perf_counter()
    T, d_k = q.shape
    d_v = v.shape[-1]
    generated, steps, kernels = generate(backend, q, k, v, mask=mask, precision=precision, scaled=scaled,
                                         progress=progress)
    # the passes read what the cache holds: K and V rounded to bf16 when the cache is bf16
    k_seen, v_seen = (round_bf16(k), round_bf16(v)) if precision == "bf16" else (k, v)
    causal = backend.attention_fused(q[None], k_seen[None], v_seen[None], mask=mask, scaled=scaled)
    unmasked = backend.attention_fused(q[None], k_seen[None], v_seen[None], mask=MaskSpec("none"), scaled=scaled)
    kernels["pass"] = causal.kernel

    # both against the float64 equation, each held to verify's bound for its kernel
    q3, k3, v3 = q[None], k_seen[None], v_seen[None]
    s = reference.scores(q3, k3)
    p = reference.softmax(reference.mask(reference.scale(s, d_k) if scaled else s, mask))
    exact = reference.weighted_sum(p, v3)[0]
    visible = mask.visible(T)
    slices = max(st.slices for st in steps)
    bias = mask.score_bias(1, T)  # ALiBi's, one head (None without)
    gen_tol = tolerances.decode_tol(q3, k3, v3, p, visible, d_k, scaled, launch.STREAMS, slices, bias)[0]
    pass_tol = tolerances.fused_tol(q3, k3, v3, p, visible, d_k, scaled, bias)[0]
    return GenerateReport(
        T, d_k, d_v, precision, mask, seed, source, backend.name, backend.device_name(), kernel_file, kernels, steps,
        vs_causal=np.abs(generated - causal.output[0]).max(axis=-1),
        vs_unmasked=np.abs(generated - unmasked.output[0]).max(axis=-1),
        generation_error=float((np.abs(generated - exact) / gen_tol).max()),
        causal_error=float((np.abs(causal.output[0] - exact) / pass_tol).max()),
        elapsed_s=time.perf_counter() - start, output=generated, notices=notices, hbm_gbs=hbm_bandwidth(backend),
        kernel_file_installed=kernel_file_of(backend)[1])


def hbm_bandwidth(backend) -> float | None:
    """GB/s of the GPU's memory, from its properties (bench's roofline); None off a GPU."""
    if backend.name != "cuda":
        return None
    from andrea_cli.bench.gpu import gpu_properties
    from andrea_cli.bench.roofline import peak_from_properties

    return peak_from_properties(gpu_properties()).peak_gbs
