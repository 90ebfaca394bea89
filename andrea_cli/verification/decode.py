"""The decode family: steps of generation (kv_append, attention_decode_kernel1 and 2, the merge)
against the float64 equation's rows. The query of row i is the newest position of a cache of i + 1
keys (causal and window masks; without a mask, of all T keys): its output is the equation's row i.
The cache is filled up to its last two rows, which the append kernel writes; a step reads it from
a single slice (short rows) up to several (past 2 × MIN_SLICE_KEYS keys), and once with one K/V
head shared by every query head (grouped-query attention)."""

from __future__ import annotations

import numpy as np

from andrea_cli.backends.base import DeviceFault
from andrea_cli.backends.launch import decode as launch
from andrea_cli.backends.launch.fused_bf16 import device_cc, launch_to_bf16
from andrea_cli.backends.launch.staged import DEFAULT_PLAN
from andrea_cli.errors import AndreaError, SetupError
from andrea_cli.masks import MaskSpec
from andrea_cli.scale import resolve_scale
from andrea_cli.verification import tolerances
from andrea_cli.verification.bf16_attention import round_bf16
from andrea_cli.verification.case import Case, CaseResult, Exact, Family, Inputs, compare, exact_answer

GQA = "decode1_gqa"  # kernel1 with one K/V head for all query heads
STAGES = (launch.DECODE[1].label, launch.DECODE[2].label, GQA)


def applies(backend, case: Case) -> bool:
    return (case.square and case.plan == DEFAULT_PLAN and hasattr(backend, "device")
            and max(case.d_k, case.d_v) <= launch.DECODE_MAX_D)


def checked_rows(T: int) -> list[int]:
    """The first row (one key), the middle and the last (the whole cache)."""
    return sorted({0, T // 2, T - 1})


def fill_cache(dev, k: np.ndarray, v: np.ndarray, precision: str) -> launch.KVCache:
    """A cache of k, v's T rows: all but the last two copied (converted) in at once, those two
    written by the append kernel, as generation writes every row."""
    H_kv, T, d_k = k.shape
    d_v = v.shape[-1]
    appended = range(max(0, T - 2), T)
    k_head, v_head = k.copy(), v.copy()
    k_head[:, appended.start:], v_head[:, appended.start:] = 0.0, 0.0
    if precision == "bf16":
        halves = []  # to_bf16_kernel1 writes bf16 values; the cache reads them two to a word
        for src in (k_head, v_head):
            dst = dev.empty(src.shape, dtype=np.uint16)
            launch_to_bf16(dev, dev.to_device(src), dst, src.size, 1.0)
            halves.append(dst.view(np.uint32))
        cache = launch.KVCache(*halves, T, H_kv, d_k, d_v, "bf16")
    else:
        cache = launch.KVCache(dev.to_device(k_head), dev.to_device(v_head), T, H_kv, d_k, d_v, "fp32")
    for t in appended:
        launch.append(dev, cache, dev.to_device(k[:, t]), dev.to_device(v[:, t]), t)
    return cache


def steps(dev, cache: launch.KVCache, q: np.ndarray, rows: list[int], mask: MaskSpec, scaled) -> np.ndarray:
    """(H, len(rows), d_v): row i's query against the cache's first i + 1 keys (all of them unmasked)."""
    H, T = q.shape[0], q.shape[1]
    scale = resolve_scale(q.shape[-1], scaled)
    out = []
    for i in rows:
        length = i + 1 if mask.hides_future else T
        step = launch.decode(dev, cache, dev.to_device(q[:, i]), length, H, mask=mask, scale=scale)
        out.append(dev.to_host(step.output))
    return np.stack(out, axis=1)


def check_one(backend, case: Case, x: Inputs, exact: Exact, result: CaseResult, stage: str, precision: str,
              kv_heads: int) -> None:
    dev = backend.device()
    rows = checked_rows(case.T)
    k, v = x.k[:kv_heads], x.v[:kv_heads]
    if precision == "bf16":
        k, v = round_bf16(k), round_bf16(v)
    if precision == "bf16" or kv_heads != x.k.shape[0]:  # the equation on what the cache holds
        group = x.q.shape[0] // kv_heads
        k_full, v_full = np.repeat(k, group, axis=0), np.repeat(v, group, axis=0)
        exact = exact_answer(case, Inputs(x.q, k_full, v_full, x.d_out))
    else:
        k_full, v_full = k, v
    slices = launch.slices(case.T, x.q.shape[0])[0]
    tol = tolerances.decode_tol(x.q, k_full, v_full, exact.weights, exact.visible, case.d_k, case.scaled,
                                launch.STREAMS, slices, exact.bias)
    try:
        cache = fill_cache(dev, x.k[:kv_heads], x.v[:kv_heads], precision)
        got = steps(dev, cache, x.q, rows, case.mask, case.scaled)
    except (DeviceFault, SetupError):  # the machine, not the case: stop the run
        raise
    except AndreaError as exc:
        result.error = f"{stage}: {str(exc).splitlines()[0]}"
        return
    result.stages[stage] = compare(got, exact.output[:, rows], tol[:, rows])


def check_decode(backend, case: Case, x: Inputs, exact: Exact, result: CaseResult) -> None:
    check_one(backend, case, x, exact, result, STAGES[0], "fp32", x.k.shape[0])
    bf16_runs = launch.DECODE[2].runs_on(device_cc(backend.device()))  # sm_80 and up, and the CPU build
    if result.error is None and bf16_runs and case.d_k % 2 == 0 and case.d_v % 2 == 0:
        check_one(backend, case, x, exact, result, STAGES[1], "bf16", x.k.shape[0])
    if result.error is None:
        check_one(backend, case, x, exact, result, GQA, "fp32", 1)


def decode_cases(quick: bool) -> list[Case]:
    """Its edges: a cache of one slice's worth of keys and one more, two slices and one short of a
    third, a window shorter than a slice (so the first slice starts mid-cache)."""
    if quick:
        return [Case(129, 64, 64, MaskSpec("causal"), True, families=("decode",))]
    causal = MaskSpec("causal")
    return [Case(T, 64, 64, causal, True, families=("decode",)) for T in (64, 65, 128, 129, 191)] + [
        Case(300, 32, 48, MaskSpec("window", 50), True, families=("decode",)),
        Case(257, 128, 128, MaskSpec("none"), False, families=("decode",)),
    ]


FAMILY = Family("decode", stages=STAGES, columns=("decode",), groups=(("decode", STAGES),), applies=applies,
                check=check_decode, cases=decode_cases)
