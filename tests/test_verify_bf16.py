"""`verify` on the tensor-core kernel: broken copies of attention_fused_kernel4 must fail it, each
on a case the sweep holds (one case per copy here, so the test stays fast)."""

import json

import pytest

from andrea_cli.kernel_file import packaged_kernel_path
from andrea_cli.masks import MaskSpec
from andrea_cli.verification.case import Case
from andrea_cli.verification.fused_bf16 import STAGE
from andrea_cli.verification.run import sweep

REAL = packaged_kernel_path().read_text()

# bug -> (text in the kernel file, its broken replacement, the case that exposes it: T, d, mask, scaled)
BROKEN = {
    # lanes 8-15 and 16-23 give each other's ldmatrix rows: K fragments land in the wrong lanes
    "two lanes' fragments swapped": (
        "ldmatrix<4, false>(kf, ks + (8 * nt + (lane / 16) * 8 + lane % 8) * S\n"
        "                                               + 16 * kk + (lane / 8 % 2) * 8);",
        "ldmatrix<4, false>(kf, ks + (8 * nt + (lane / 8 % 2) * 8 + lane % 8) * S\n"
        "                                               + 16 * kk + (lane / 16) * 8);",
        (200, 64, "window:100", True)),
    # the copy of tile n is read before it has landed (on a GPU: a race; here: NaN)
    "missing cp.async wait": ("            cp_async_wait<1>();\n", "\n", (65, 64, "causal", True)),
    # cvt.rn.bf16x2.f32 puts its FIRST operand in the upper half: the trap, in the emulated wrapper
    "bf16 pack order swapped": ("return ptx_emulated::cvt_rn_bf16x2_f32(hi, lo);",
                                "return ptx_emulated::cvt_rn_bf16x2_f32(lo, hi);", (64, 64, "window:64", True)),
    "rescale forgotten": ("                    acc[c][2 * r] *= alpha;\n                    acc[c][2 * r + 1] *= alpha;\n",
                          "", (200, 64, "window:100", True)),
    # the last tile's keys past T are left unmasked when T is one short of a tile edge
    "mask off by one at a tile edge": ("const bool edge = j0 + TC_KEYS > T ||", "const bool edge = j0 + TC_KEYS - 1 > T ||",
                                       (127, 64, "none", True)),
}


def test_the_sweep_holds_every_exposing_case():
    cases = sweep()
    for _, _, (T, d, mask, scaled) in BROKEN.values():
        kind, _, w = mask.partition(":")
        spec = MaskSpec(kind, int(w)) if w else MaskSpec(kind)
        assert Case(T, d, d, spec, scaled) in cases, (T, d, mask, scaled)
    assert Case(127, 128, 128, MaskSpec("none"), True) in sweep(quick=True)  # the tile edge, quick too


def no_scale(scaled: bool) -> tuple[str, ...]:
    return () if scaled else ("--no-scale",)


@pytest.mark.parametrize("bug", BROKEN)
def test_verify_catches_a_broken_tensor_core_kernel(cli, tmp_path, bug):
    old, new, (T, d, mask, scaled) = BROKEN[bug]
    assert REAL.count(old) == 1, f"the kernel file changed: update the '{bug}' mutation"
    broken = tmp_path / "broken.cu"
    broken.write_text(REAL.replace(old, new))
    result = cli("verify", "--backend", "cpu", "--T", T, "--d-k", d, "--mask", mask, *no_scale(scaled),
                 "--kernel", broken, "--json")
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    failed = [c for c in doc["cases"] if not c["passed"]]
    assert failed and all(not c["stages"][STAGE]["passed"] for c in failed if c["error"] is None), failed[0]
    # the FP32 kernels share none of this code: only the tensor-core stage fails
    assert all(s["passed"] for c in doc["cases"] for name, s in c["stages"].items() if name != STAGE)
