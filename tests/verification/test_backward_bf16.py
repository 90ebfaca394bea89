"""`verify` on the bf16 backward: broken copies of attention_backward_dkdv_kernel2 / dq_kernel2
must fail it, each on a case the sweep holds (one case per copy here, so the test stays fast),
and only in the bf16 backward's stages."""

import json

import pytest

from andrea_cli.kernel_file import packaged_kernel_path
from andrea_cli.masks import MaskSpec
from andrea_cli.verification.backward_bf16 import STAGES
from andrea_cli.verification.case import Case
from andrea_cli.verification.run import sweep

REAL = packaged_kernel_path().read_text()

# dK as if dS^T were not rounded to bf16: its rounding error added back by a second product (a
# bf16 "lo" part), so dS reaches the tensor cores with 16 significant bits instead of 8
DS_UNROUNDED = """            {
                float lo[QT / 8][4];
                for (int nt = 0; nt < QT / 8; ++nt)
                    for (int e = 0; e < 4; ++e)
                        lo[nt][e] = ds[nt][e] - __uint_as_float(pack_bf16x2(ds[nt][e], 0.0f) << 16);
                tc_warp_xb<QT, D, SP>(dk_acc, lo, qs);
                tc_warp_xb<QT, D, SP>(dk_acc, ds, qs);
            }
"""

# bug -> (text in the kernel file, its broken replacement, the case that exposes it: T, d, mask, scaled)
BROKEN = {
    "rowsum term dropped (dkdv)": ("ds[nt][e] = pe * (ds[nt][e] - dl[x]);", "ds[nt][e] = pe * ds[nt][e];",
                                   (65, 64, "causal", True)),
    "rowsum term dropped (dq)": ("ds[nt][e] = pe * (ds[nt][e] - dl[e / 2]);", "ds[nt][e] = pe * ds[nt][e];",
                                 (130, 64, "none", True)),
    # the tiles the causal mask cuts taken as wholly visible by dkdv (it asks the Mask no more
    # whether one hides a pair): keys past their queries count
    "a causal tile taken as visible (dkdv)": (
        "const bool edge = mask.hides_some(i0, i0 + QT - 1, w_key0, w_key0 + 15, i0 + QT > L || w_key0 + 16 > S);",
        "const bool edge = i0 + QT > L || w_key0 + 16 > S;", (65, 64, "causal", True)),
    # the same in dq: its first key tile of a narrow window counts keys the window hides
    "a window tile taken as visible (dq)": (
        "const bool edge = mask.hides_some(w_row0, w_last, j0, j0 + TC_KEYS - 1, w_row0 + 16 > L || j0 + TC_KEYS > S);",
        "const bool edge = w_row0 + 16 > L || j0 + TC_KEYS > S;", (200, 64, "window:16", True)),
    "dS not rounded (dkdv)": ("            tc_warp_xb<QT, D, SP>(dk_acc, ds, qs);  "
                              "// dK += bf16(dS^T)·Q (Q scaled by scale·log2 e)\n", DS_UNROUNDED,
                              (97, 128, "causal", True)),
    "dK and dV accumulators swapped": ("tc_warp_xb<QT, D, SP>(dv_acc, p, os);", "tc_warp_xb<QT, D, SP>(dk_acc, p, os);",
                                       (63, 128, "none", False)),
    # lanes 8-15 and 16-23 give each other's ldmatrix.trans rows: B fragments in the wrong lanes
    "two lanes' fragments swapped (x·B)": (
        "ldmatrix<4, true>(bf, b + (16 * kk + (lane / 8 % 2) * 8 + lane % 8) * S + 8 * c + (lane / 16) * 8);",
        "ldmatrix<4, true>(bf, b + (16 * kk + (lane / 16) * 8 + lane % 8) * S + 8 * c + (lane / 8 % 2) * 8);",
        (129, 128, "window:65", True)),
}


def case_of(T, d, mask, scaled) -> Case:
    kind, _, w = mask.partition(":")
    spec = MaskSpec(kind, int(w)) if w else MaskSpec(kind)
    return Case(T, d, d, spec, scaled)


def test_the_sweep_holds_every_exposing_case():
    cases = sweep()
    for _, _, exposing in BROKEN.values():
        assert case_of(*exposing) in cases, exposing


def no_scale(scaled: bool) -> tuple[str, ...]:
    return () if scaled else ("--no-scale",)


# the first in the default tier, the rest in the slow one (a CPU build of the kernel file each)
@pytest.mark.parametrize("bug", [bug if n == 0 else pytest.param(bug, marks=pytest.mark.slow)
                                 for n, bug in enumerate(BROKEN)])
def test_verify_catches_a_broken_bf16_backward(cli, tmp_path, bug, quick_builds):
    old, new, (T, d, mask, scaled) = BROKEN[bug]
    assert REAL.count(old) == 1, f"the kernel file changed: update the '{bug}' mutation"
    broken = tmp_path / "broken.cu"
    broken.write_text(REAL.replace(old, new))
    result = cli("verify", "--backend", "cpu", "--T", T, "--d-k", d, "--mask", mask, *no_scale(scaled),
                 "--kernel", broken, "--json")
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    failed = [c for c in doc["cases"] if not c["passed"]]
    assert failed and all(c["error"] is None for c in failed), failed[0]
    assert all(any(not c["stages"][s]["passed"] for s in STAGES[2:]) for c in failed), failed[0]
    # no other kernel shares this code: every other stage passes, the bf16 forward included
    assert all(s["passed"] for c in doc["cases"] for name, s in c["stages"].items() if name not in STAGES[2:])
