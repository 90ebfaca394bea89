"""What verify checks and what it finds: a case (shape, mask, launch geometry), its inputs and
the exact float64 answer every kernel family is held to, a family's shape, and the results."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from andrea_cli import reference
from andrea_cli.backends.launch.staged import DEFAULT_PLAN, LaunchPlan
from andrea_cli.masks import MaskSpec

H_VERIFY = 2  # every case runs two heads, so the head offset on gridDim.z is exercised everywhere


@dataclass(frozen=True)
class Case:
    T: int
    d_k: int
    d_v: int
    mask: MaskSpec
    scaled: bool
    plan: LaunchPlan = DEFAULT_PLAN
    input_std: float = 1.0  # > 1 makes large scores: softmax without the max subtraction overflows
    # Q and K uniform in [-A, A] instead of normal (V stays N(0, 1)): A = 100 at d 128 puts the
    # scaled scores near 1e4, where each score's float32 rounding error is ~1e-3 (issue 33, item 6)
    input_uniform: float | None = None
    families: tuple[str, ...] | None = None  # only these families run on it (None: every one that applies)
    T_k: int | None = None  # keys S, when not T (T is then the L queries: cross-attention, a decode step)
    heads: int = H_VERIFY  # query heads H
    kv_heads: int | None = None  # K/V heads H_kv (H unless given): H / H_kv query heads share each

    @property
    def S(self) -> int:
        return self.T if self.T_k is None else self.T_k

    @property
    def H_kv(self) -> int:
        return self.heads if self.kv_heads is None else self.kv_heads

    @property
    def square(self) -> bool:
        """T queries against the same T keys, one K/V head per query head: what every family takes."""
        return self.S == self.T and self.H_kv == self.heads

    def shape_text(self) -> str:
        """T, or L:S where the keys differ; H/H_kv where heads are grouped."""
        lengths = str(self.T) if self.S == self.T else f"{self.T}:{self.S}"
        return lengths if self.H_kv == self.heads else f"{lengths} h{self.heads}/{self.H_kv}"

    def label(self) -> str:
        inputs = "" if self.input_uniform is None else f" Q,K uniform ±{self.input_uniform:g}"
        return (f"T={self.shape_text()} d_k={self.d_k} d_v={self.d_v} {self.mask} "
                f"{'scaled' if self.scaled else 'unscaled'}{inputs}")


@dataclass
class Inputs:
    q: np.ndarray  # (H, L, d_k) float32
    k: np.ndarray  # (H_kv, S, d_k) float32
    v: np.ndarray  # (H_kv, S, d_v) float32
    d_out: np.ndarray  # (H, L, d_v) float32: the upstream gradient dL/d(output), for the backward


def draw_inputs(case: Case, seed: int) -> Inputs:
    rng = np.random.default_rng(seed)
    H, H_kv, std = case.heads, case.H_kv, np.float32(case.input_std)
    q = rng.standard_normal((H, case.T, case.d_k), dtype=np.float32) * std
    k = rng.standard_normal((H_kv, case.S, case.d_k), dtype=np.float32) * std
    if case.input_uniform is not None:
        a = case.input_uniform
        q = rng.uniform(-a, a, (H, case.T, case.d_k)).astype(np.float32)
        k = rng.uniform(-a, a, (H_kv, case.S, case.d_k)).astype(np.float32)
    v = rng.standard_normal((H_kv, case.S, case.d_v), dtype=np.float32)
    d_out = rng.standard_normal((H, case.T, case.d_v), dtype=np.float32)
    return Inputs(q, k, v, d_out)


@dataclass
class Exact:
    """The equation in float64 on the case's inputs: what every family's output is held to."""

    scores: np.ndarray  # (H, L, S) Q·K^T, unscaled
    weights: np.ndarray  # (H, L, S) softmax(mask(scale(scores)))
    output: np.ndarray  # (H, L, d_v)
    visible: np.ndarray  # (L, S) bool: the keys each query may see; (H, L, S) for a per-head mask array
    bias: np.ndarray | None = None  # what is added to the scaled scores: a mask array's, or ALiBi's (H, L, S)


def exact_answer(case: Case, x: Inputs) -> Exact:
    s = reference.scores(x.q, x.k)
    p = reference.softmax(reference.mask(reference.scale(s, case.d_k) if case.scaled else s, case.mask))
    bias = case.mask.bias if case.mask.is_array else case.mask.score_bias(case.heads, case.T, S=case.S)
    return Exact(s, p, reference.weighted_sum(p, x.v), case.mask.visible(case.T, S=case.S), bias)


@dataclass
class StageCheck:
    max_abs_err: float
    max_rel_err: float
    tol: float  # the largest element-wise bound; each element is checked against its own
    passed: bool
    first_bad: dict | None = None  # {"index": [h, i, j], "got": x, "expected": y, "tol": t}


@dataclass
class CaseResult:
    case: Case
    schedule: str
    stages: dict[str, StageCheck] = field(default_factory=dict)
    invariants: dict[str, bool] = field(default_factory=dict)
    error: str | None = None  # a kernel did not finish (deadlock, launch error)

    @property
    def passed(self) -> bool:
        return self.error is None and all(s.passed for s in self.stages.values()) and all(self.invariants.values())

    def to_json(self) -> dict:
        c = self.case
        return {
            "T": c.T, "S": c.S, "H": c.heads, "H_kv": c.H_kv, "d_k": c.d_k, "d_v": c.d_v, "mask": str(c.mask), "scaled": c.scaled,
            "geometry": c.plan.describe(), "schedule": self.schedule, "input_std": c.input_std,
            "input_uniform": c.input_uniform,
            "passed": self.passed, "error": self.error,
            "stages": {name: s.__dict__ for name, s in self.stages.items()},
            "invariants": self.invariants,
        }


@dataclass
class VerifyReport:
    backend: str
    device: str
    kernel_file: str
    results: list[CaseResult]
    elapsed_s: float

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    def to_json(self) -> dict:
        failed = sum(not r.passed for r in self.results)
        return {"backend": self.backend, "device": self.device, "kernel_file": self.kernel_file,
                "passed": self.passed, "n_cases": len(self.results), "n_failed": failed,
                "elapsed_s": round(self.elapsed_s, 3), "cases": [r.to_json() for r in self.results]}


@dataclass(frozen=True)
class Family:
    """One family of kernels verify checks (the staged stages, the fused kernels, ...).

    applies(backend, case): whether this family runs on this case (a width it takes, a method the
    backend has). check(backend, case, inputs, exact, result): run its kernels, add one
    StageCheck per kernel (or stage) to result.stages, or set result.error when one does not
    finish. stages: the names it adds, in order. columns: those verify's table shows, one column
    each (None: all of them); a column named in groups shows the worst of that group's stages.
    cases(quick): the cases it needs beyond the shared sweep (e.g. other launch geometries)."""

    name: str
    stages: tuple[str, ...]
    applies: Callable[[object, Case], bool]
    check: Callable[[object, Case, Inputs, Exact, CaseResult], None]
    cases: Callable[[bool], list[Case]] = lambda quick: []
    columns: tuple[str, ...] | None = None
    groups: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (column, the stages it stands for)
    header: str = ""  # its column in verify's table of families (its name where empty)

    @property
    def table_columns(self) -> tuple[str, ...]:
        return self.stages if self.columns is None else self.columns

    def column_stages(self, column: str) -> tuple[str, ...]:
        return dict(self.groups).get(column, (column,))


def compare(got: np.ndarray, expected: np.ndarray, tol: np.ndarray | float) -> StageCheck:
    got64 = got.astype(np.float64)
    tol_arr = np.broadcast_to(np.asarray(tol, dtype=np.float64), expected.shape)
    both_inf = np.isinf(expected) & (got64 == expected)  # -inf where -inf was due
    with np.errstate(invalid="ignore"):  # inf - inf where the kernel put -inf but should not have
        err = np.where(both_inf, 0.0, np.abs(got64 - expected))
    err = np.where(np.isnan(err), np.inf, err)  # a NaN is the worst error, not a silent pass
    bad = err > tol_arr
    finite_ref = np.isfinite(expected) & (expected != 0)
    rel = np.where(finite_ref, err / np.where(finite_ref, np.abs(expected), 1.0), 0.0)
    check = StageCheck(
        max_abs_err=float(err.max()) if err.size else 0.0,
        max_rel_err=float(rel.max()) if rel.size else 0.0,
        tol=float(tol_arr.max()) if tol_arr.size else 0.0,
        passed=not bad.any(),
    )
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])  # the first, in row-major order
        check.first_bad = {"index": list(index), "got": float(got64[index]), "expected": float(expected[index]),
                           "tol": float(tol_arr[index])}
    return check
