"""verify's mask-flavour cases (verification/mask_flavours.py: window:L,R, sinks:N,window:W,
ALiBi) and the mask arrays in the fused fp32 kernels pass on the real kernels in both thread
schedules, and catch broken copies of the kernel file: ALiBi's bias applied twice, the sinks
off by one (in the pair test, and in decode's count), the right-hand window ignored (in the
pair test, and in the key tiles a block visits), the tiles of sinks skipped as hidden, a mask
array ignored by the fused kernels or read from head 0 for every head, and kernel3's bias tile
read a row off, stored unswizzled, added twice, or loaded from head 0 for every head."""

import pytest

from andrea_cli.commands.verify import verify_backends
from andrea_cli.kernel_file import packaged_kernel_path
from andrea_cli.masks import parse_mask
from andrea_cli.verification import run_verify, sweep
from andrea_cli.verification.mask_arrays import array_cases
from andrea_cli.verification.mask_flavours import flavour_cases
from tests.verification.broken_copies import failed_stages, verify_broken_copy

REAL = packaged_kernel_path().read_text()
TWO_SIDED, SINKS, ALIBI = flavour_cases(quick=True)
ARRAY_PER_HEAD = next(c for c in array_cases(quick=True) if c.mask.name == "alibi-causal")  # (H, L, S)
ARRAY_KERNEL3 = next(c for c in array_cases(quick=True) if c.d_k == c.d_v == 64 and c.T == 70)
ARRAY_KERNEL3_D128 = next(c for c in array_cases(quick=True) if c.d_k == 128)  # (H, L, S), L != S, grouped
FUSED = {"fused1", "fused2", "fused3"}

# bug -> (the line as the kernel file has it, the broken line, the cases, stages that must fail)
BROKEN = {
    "ALiBi's bias applied twice": (
        "return -slope_h * (float)d; }", "return -2.0f * slope_h * (float)d; }",
        [ALIBI], {"mask", "output", "decode1"} | FUSED),
    "sinks off by one in the pair test": (
        "(window <= 0 || d < window || j < sinks)", "(window <= 0 || d < window || j <= sinks)",
        [SINKS], {"mask", "output"} | FUSED),
    "decode counts one sink too many": (
        "const int n_sinks = min(max(sinks, 0), first);", "const int n_sinks = min(max(sinks, 0) + 1, first);",
        [SINKS], {"decode1", "decode1_gqa"}),
    "the tiles of sinks skipped as hidden": (
        "|| j_last > p_first - window || j_first < sinks);", "|| j_last > p_first - window);",
        [SINKS], {"fused1", "fused2"}),
    "the right window ignored by the pair test": (
        "(!causal || d + right >= 0)", "(!causal || d >= 0)", [TWO_SIDED], {"mask", "output"} | FUSED),
    "the right window's keys left out of the key tiles": (
        "min(S, last_row + offset + right + 1)) : S;", "min(S, last_row + offset + 1)) : S;",
        [TWO_SIDED], {"output"} | FUSED),
    "the fused kernels ignore a mask array": (
        "if (bias_row != nullptr && inside) add += bias_row[j];", "",
        [ARRAY_KERNEL3], {"fused1", "fused2"}),
    "every head reads head 0's mask array": (
        "((bias_heads == 1 ? 0 : head) * L + i)", "((0) * L + i)", [ARRAY_PER_HEAD], {"fused1", "fused2"}),
    "kernel3 reads its bias tile a row off": (
        "b_s[fused3_bias_at(8 * rg + r, cg + 16 * n)]", "b_s[fused3_bias_at(8 * rg + (r + 1) % 8, cg + 16 * n)]",
        [ARRAY_KERNEL3_D128], {"fused3"}),
    "kernel3 stores its bias tile unswizzled": (
        "b_s[fused3_bias_at(rr, jj)] =", "b_s[rr * FUSED3_KEYS + jj] =", [ARRAY_KERNEL3], {"fused3"}),
    "kernel3 adds the bias twice": (
        "b[(long)rr * S + jj] * LOG2E", "b[(long)rr * S + jj] * 2.0f * LOG2E", [ARRAY_KERNEL3_D128], {"fused3"}),
    "kernel3 loads head 0's bias tile for every head": (
        "((bias_heads == 1 ? 0 : head) * L + row0)", "((0) * L + row0)", [ARRAY_KERNEL3_D128], {"fused3"}),
}


def test_the_sweep_holds_every_flavour_at_its_tile_edges():
    masks = {str(c.mask) for c in sweep(quick=True)}
    assert {"window:4,33", "sinks:33,window:20", "alibi"} <= masks
    assert ALIBI.heads == 3  # no power of two: the paper's second rule for the slopes
    full = {str(c.mask) for c in sweep(quick=False)}
    assert {"window:63,64", "sinks:65,window:16", "alibi,window:33"} <= full
    assert parse_mask("window:4,33") == TWO_SIDED.mask and parse_mask("sinks:33,window:20") == SINKS.mask


def test_the_flavour_cases_pass_on_the_real_kernels():
    cases = [TWO_SIDED, SINKS, ALIBI, ARRAY_KERNEL3, ARRAY_KERNEL3_D128]
    report = run_verify(verify_backends("cpu", packaged_kernel_path()), cases, kernel_file="microgpt_cuda.cu")
    assert report.passed and len(report.results) == 2 * len(cases), [r.to_json() for r in report.results if not r.passed]
    for result in report.results:
        assert FUSED <= set(result.stages), result.case.label()  # d 64 or 128: kernel3 too, arrays included
        if "decode" in result.case.families:  # sinks and ALiBi; not a right-hand window
            assert "decode1" in result.stages


# one in the default tier; the rest, a group of broken builds of several seconds each, in the slow one
DEFAULT_TIER = ("ALiBi's bias applied twice",)


@pytest.mark.parametrize("bug", [bug if bug in DEFAULT_TIER else pytest.param(bug, marks=pytest.mark.slow)
                                 for bug in BROKEN])
def test_verify_catches_a_broken_mask(tmp_path, bug, quick_builds):
    old, new, cases, failing = BROKEN[bug]
    report = verify_broken_copy(tmp_path, bug, old, new, cases)
    for result in report.results:
        failed = failed_stages(result)
        assert failing <= failed, (result.schedule, sorted(failed))
