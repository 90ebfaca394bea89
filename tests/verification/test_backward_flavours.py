"""The backward takes every mask flavour (window:L,R, sinks:N,window:W, ALiBi): verify's flavour
cases (verification/mask_flavours.py) run the fp32 backward families, pass on the real kernels in
both thread schedules, and catch broken copies of the backward's new terms: ALiBi's bias left out
of a recomputed P (dK/dV's, dQ's), the rows that see a sink left out of a key block's query range,
the right-hand reach left out of it (the staged dV/dK and the fused dK/dV walk that range)."""

import pytest

from andrea_cli.commands.verify import verify_backends
from andrea_cli.kernel_file import packaged_kernel_path
from andrea_cli.verification import run_verify, sweep
from andrea_cli.verification.mask_flavours import flavour_cases
from tests.verification.broken_copies import failed_stages, verify_broken_copy

REAL = packaged_kernel_path().read_text()
TWO_SIDED, SINKS, ALIBI = flavour_cases(quick=True)
# sinks:65,window:16 at T = 130: the staged kernel2's first 64-key block holds sinks the rows
# from 79 on still see (at T = 70 every row lies within that block's window reach)
SINKS_64 = next(c for c in flavour_cases(quick=False) if str(c.mask) == "sinks:65,window:16")
FUSED_DKDV = {"fused1_dk", "fused1_dv", "fused2_dk", "fused2_dv"}

# bug -> (the line as the kernel file has it, the broken line, the case, stages that must fail)
BROKEN = {
    "ALiBi's bias left out of dkdv_kernel1's P": (
        "s = s * scale + (mask.alibi > 0 ? Mask::bias_at(slope_h, i + mask.offset - j) : 0.0f);",
        "s = s * scale;", ALIBI, FUSED_DKDV),
    "ALiBi's bias left out of dq_kernel1's P": (
        "s = s * scale + (mask.alibi > 0 ? Mask::bias_at(mask.slope(head), i + mask.offset - j) : 0.0f);",
        "s = s * scale;", ALIBI, {"fused1_dq", "fused2_dq"}),
    # a key block holding sinks keeps the window's far end: the rows far below miss their sinks
    "the rows that see a sink left out of a key block's query range": (
        "const bool far_end = window > 0 && j0 >= sinks;", "const bool far_end = window > 0;", SINKS, FUSED_DKDV),
    "the rows that see a sink left out of a staged key block's query range": (
        "const bool far_end = window > 0 && j0 >= sinks;", "const bool far_end = window > 0;",
        SINKS_64, {"dv", "dk", "backward_dk", "backward_dv"} | FUSED_DKDV),
    # the rows whose right reach takes in the block's first keys, before its diagonal, missed
    "the right reach left out of a key block's query range": (
        "(offset + right == 0 ? j0 : max(0, j0 - offset - right))", "(offset + right == 0 ? j0 : max(0, j0 - offset))",
        TWO_SIDED, {"dv", "dk"} | FUSED_DKDV),
}


def test_the_flavour_cases_run_the_backward():
    backward = [c for c in sweep(quick=False) if c.mask.flavours and "backward" in (c.families or ())]
    assert {TWO_SIDED, SINKS, ALIBI} <= set(backward)
    assert any(c.S != c.T for c in backward) and any(c.H_kv < c.heads for c in backward)
    assert any(c.T > c.S and c.mask.right for c in backward)  # rows before L - S see keys up to p + R
    assert {str(c.mask) for c in backward} >= {"window:4,33", "sinks:33,window:20", "alibi", "alibi,window:33"}


def test_the_backward_flavour_cases_pass_on_the_real_kernels():
    report = run_verify(verify_backends("cpu", packaged_kernel_path()), [TWO_SIDED, SINKS, ALIBI],
                        kernel_file="microgpt_cuda.cu")
    assert report.passed and len(report.results) == 6, [r.to_json() for r in report.results if not r.passed]
    for result in report.results:
        assert {"dv", "dk", "backward_dq", "fused1_dq", "fused2_dk"} <= set(result.stages), result.case.label()


# ALiBi's in the default tier (the brief's example); the rest a broken build each, the slow one
DEFAULT_TIER = ("ALiBi's bias left out of dkdv_kernel1's P",)


@pytest.mark.parametrize("bug", [bug if bug in DEFAULT_TIER else pytest.param(bug, marks=pytest.mark.slow)
                                 for bug in BROKEN])
def test_verify_catches_a_broken_backward_flavour(tmp_path, bug, quick_builds):
    old, new, case, failing = BROKEN[bug]
    report = verify_broken_copy(tmp_path, bug, old, new, [case])
    for result in report.results:
        failed = failed_stages(result)
        assert failing <= failed, (result.schedule, sorted(failed))
