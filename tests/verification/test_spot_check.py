"""attend's check that a run is the equation (verification/spot_check.py): sampled rows of each
stage against float64 with verify's tolerances. The packaged kernel file never gets the line, on
either schedule of the CPU build; a copy with the scale factor doubled always does, naming the
scale stage and `andrea verify --kernel FILE`; --strict makes that exit 1. And verify, on such a
copy, prints a few "first differs" lines per stage and counts the rest."""

import numpy as np
import pytest

from andrea_cli.backends.cpu import CpuBackend
from andrea_cli.backends.launch.staged import KERNEL1_PLAN
from andrea_cli.inputs import QKV
from andrea_cli.kernel_file import packaged_kernel_path
from andrea_cli.masks import MaskSpec
from andrea_cli.runs.head import run_attention
from andrea_cli.verification.spot_check import spot_check

CPU = ("--backend", "cpu")
SCALE_LINE = "out[idx] = in[idx] * scale;"
# (T, d_k, d_v, mask, scaled): a row of one key, primes, a window, no scale, a factor given
CASES = [(1, 1, 1, MaskSpec("causal"), True), (37, 20, 12, MaskSpec("causal"), True),
         (50, 16, 16, MaskSpec("window", 7), True), (29, 8, 8, MaskSpec("none"), False),
         (64, 32, 32, MaskSpec("causal"), 0.3)]


def qkv(T, d_k, d_v, seed=0, H=2):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((H, T, d)).astype(np.float32) for d in (d_k, d_k, d_v))
    return QKV(q, k, v, "test")  # (H, T, d): H heads in one launch


@pytest.fixture(scope="module")
def doubled(tmp_path_factory):
    """The kernel file with scale_kernel1's factor doubled: every scaled score twice the course's."""
    real = packaged_kernel_path().read_text()
    assert real.count(SCALE_LINE) == 1, "scale_kernel1 changed: update this copy"
    path = tmp_path_factory.mktemp("doubled") / "doubled.cu"
    path.write_text(real.replace(SCALE_LINE, "out[idx] = in[idx] * (2.0f * scale);"))
    return path


@pytest.mark.parametrize("T, d_k, d_v, mask, scaled", CASES)
@pytest.mark.parametrize("plan", ["fast", "textbook"])
def test_the_packaged_file_is_the_equation_on_both_schedules(cpu_each_schedule, T, d_k, d_v, mask, scaled, plan):
    x = qkv(T, d_k, d_v)
    backend = cpu_each_schedule
    saved = backend.plan
    backend.plan = KERNEL1_PLAN if plan == "textbook" else saved
    try:
        report = run_attention(x, backend, mask, scaled, check=spot_check)
    finally:
        backend.plan = saved
    assert report.check.agrees, report.check.to_json()
    assert report.to_json()["check"]["agrees"] is True


def test_the_check_catches_a_planted_error_and_names_its_stage(cpu_backend):
    """Without a broken build: the run's own softmax output nudged past its tolerance."""
    x = qkv(33, 16, 16)
    out = cpu_backend().attention(x.q, x.k, x.v, mask=MaskSpec("causal"), scaled=True)
    assert spot_check(x.q, x.k, x.v, out, MaskSpec("causal"), True).agrees
    out.weights[1, -1, 3] += 1e-3  # the last row is always sampled
    verdict = spot_check(x.q, x.k, x.v, out, MaskSpec("causal"), True)
    assert verdict.first_differs == "softmax" and verdict.where["head"] == 1 and verdict.where["row"] == 32


def test_the_cli_says_nothing_for_the_packaged_file_and_strict_passes(cli, run_main):
    doc = cli.json("attend", "--T", 40, "--d-k", 8, "--strict", *CPU)
    assert doc["check"]["agrees"] is True and doc["check"]["first_differs"] is None
    assert len(doc["check"]["checked_rows"]) == 16
    code, out, _ = run_main("attend", "--T", 40, "--d-k", 8, "--strict", *CPU)
    assert code == 0 and "not the equation" not in out
    assert cli.json("attend", "--T", 8, "--d-k", 4, "--backend", "numpy")["check"] is None  # the reference itself


