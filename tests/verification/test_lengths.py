"""verify's cases beyond one square head (verification/lengths.py): L != S and grouped K/V heads
are in the sweep, and broken copies of the kernel file (and of the launcher's offset) that only
such cases expose are caught by a case of `verify --quick`."""

import dataclasses

import numpy as np
import pytest

from andrea_cli.backends.launch.staged import DEFAULT_PLAN, KERNEL1_PLAN
from andrea_cli.commands.verify import verify_backends
from andrea_cli.kernel_file import packaged_kernel_path
from andrea_cli.masks import MaskSpec
from andrea_cli.verification import Case, run_verify, sweep
from tests.verification.broken_copies import verify_broken_copy

REAL = packaged_kernel_path().read_text()
CAUSAL = MaskSpec("causal")


def test_the_sweep_holds_every_length_and_grouping():
    cases = sweep()
    assert any(c.T < c.S for c in cases) and any(c.T > c.S for c in cases) and any(c.T == 1 < c.S for c in cases)
    assert any(c.T > c.S and c.mask.kind == "causal" and c.mask.align == "bottom_right" for c in cases)  # rows see no key
    assert any(c.mask.align == "top_left" and c.T != c.S for c in cases)
    groups = {c.heads // c.H_kv for c in cases}
    assert {2, 8} <= groups and any(c.H_kv == 1 < c.heads for c in cases)
    assert len({c.plan for c in cases if not c.square}) == 6  # every staged geometry


GROUPED = Case(33, 64, 64, CAUSAL, True, heads=4, kv_heads=2)
SHORT_QUERIES = Case(17, 16, 16, CAUSAL, True, T_k=65)
GROUPED_KERNEL1 = Case(17, 16, 24, CAUSAL, True, KERNEL1_PLAN, T_k=40, heads=4, kv_heads=2)
DECODE_STEP = Case(1, 64, 64, CAUSAL, True, T_k=64)  # one query at key position 63: the bf16 kernels' L != S


def tensor_core_heads(rows: str) -> tuple[str, str]:
    """kernel4/5/6's K/V head (their blocks of `rows` rows tell them apart): h / group -> h % H_kv."""
    head = f"const int row0 = work.tile * {rows};\n    const long head = work.head;\n    q += head * L * D;\n"
    return (head + "    k += head / group * Sk * D;  // query head h reads K/V head h / group, in place\n"
                   "    v += head / group * Sk * D;",
            head + "    k += head % (gridDim.z / group) * Sk * D;\n    v += head % (gridDim.z / group) * Sk * D;")

def dkdv_kernel2_interleaved() -> tuple[str, str]:
    """bf16 dkdv_kernel2's query heads for K/V head kv: kv, kv + H_kv, .. (h % H_kv, torch's
    repeat) instead of its own block kv·group .. kv·group + group - 1 (h / group)."""
    walk = ("    // Query rows (in every head of the group) that see any of the block's keys; the tiles\n"
            "    // outside are never loaded. The walk runs over the group's heads one after the other, tile\n"
            "    // n of it being tile n % per_head of head n / per_head: one pipeline for the whole group, and\n"
            "    // dK, dV summed in registers in one fixed order (no atomics, no per-query-head partial).\n"
            "    const QueryRows qr = mask.query_rows(j0, TC_KEYS, L);\n"
            "    const int i_begin = qr.i_begin, per_head = max(0, (qr.i_end - i_begin + QT - 1) / QT);\n"
            "    const int n_tiles = group * per_head;\n"
            "    // tile n's head, as offsets into q/d_out (rows of D) and lse/delta\n")
    real = ("    q += kv_head * group * L * D;  // the group's first query head; head h of the group h·L rows on\n"
            "    d_out += kv_head * group * L * D;\n    lse += kv_head * group * L;\n    delta += kv_head * group * L;\n\n"
            + walk + "    auto head_rows = [&](int n) { return (long)(n / per_head) * L; };")
    broken = ("    q += kv_head * L * D;\n    d_out += kv_head * L * D;\n    lse += kv_head * L;\n"
              "    delta += kv_head * L;\n\n" + walk + "    auto head_rows = [&](int n) { return (long)(n / per_head) * gridDim.z * L; };")
    return real, broken


# bug -> (text in the kernel file, its broken replacement, the exposing case, the stage that fails)
BROKEN = {
    # torch's repeat vs repeat_interleave: query head h on K/V head h % H_kv instead of h / group
    "scores: K head interleaved": ("k + head / group * S * d_k, d_k,", "k + head % (gridDim.z / group) * S * d_k, d_k,",
                                   GROUPED, "scores"),
    "av_kernel1: V head interleaved": ("v += head / group * S * d_v;  // query head h reads K/V head h / group",
                                       "v += head % (gridDim.z / group) * S * d_v;",
                                       GROUPED_KERNEL1, "av"),
    "av_kernel2: one query head per K/V head": ("d_v, group * L, d_v, kt.j_end, row0", "d_v, L, d_v, kt.j_end, row0",
                                                GROUPED, "av"),
    # (the fused backward's dq kernel opens the same way; its next line, d_out, tells them apart)
    "fused1: K/V head interleaved": ("    k += head / group * S * d_k;  // query head h reads K/V head h / group\n"
                                     "    v += head / group * S * d_v;\n    out += head * L * d_v;",
                                     "    k += head % (gridDim.z / group) * S * d_k;\n    v += head % (gridDim.z / group) * S * d_v;"
                                     "\n    out += head * L * d_v;",
                                     GROUPED, "fused1"),
    "fused3: K head interleaved": ("(k + head / group * S * D);", "(k + head % (gridDim.z / group) * S * D);",
                                   GROUPED, "fused3"),
    "fused4_bf16: K/V head interleaved": (*tensor_core_heads("TC_ROWS"), GROUPED, "fused4_bf16"),
    "fused5_bf16: K/V head interleaved": (*tensor_core_heads("K5_ROWS"), GROUPED, "fused5_bf16"),
    "fused6_bf16: K/V head interleaved": (*tensor_core_heads("K6_ROWS"), GROUPED, "fused6_bf16"),
    # kernel7 finds its K/V head's rows in the tensor maps' (H_kv·S, d) matrices by the same rule
    "fused7_bf16: K/V head interleaved": ("const int kv_row0 = (int)(head / group) * Sk;",
                                          "const int kv_row0 = (int)(head % (gridDim.z / group)) * Sk;",
                                          GROUPED, "fused7_bf16"),
    # kernel4 copying K's rows up to the queries' count: the decode step's keys past 0 read as zeros
    "fused4_bf16: K rows bounded by L": ("tc_load_rows<D>(k_s, k, j_begin, TC_KEYS, Sk);",
                                         "tc_load_rows<D>(k_s, k, j_begin, TC_KEYS, L);", DECODE_STEP, "fused4_bf16"),
    # the backward's side of the grouping: dK/dV summed over the wrong query heads (K/V head kv
    # gets kv, kv + H_kv, ... instead of its own block kv·group ..), or dP/dQ reading the wrong K/V head
    "dkdv_kernel1: query heads of a K/V head interleaved": (
        "const long head = kv_head * group + h;  // the group's query heads, in order",
        "const long head = kv_head + h * gridDim.z;", GROUPED, "fused1_dk"),
    "dv_kernel1: one query head per K/V head summed": ("L, S, d_v, group, 1.0f, Mask::from_args",
                                                       "L, S, d_v, 1, 1.0f, Mask::from_args", GROUPED_KERNEL1, "dv"),
    "dp_kernel1: V head interleaved": ("    v += head / group * S * d_v;  // query head h reads V head h / group",
                                       "    v += head % (gridDim.z / group) * S * d_v;", GROUPED_KERNEL1, "dp"),
    "bf16 dq_kernel2: K/V head interleaved": (
        "    k += head / group * S * D;  // query head h reads K/V head h / group\n    v += head / group * S * D;",
        "    k += head % (gridDim.z / group) * S * D;\n    v += head % (gridDim.z / group) * S * D;", GROUPED, "bf16_dq"),
    "bf16 dkdv_kernel2: query heads of a K/V head interleaved": (*dkdv_kernel2_interleaved(), GROUPED, "bf16_dk"),
    # the square rule j_end = last_row + 1: a query sees no key past its row number
    "key range without the offset": ("min(S, last_row + offset + right + 1)", "min(S, last_row + right + 1)",
                                     SHORT_QUERIES, "av"),
}


def test_the_quick_sweep_holds_every_exposing_case():
    quick = sweep(quick=True)
    for bug, (_, _, case, _) in BROKEN.items():
        assert case in quick, f"'{bug}': verify --quick no longer runs {case.label()}"


def test_the_exposing_cases_pass_on_the_real_kernels():
    cases = list(dict.fromkeys(case for _, _, case, _ in BROKEN.values()))
    report = run_verify(verify_backends("cpu", packaged_kernel_path()), cases, kernel_file="microgpt_cuda.cu")
    assert report.passed and len(report.results) == 2 * len(cases), [r.to_json() for r in report.results if not r.passed]


def test_the_backward_families_take_every_length_and_grouping():
    """verify's backward families run on the sweep's L != S and grouped cases, not the square only."""
    from andrea_cli.backends.launch.fused_bf16 import BF16_DIMS
    from andrea_cli.verification import backward, backward_bf16

    from andrea_cli.backends.cpu import CpuBackend

    backend = CpuBackend  # applies() asks which methods it has: the class, without a build
    others = [c for c in sweep() if not c.square]
    fp32 = [c for c in others if backward.applies(backend, c)]
    assert {c.plan for c in fp32} == {DEFAULT_PLAN, KERNEL1_PLAN} and GROUPED in fp32 and GROUPED_KERNEL1 in fp32
    assert any(c.T > c.S for c in fp32) and any(c.T == 1 for c in fp32) and any(c.H_kv == 1 < c.heads for c in fp32)
    bf16 = [c for c in others if backward_bf16.applies(backend, c)]
    assert GROUPED in bf16 and DECODE_STEP in bf16 and any(c.T > c.S for c in bf16)
    assert all(c.d_k in BF16_DIMS for c in bf16)


def test_the_group_sum_bound_holds_float32_and_not_a_head_short():
    """dK = scale·dS^T·Q summed over a group (here 4 query heads a K/V head, L = 33): a float32
    product and sum is within tolerances_backward.dk_tol's bound, and the sum without the
    group's last head (what a kernel that walked one head fewer would write) is not."""
    from andrea_cli.reference_backward import key_gradient
    from andrea_cli.verification import tolerances_backward as tb

    rng = np.random.default_rng(0)
    H, H_kv, L, S, d, factor = 8, 2, 33, 40, 64, 0.125
    ds = (rng.standard_normal((H, L, S)) * 0.05).astype(np.float32)
    q = rng.standard_normal((H, L, d)).astype(np.float32)
    exact = key_gradient(ds.astype(np.float64), q, factor, H_kv)
    tol = tb.dk_tol(ds, q, np.float32(factor), H_kv=H_kv)
    per_head = np.matmul(ds.transpose(0, 2, 1), q) * np.float32(factor)  # float32 throughout
    summed = per_head.reshape(H_kv, H // H_kv, S, d).sum(axis=1, dtype=np.float32)
    assert exact.shape == (H_kv, S, d) and (np.abs(summed - exact) <= tol).all()
    short = per_head.reshape(H_kv, H // H_kv, S, d)[:, :-1].sum(axis=1, dtype=np.float32)
    assert (np.abs(short - exact) > tol).mean() > 0.9


def report_failed_stages(report) -> set[str]:
    return {name for r in report.results for name, check in r.stages.items() if not check.passed}


@pytest.mark.slow  # a CPU build of the broken copy each: ~15 s
@pytest.mark.parametrize("bug", BROKEN)
def test_verify_catches_a_broken_kernel(tmp_path, quick_builds, bug):
    old, new, case, culprit = BROKEN[bug]
    report = verify_broken_copy(tmp_path, bug, old, new, [case])
    assert culprit in report_failed_stages(report) or any(culprit in (r.error or "") for r in report.results)


@pytest.mark.slow
def test_verify_catches_the_diagonal_offset_off_by_one(monkeypatch):
    """The launcher's side: the kernels told S - L - 1 (the reference keeps S - L)."""
    real = MaskSpec.kernel_args

    def off_by_one(self, L=0, S=0, heads=None):
        causal, window, offset, *flavours = real(self, L, S, heads=heads)
        return causal, window, np.int32(offset - 1) if L != S else offset, *flavours

    monkeypatch.setattr(MaskSpec, "kernel_args", off_by_one)
    report = run_verify(verify_backends("cpu", packaged_kernel_path()), [SHORT_QUERIES], kernel_file="microgpt_cuda.cu")
    assert not report.passed and {"mask", "fused1", "fused2"} <= report_failed_stages(report)
    square = dataclasses.replace(SHORT_QUERIES, T_k=None)  # offset 0: untouched, still passes
    assert run_verify(verify_backends("cpu", packaged_kernel_path()), [square], kernel_file="x").passed
