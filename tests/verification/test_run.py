"""verify's sweep (verification/run.py) reaches every edge, and it has the power to fail: broken
copies of the kernel file's staged and fused kernels must each be caught, on a case of `verify
--quick`'s sweep that passes on the real kernels. (The backward's broken copies:
test_backward.py; the tensor-core kernels': test_fused_bf16.py, test_backward_bf16.py.)"""

import pytest

from andrea_cli.backends.launch.staged import ALL_PLANS, KERNEL1_PLAN, LaunchPlan
from andrea_cli.commands.verify import verify_backends
from andrea_cli.kernel_file import packaged_kernel_path
from andrea_cli.masks import MaskSpec
from andrea_cli.verification import Case, run_verify, sweep

REAL = packaged_kernel_path().read_text()


def test_sweep_covers_every_edge():
    cases = sweep()
    assert {c.T for c in cases} >= {1, 2, 7, 31, 32, 33, 64, 127, 257, 1024}
    assert {c.d_k for c in cases} >= {1, 3, 16, 64, 80, 128, 256}
    assert any(c.d_v != c.d_k for c in cases)
    assert {c.mask.kind for c in cases} == {"causal", "none", "window", "array"}
    assert any(c.mask.window > 32 for c in sweep(quick=True))  # wider than a fused key tile
    assert {c.scaled for c in cases} == {True, False}
    assert len({c.plan for c in cases}) == len(ALL_PLANS) == 6


CAUSAL, NONE = MaskSpec("causal"), MaskSpec("none")
# unscaled dot products of width 256 with entries of std 4: scores in the hundreds
OVERFLOWING = Case(33, 256, 16, NONE, False, KERNEL1_PLAN, input_std=4.0)

# bug -> (text in the kernel file, its broken replacement, the case of `verify --quick`'s sweep
# that exposes it, and what fails there: a stage, or the kernel that the case's error names).
# Each broken copy runs only that case (a build and one case, not the whole sweep); the test after
# this table holds the sweep to containing every one, so `verify --quick` would catch each copy.
BROKEN = {
    "mask off by one": ("out[idx] = mask.visible(i, j) ? in[idx] + bias : -INFINITY;",
                        "out[idx] = mask.visible(i, j - 1) ? in[idx] + bias : -INFINITY;", Case(7, 3, 5, CAUSAL, True), "mask"),
    # scores_kernel1 reads 16-wide slices of k: d_k = 40 takes three, so a missing barrier shows
    "missing barrier": ("        for (int cc = 0; cc < TILE; ++cc) acc += q_tile[ty][cc] * k_tile[tx][cc];\n        __syncthreads();",
                        "        for (int cc = 0; cc < TILE; ++cc) acc += q_tile[ty][cc] * k_tile[tx][cc];",
                        Case(33, 40, 16, CAUSAL, True, KERNEL1_PLAN), "scores"),
    "wrong scale": ("out[idx] = in[idx] * scale;", "out[idx] = in[idx] * scale * scale;",
                    Case(7, 3, 5, CAUSAL, True), "scale"),
    "no max subtraction": ("expf(x[j] - m)", "expf(x[j])", OVERFLOWING, "softmax"),
    "bounds off by one": ("    for (int j0 = kt.j_begin; j0 < kt.j_end; j0 += TILE) {\n        const int pj = j0 + tx",
                          "    for (int j0 = kt.j_begin; j0 < kt.j_end - 1; j0 += TILE) {\n        const int pj = j0 + tx",
                          Case(1, 1, 1, CAUSAL, True, KERNEL1_PLAN), "av"),
    # a lane that leaves before a full-mask shuffle: undefined on a GPU (a hang or garbage), an
    # error on the CPU build; at T = 1 softmax_kernel2 runs with 31 idle lanes
    "early return before a shuffle": ("    if (i >= L) return;  // the whole warp leaves together, so no shuffle loses a partner",
                                      "    if (i >= L || lane >= S) return;",
                                      Case(1, 1, 1, CAUSAL, True, LaunchPlan(1, 2, softmax_rows_per_block=1)), "softmax_kernel2"),
    "fused without rescale": ("for (int t = 0; t < FUSED_MAX_D / 32; ++t) acc[t] *= alpha;",
                              "for (int t = 0; t < FUSED_MAX_D / 32; ++t) acc[t] *= 1.0f;",
                              Case(64, 80, 64, CAUSAL, True), "fused1"),
    # the Mask's rule, which every kernel asks: a window one key too wide
    "fused window off by one": ("(window <= 0 || d < window",
                                "(window <= 0 || d <= window",
                                Case(7, 3, 5, MaskSpec("window", 5), True), "fused1"),
    # the register-tiled fused kernel (the default where d_k = d_v = 64 or 128) in base e, not 2:
    # tests/backends/launch/test_register_tiled.py holds more broken copies of the register-tiled kernels
    # the staged GEMM's register prefetch (gemm_tile_8x8) stored after the FMAs into the stage
    # they just read, not the other one: the next slice reads stale data, and a fast thread's
    # store races a slow one's reads. d_k = 80: ten k-slices of scores_kernel2
    "prefetch stored into the stage being read": (
        "        stash(stage ^ 1, PARTS - 1);  // the other stage: nobody reads it before the next barrier",
        "        stash(stage, PARTS - 1);  // the other stage: nobody reads it before the next barrier",
        Case(64, 80, 64, CAUSAL, True), "scores"),
    "fused3 exp2 scale forgotten": ("const float q_factor = scale * LOG2E;", "const float q_factor = scale;",
                                    Case(65, 64, 64, MaskSpec("window", 33), True), "fused3"),
}


def test_the_quick_sweep_holds_every_exposing_case():
    quick = sweep(quick=True)
    for bug, (_, _, case, _) in BROKEN.items():
        assert case in quick, f"'{bug}': verify --quick no longer runs {case.label()} [{case.plan.describe()}]"


def test_the_exposing_cases_pass_on_the_real_kernels():
    # so a broken copy fails its case for its bug, not because the case fails anyway
    cases = list(dict.fromkeys(case for _, _, case, _ in BROKEN.values()))
    report = run_verify(verify_backends("cpu", packaged_kernel_path()), cases, kernel_file="microgpt_cuda.cu")
    assert report.passed and len(report.results) == 2 * len(cases), [r.to_json() for r in report.results if not r.passed]


# three in the default tier (a staged stage, the softmax, the fused online rescale); the rest, a
# group of broken builds of several seconds each, in the slow one
DEFAULT_TIER = ("missing barrier", "no max subtraction", "fused without rescale")


@pytest.mark.parametrize("bug", [bug if bug in DEFAULT_TIER else pytest.param(bug, marks=pytest.mark.slow)
                                 for bug in BROKEN])
def test_verify_catches_a_broken_kernel(tmp_path, bug, quick_builds):
    old, new, case, culprit = BROKEN[bug]
    assert old in REAL, f"the kernel file changed: update the '{bug}' mutation"
    broken = tmp_path / "broken.cu"
    broken.write_text(REAL.replace(old, new))  # every occurrence: "no max subtraction" has four
    # what `verify --backend cpu --kernel broken.cu` runs, on the one case: both thread schedules
    report = run_verify(verify_backends("cpu", broken), [case], kernel_file=str(broken))
    assert not report.passed and len(report.results) == 2
    for result in report.results:
        failed = [name for name, check in result.stages.items() if not check.passed]
        assert culprit in failed or culprit in (result.error or ""), (result.schedule, failed, result.error)
