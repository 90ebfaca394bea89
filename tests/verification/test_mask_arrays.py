"""verify's mask-array cases (verification/mask_arrays.py) pass on the real staged kernels, in
both thread schedules, and catch broken copies of mask_kernel2: a bias applied twice, every head
reading head 0's bias."""

import numpy as np
import pytest

from andrea_cli.commands.verify import verify_backends
from andrea_cli.kernel_file import packaged_kernel_path
from andrea_cli.verification import run_verify, sweep
from andrea_cli.verification.mask_arrays import alibi, array_cases, random_bool

REAL = packaged_kernel_path().read_text()
ALIBI = next(c for c in array_cases(quick=True) if c.mask.name == "alibi-causal")

BROKEN = {
    "bias applied twice": ("in[head * L * S + cell] + bias[", "in[head * L * S + cell] + 2.0f * bias["),
    "every head reads head 0's bias": ("bias[(bias_heads == 1 ? 0 : head) * L * S + cell]", "bias[cell]"),
}


def test_the_sweep_holds_mask_arrays_of_each_kind():
    names = {c.mask.name for c in sweep(quick=True) if c.mask.is_array}
    assert {"bool3", "alibi-causal", "bias"} <= names
    assert ALIBI.mask.bias.shape == (2, 40, 40)  # a bias per head


def test_the_array_cases_pass_on_the_real_kernels():
    cases = array_cases(quick=True)
    report = run_verify(verify_backends("cpu", packaged_kernel_path()), cases, kernel_file="microgpt_cuda.cu")
    assert report.passed and len(report.results) == 2 * len(cases), [r.to_json() for r in report.results if not r.passed]
    for result in report.results:
        assert "mask" in result.stages and result.invariants["future_exactly_zero"]


@pytest.mark.parametrize("bug", [bug if bug == "bias applied twice" else pytest.param(bug, marks=pytest.mark.slow)
                                 for bug in BROKEN])  # one broken build in the default tier, the other slow
def test_verify_catches_a_broken_mask_kernel2(tmp_path, bug, quick_builds):
    old, new = BROKEN[bug]
    assert old in REAL, f"the kernel file changed: update the '{bug}' mutation"
    broken = tmp_path / "broken.cu"
    broken.write_text(REAL.replace(old, new))
    report = run_verify(verify_backends("cpu", broken), [ALIBI], kernel_file=str(broken))
    assert not report.passed and len(report.results) == 2
    for result in report.results:
        assert not result.stages["mask"].passed and not result.stages["output"].passed


def test_rows_that_see_no_key_are_zeros_in_every_softmax(cpu_backend):
    from andrea_cli.backends.launch.staged import ALL_PLANS

    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 20, 8), dtype=np.float32) for _ in range(3))
    spec = random_bool(20, 20, 0.5, 4, seed=1)
    for plan in ALL_PLANS:
        out = cpu_backend().attention(q, k, v, mask=spec, scaled=True, plan=plan)
        assert (out.weights[0, :4] == 0).all() and (out.output[0, :4] == 0).all(), plan.describe()
        assert not np.isnan(out.output).any()


def test_alibi_bias_is_the_slope_times_the_distance():
    spec = alibi(2, 3, 5, causal=True)
    # query 0 sits at key position 2 (the last 3 of 5): distance 2, 1, 0, then the future
    assert spec.bias[0, 0].tolist() == [-0.125, -0.0625, 0.0, -np.inf, -np.inf]  # slope 2^-4: head 0 of 2
