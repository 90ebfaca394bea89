"""The bf16 backward with every mask flavour, end to end: the forward that saves the logsumexp
(attention_fused_lse_kernel4, kernel4's body) takes the whole Mask, so `grad --precision bf16`
takes window:L,R, sinks and ALiBi; verify's bf16 backward family runs its flavour cases on the real
kernels in both schedules, and a broken copy of the lse entry point (ALiBi's heads dropped on the
way in) fails the forward's output and lse and the gradients made from them."""

import pytest

from andrea_cli.commands.verify import verify_backends
from andrea_cli.kernel_file import packaged_kernel_path
from andrea_cli.verification import run_verify
from andrea_cli.verification.backward_bf16 import STAGES, bf16_backward_cases, flavour_cases
from tests.verification.broken_copies import failed_stages, verify_broken_copy

REAL = packaged_kernel_path().read_text()
TWO_SIDED_ALIBI, SINKS, ALIBI_D128 = flavour_cases()


def test_the_full_family_holds_the_flavour_cases():
    cases = bf16_backward_cases(quick=False)
    assert {TWO_SIDED_ALIBI, SINKS, ALIBI_D128} <= set(cases)
    assert TWO_SIDED_ALIBI.mask.right and TWO_SIDED_ALIBI.mask.alibi and TWO_SIDED_ALIBI.S != TWO_SIDED_ALIBI.T
    assert SINKS.mask.sinks == 64 and ALIBI_D128.d_k == 128


def test_the_flavour_cases_pass_on_the_real_kernels():
    report = run_verify(verify_backends("cpu", packaged_kernel_path()), flavour_cases(), kernel_file="microgpt_cuda.cu")
    assert report.passed and len(report.results) == 6, [r.to_json() for r in report.results if not r.passed]
    for result in report.results:
        assert set(STAGES) == set(result.stages), result.case.label()


@pytest.mark.slow
def test_verify_catches_the_lse_forward_dropping_alibi(tmp_path, quick_builds):
    old = ("attention_fused_kernel4<64, true>(q, k, v, out, L, S, group, causal, window, offset, right, sinks, alibi,\n"
           "                                        tc_smem, lse);")
    report = verify_broken_copy(tmp_path, "lse forward drops ALiBi", old, old.replace("sinks, alibi,", "sinks, 0,"),
                                [TWO_SIDED_ALIBI])
    for result in report.results:
        failed = failed_stages(result)
        assert {"bf16_fwd", "bf16_lse"} <= failed, (result.schedule, sorted(failed))