@pytest.mark.slow  # a CPU build of the doubled copy: ~10 s
@pytest.mark.parametrize("schedule", ["forward", "reverse"])
def test_a_doubled_scale_is_not_the_equation_on_both_schedules(doubled, schedule):
    backend = CpuBackend(doubled, schedule=schedule)
    for T, d_k, d_v, mask, scaled in CASES:
        report = run_attention(qkv(T, d_k, d_v), backend, mask, scaled, check=spot_check)
        if scaled is False:  # --no-scale launches no scale stage: the doubled factor never runs
            assert report.check.agrees
            continue
        assert report.check.first_differs == "scale", (T, d_k, mask, report.check.to_json())


@pytest.mark.slow
def test_a_doubled_scale_gets_one_line_exit_0_and_1_with_strict(doubled, cli, run_main):
    doc = cli.json("attend", "--T", 64, "--d-k", 16, "--kernel", doubled, *CPU)
    assert doc["check"]["agrees"] is False and doc["check"]["first_differs"] == "scale"
    code, out, _ = run_main("attend", "--T", 64, "--d-k", 16, "--kernel", doubled, *CPU)
    lines = [line for line in out.splitlines() if "not the equation" in line]
    assert code == 0 and len(lines) == 1 and lines[0].startswith("not the equation: scale differs")
    assert f"andrea verify --kernel {doubled}" in out.replace("\n", "")
    code, _, _ = run_main("attend", "--T", 64, "--d-k", 16, "--kernel", doubled, "--strict", *CPU)
    assert code == 1


@pytest.mark.slow
def test_verify_on_the_doubled_copy_shows_a_few_lines_per_stage_and_counts_the_rest(doubled, run_main):
    code, out, _ = run_main("verify", "--quick", "--kernel", doubled, *CPU)
    assert code == 1
    text = " ".join(out.split())  # the case labels wrap
    for stage in ("scale", "output"):  # one bug, failing in dozens of cases
        assert text.count(f"]: {stage} first differs at") == 3
        more = [line for line in out.splitlines() if line.startswith(f"{stage} differs in ")]
        assert len(more) == 1 and int(more[0].split()[3]) > 10, more


def test_the_layer_checks_every_head(cli):
    doc = cli.json("attend", "--d-model", 32, "--n-head", 4, "--T", 20, *CPU)
    assert doc["check"]["agrees"] is True and doc["kernels"]["softmax"] == "softmax_kernel3"


FUSED_SCALE_LINE = "        s *= scale;\n"  # attention_fused1 and attention_fused2, one each


@pytest.mark.parametrize("T, d_k, d_v, mask, scaled", CASES)
def test_a_fused_run_of_the_packaged_file_is_the_equation_on_both_schedules(cpu_each_schedule, T, d_k, d_v, mask,
                                                                            scaled):
    from andrea_cli.runs.fused import run_fused_attention
    from andrea_cli.verification.spot_check import fused_spot_check

    report = run_fused_attention(qkv(T, d_k, d_v), cpu_each_schedule, mask, scaled, check=fused_spot_check)
    assert report.check is not None and report.check.agrees, report.check


@pytest.mark.slow  # a CPU build of the copy (at -O0)
def test_a_fused_run_with_its_scale_doubled_says_it_is_not_the_equation(cli, tmp_path, quick_builds):
    real = packaged_kernel_path().read_text()
    assert real.count(FUSED_SCALE_LINE) == 2, "the fused kernels changed: update this copy"
    broken = tmp_path / "doubled.cu"
    broken.write_text(real.replace(FUSED_SCALE_LINE, "        s *= 2.0f * scale;\n"))
    for d_k in (15, 16):  # kernel1 (any width), kernel2 (widths divisible by 4)
        doc = cli.json("attend", "--fused", "--T", 100, "--d-k", d_k, *CPU, "--kernel", broken)
        assert doc["check"]["first_differs"] == "fused", doc["check"]
        result = cli("attend", "--fused", "--T", 100, "--d-k", d_k, *CPU, "--kernel", broken, "--strict")
        assert result.exit_code == 1 and "not the equation: fused differs" in " ".join(result.output.split())
