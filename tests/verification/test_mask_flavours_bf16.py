"""verify's mask-flavour cases on the tensor-core kernels 4-7 (verification/mask_flavours.py,
bf16_flavour_cases: window:L,R, sinks:N,window:W, ALiBi) pass on the real kernels in both thread
schedules, and catch a broken copy of each new term, in the broken kernel's stage: ALiBi's slope
of the wrong head (kernel6, kernel7), sinks off by one (kernel5's written-out pair test), the
right bound ignored (kernel5), ALiBi left out of the tiles no mask edge crosses (kernel4; 5-7's
tile schedule), and kernel5's flavoured copy re-reading Q's first k16 step for every step."""

import pytest

from andrea_cli.commands.verify import verify_backends
from andrea_cli.kernel_file import packaged_kernel_path
from andrea_cli.verification import run_verify
from andrea_cli.verification.fused_bf16 import STAGES
from andrea_cli.verification.mask_flavours import bf16_flavour_cases
from tests.verification.broken_copies import failed_stages, verify_broken_copy

REAL = packaged_kernel_path().read_text()
TWO_SIDED, SINKS, ALIBI = bf16_flavour_cases(quick=True)
K6_SLOPE = "const float slope_h = mask.slope(head) * TC_LOG2E;  // once a block: its exp2 not in the tile loop"
K7_SLOPE = "wgmma_mask_tile(mask, sc, w_row0 + mask.offset + g - js - 2 * t, js + 2 * t, Sk - js - 2 * t,\n" \
           "                            mask.slope(head) * TC_LOG2E);"

# bug -> (the text as the kernel file has it, the broken text, the case, the kernels that must fail)
BROKEN = {
    "kernel6: ALiBi's slope of the next head": (K6_SLOPE, K6_SLOPE.replace("slope(head)", "slope(head + 1)"),
                                                ALIBI, (6,)),
    "kernel7: ALiBi's slope of the next head": (K7_SLOPE, K7_SLOPE.replace("slope(head)", "slope(head + 1)"),
                                                ALIBI, (7,)),
    "kernel5: sinks off by one": ("8 * nt + e % 2 < sinks_left);", "8 * nt + e % 2 <= sinks_left);", SINKS, (5,)),
    "kernel5: the right bound ignored": ("(!mask.causal || diff + mask.right >= 0)", "(!mask.causal || diff >= 0)",
                                         TWO_SIDED, (5,)),
    "kernel4: ALiBi only on the mask's edge tiles": ("if (edge || every_tile) {  // -inf", "if (edge) {  // -inf",
                                                     ALIBI, (4,)),
    "kernel5-7: ALiBi only on the mask's edge tiles": (
        "mask.alibi > 0 ? EdgeTiles{kt.n_tiles, kt.n_tiles} : mask.edge_tiles", "mask.edge_tiles", ALIBI, (5, 6, 7)),
    "kernel5, flavoured, d 128: Q's first k16 step for every step": (
        "ldmatrix<4, false>(qf[mt][0], q_s + q_ld + 16 * mt * S + 16 * kk);",
        "ldmatrix<4, false>(qf[mt][0], q_s + q_ld + 16 * mt * S);", ALIBI, (5,)),
}


def test_the_bf16_flavour_cases_pass_on_the_real_kernels():
    cases = [TWO_SIDED, SINKS, ALIBI]
    report = run_verify(verify_backends("cpu", packaged_kernel_path()), cases, kernel_file="microgpt_cuda.cu")
    assert report.passed and len(report.results) == 2 * len(cases), [r.to_json() for r in report.results if not r.passed]
    for result in report.results:  # the CPU build runs every one of them, kernel6 and 7 included
        assert set(STAGES.values()) == set(result.stages), result.case.label()
    assert ALIBI.heads == 3 and ALIBI.d_k == 128  # no power of two; kernel5's flavoured copy at d 128


# one in the default tier; the rest, a group of broken builds of several seconds each, in the slow one
DEFAULT_TIER = ("kernel6: ALiBi's slope of the next head",)


@pytest.mark.parametrize("bug", [bug if bug in DEFAULT_TIER else pytest.param(bug, marks=pytest.mark.slow)
                                 for bug in BROKEN])
def test_verify_catches_a_broken_bf16_flavour(tmp_path, bug, quick_builds):
    old, new, case, variants = BROKEN[bug]
    report = verify_broken_copy(tmp_path, bug, old, new, [case])
    broken_stages = {STAGES[v] for v in variants}
    for result in report.results:
        failed = failed_stages(result)
        assert failed == broken_stages, (result.schedule, sorted(failed))  # the others share none of it
