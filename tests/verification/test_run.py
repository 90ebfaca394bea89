"""`andrea verify` on the CPU build of the kernel file: it passes on the real kernels, and it has
the power to fail: deliberately broken copies of the kernel file must each be caught."""

import json

import pytest

from andrea_cli.backends.launch.staged import ALL_PLANS, DEFAULT_PLAN, KERNEL1_PLAN, LaunchPlan
from andrea_cli.commands.verify import verify_backends
from andrea_cli.kernel_file import packaged_kernel_path
from andrea_cli.masks import MaskSpec
from andrea_cli.verification import Case, run_verify, sweep

REAL = packaged_kernel_path().read_text()


@pytest.mark.slow  # the whole quick sweep (29 cases, both schedules): ~15 s of CPU
def test_quick_sweep_passes_with_json_contract(cli):
    result = cli("verify", "--quick", "--backend", "cpu", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["backend"] == "cpu" and doc["passed"] is True and doc["n_failed"] == 0
    schedules = {c["schedule"] for c in doc["cases"]}
    assert schedules == {"forward", "reverse"}
    for case in doc["cases"]:
        assert set(case) >= {"T", "d_k", "d_v", "mask", "scaled", "passed", "stages"}
        for stage in ("scores", "softmax", "av", "output"):
            assert set(case["stages"][stage]) >= {"max_abs_err", "max_rel_err", "tol"}
            assert case["stages"][stage]["max_abs_err"] <= case["stages"][stage]["tol"]
        assert all(case["invariants"].values())


def test_one_case_and_table(cli):
    result = cli("verify", "--backend", "cpu", "--T", 31, "--d-k", 3, "--d-v", 5, "--mask", "window:4")
    assert result.exit_code == 0, result.output
    assert "PASSED" in result.output and "window:4" in result.output


def test_sweep_covers_every_edge():
    cases = sweep()
    assert {c.T for c in cases} >= {1, 2, 7, 31, 32, 33, 64, 127, 257, 1024}
    assert {c.d_k for c in cases} >= {1, 3, 16, 64, 80, 128, 256}
    assert any(c.d_v != c.d_k for c in cases)
    assert {c.mask.kind for c in cases} == {"causal", "none", "window"}
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
    "mask off by one": ("const bool future = j > i;", "const bool future = j > i + 1;",
                        Case(7, 3, 5, CAUSAL, True), "mask"),
    # scores_kernel1 reads 16-wide slices of k: d_k = 40 takes three, so a missing barrier shows
    "missing barrier": ("        for (int cc = 0; cc < TILE; ++cc) acc += q_tile[ty][cc] * k_tile[tx][cc];\n        __syncthreads();",
                        "        for (int cc = 0; cc < TILE; ++cc) acc += q_tile[ty][cc] * k_tile[tx][cc];",
                        Case(33, 40, 16, CAUSAL, True, KERNEL1_PLAN), "scores"),
    "wrong scale": ("out[idx] = in[idx] * scale;", "out[idx] = in[idx] * scale * scale;",
                    Case(7, 3, 5, CAUSAL, True), "scale"),
    "no max subtraction": ("expf(x[j] - m)", "expf(x[j])", OVERFLOWING, "softmax"),
    "bounds off by one": ("    const int j_end = causal ? last_row + 1 : T;\n\n    const int i = row0 + ty, c = col0 + tx;",
                          "    const int j_end = causal ? last_row : T;\n\n    const int i = row0 + ty, c = col0 + tx;",
                          Case(1, 1, 1, CAUSAL, True, KERNEL1_PLAN), "av"),
    # a lane that leaves before a full-mask shuffle: undefined on a GPU (a hang or garbage), an
    # error on the CPU build; at T = 1 softmax_kernel2 runs with 31 idle lanes
    "early return before a shuffle": ("    if (i >= T) return;  // the whole warp leaves together, so no shuffle loses a partner",
                                      "    if (i >= T || lane >= T) return;",
                                      Case(1, 1, 1, CAUSAL, True, LaunchPlan(1, 2, softmax_rows_per_block=1)), "softmax_kernel2"),
    "fused without rescale": ("for (int t = 0; t < FUSED_MAX_D / 32; ++t) acc[t] *= alpha;",
                              "for (int t = 0; t < FUSED_MAX_D / 32; ++t) acc[t] *= 1.0f;",
                              Case(64, 80, 64, CAUSAL, True), "fused1"),
    "fused window off by one": ("(window <= 0 || i - j < window);\n        s = visible ? s : -INFINITY;  // -inf",
                                "(window <= 0 || i - j <= window);\n        s = visible ? s : -INFINITY;  // -inf",
                                Case(7, 3, 5, MaskSpec("window", 5), True), "fused1"),
    # the register-tiled fused kernel (the default where d_k = d_v = 64 or 128) in base e, not 2:
    # tests/test_fast_kernels.py holds more broken copies of the register-tiled kernels
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


@pytest.mark.parametrize("bug", BROKEN)
def test_verify_catches_a_broken_kernel(tmp_path, bug):
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


def test_a_kernel_that_does_not_compile_is_a_usage_error(run_main, tmp_path):
    broken = tmp_path / "broken.cu"
    broken.write_text(REAL.replace("float acc = 0.0f;", "float acc = 0.0f", 1))
    code, _, err = run_main("verify", "--quick", "--backend", "cpu", "--kernel", broken)
    assert code == 2 and len(err.strip().splitlines()) == 1, err


def test_numpy_is_not_a_verify_backend(run_main):
    code, _, err = run_main("verify", "--backend", "numpy")
    assert code == 2 and "reference" in err


# Broken backward kernels: (original, replacement, a stage that must fail). Compiling a copy for
# the CPU dominates these tests, so the copies are built at once, two at a time, and each is
# verified on one case (two heads, a partial 32-key tile, causal, both schedules).
# bug -> (text, its broken replacement, the stage that must fail, the plan whose staged backward
# runs the broken kernel: the default's dv/dp/dq/dk are kernel2, KERNEL1_PLAN's kernel1)
BROKEN_BACKWARD = {
    "rowsum term dropped": ("ds[row + j] = p[j] * (g[j] - row_dot);", "ds[row + j] = p[j] * g[j];", "ds",
                            DEFAULT_PLAN),
    "scale applied twice": ("dq[(long)i * d_k + c] = acc * scale;", "dq[(long)i * d_k + c] = acc * scale * scale;", "dq",
                            KERNEL1_PLAN),
    "scale applied twice (register-tiled)": ("j_end, row0, blockIdx.x * 64, 0, scale);",
                                             "j_end, row0, blockIdx.x * 64, 0, scale * scale);", "dq", DEFAULT_PLAN),
    "masked gradient not zero": ("return i < T && j < T && (!causal || j <= i) && (window <= 0 || i - j < window);",
                                 "return i < T && j < T;", "fused1_dk", DEFAULT_PLAN),
    "dK transposed wrong": ("for (int ii = 0; ii < TILE; ++ii) acc += a_tile[ii][ty] * b_tile[ii][tx];",
                            "for (int ii = 0; ii < TILE; ++ii) acc += a_tile[ty][ii] * b_tile[ii][tx];", "dk",
                            KERNEL1_PLAN),
    "dK transposed wrong (register-tiled)": ("gemm_tile_8x8<64, 64, false, true>(ds + head * T * T, T, q",
                                             "gemm_tile_8x8<64, 64, false, false>(ds + head * T * T, T, q", "dk",
                                             DEFAULT_PLAN),
}


@pytest.fixture(scope="module")
def broken_backward(tmp_path_factory):
    from concurrent.futures import ThreadPoolExecutor

    from andrea_cli.backends.cpu_runtime.build import build, scan

    folder = tmp_path_factory.mktemp("broken_backward")
    paths = {}
    for bug, (old, new, _, _) in BROKEN_BACKWARD.items():
        assert REAL.count(old) == 1, f"the kernel file changed: update the '{bug}' mutation"
        paths[bug] = folder / f"{bug.replace(' ', '_')}.cu"
        paths[bug].write_text(REAL.replace(old, new))
    with ThreadPoolExecutor(2) as pool:  # the compiler runs in subprocesses: two at once
        list(pool.map(lambda p: build(scan(p), sanitize=False), paths.values()))
    return paths


@pytest.mark.slow  # four broken copies built before the first test: ~20 s of CPU
@pytest.mark.parametrize("bug", BROKEN_BACKWARD)
def test_verify_catches_a_broken_backward_kernel(cli, broken_backward, bug):
    _, _, stage, plan = BROKEN_BACKWARD[bug]
    if plan != DEFAULT_PLAN:  # verify's one case runs the default plan: the sweep's KERNEL1_PLAN case instead
        from andrea_cli.backends.cpu import CpuBackend
        from andrea_cli.masks import MaskSpec
        from andrea_cli.verification import Case, check_case

        case = Case(33, 40, 16, MaskSpec("causal"), True, plan)
        assert case in sweep(quick=True)
        result = check_case(CpuBackend(broken_backward[bug]), case, "forward", 0)
        assert not result.passed and not result.stages[stage].passed, result.to_json()
        return
    result = cli("verify", "--backend", "cpu", "--kernel", broken_backward[bug], "--T", 33, "--d-k", 16, "--d-v", 16,
                 "--json")
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert not doc["passed"] and all(not case["stages"][stage]["passed"] for case in doc["cases"])


def test_every_stage_a_family_checks_is_one_it_declares():
    # verify's table and the family registry rest on it: a family names every stage it adds
    from andrea_cli.backends.cpu import CpuBackend
    from andrea_cli.masks import MaskSpec
    from andrea_cli.verification import FAMILIES, STAGE_ORDER, Case, check_case

    result = check_case(CpuBackend(packaged_kernel_path()), Case(33, 16, 16, MaskSpec("window", 5), True), "forward", 0)
    assert result.passed, result.to_json()
    declared = {name for family in FAMILIES for name in family.stages}
    assert set(result.stages) <= declared and {"scores", "fused2", "dq", "fused2_dv"} <= set(result.stages)
    assert STAGE_ORDER[:8] == ("scores", "scale", "mask", "softmax", "av", "output", "fused1", "fused2")


def test_the_backward_shows_as_three_grouped_columns():
    from andrea_cli.verification import COLUMN_STAGES, STAGE_ORDER
    from andrea_cli.verification.backward import STAGES

    groups = ("bwd stages", "bwd", "fused bwd")
    assert set(groups) <= set(STAGE_ORDER)
    assert sorted(name for g in groups for name in COLUMN_STAGES[g]) == sorted(STAGES)  # every stage, once
