"""`verify` on the decode kernels: broken copies must fail it on a case the sweep holds (the quick
sweep too): a merge that drops a slice, a step that misses its own key (the newest, the diagonal),
a head mapping that ignores the K/V groups."""

import json

import pytest

from andrea_cli.kernel_file import packaged_kernel_path
from andrea_cli.masks import MaskSpec
from andrea_cli.verification.case import Case
from andrea_cli.verification.decode import GQA, STAGES, checked_rows
from andrea_cli.verification.run import sweep

REAL = packaged_kernel_path().read_text()
EXPOSING = Case(129, 64, 64, MaskSpec("causal"), True, families=("decode",))  # row 128: two slices

# bug -> (text in the kernel file, its broken replacement, the stages that must fail)
BROKEN = {
    "the merge drops the last slice": ("for (int s = 0; s < splits; ++s) o += expf(",
                                       "for (int s = 0; s < splits - 1; ++s) o += expf(", STAGES),
    "a step misses its own key": ("const int n_stop = min(seen.count, n_first + keys_per_split);",
                                  "const int n_stop = min(seen.count - 1, n_first + keys_per_split);", STAGES),
    # every query head reads its own index as K/V head: past the end of a cache of fewer K/V heads
    "the K/V head mapping ignores the groups": ("const long kv = h / group;", "const long kv = h;", (GQA,)),
}


def test_the_sweep_holds_the_exposing_case_and_it_reaches_two_slices():
    assert EXPOSING in sweep(quick=True) and EXPOSING in sweep()
    from andrea_cli.backends.launch.decode import slices

    assert slices(max(checked_rows(EXPOSING.T)) + 1, 2)[0] == 2


@pytest.mark.slow  # a CPU build per broken copy
@pytest.mark.parametrize("bug", BROKEN)
def test_verify_catches_a_broken_decode_kernel(cli, tmp_path, quick_builds, bug):
    old, new, stages = BROKEN[bug]
    assert REAL.count(old) == 1, f"the kernel file changed: update the mutation of {old!r}"
    broken = tmp_path / "broken.cu"
    broken.write_text(REAL.replace(old, new))
    result = cli("verify", "--backend", "cpu", "--T", EXPOSING.T, "--d-k", EXPOSING.d_k, "--mask", "causal",
                 "--kernel", broken, "--json")
    assert result.exit_code == 1, result.output
    for case in json.loads(result.stdout)["cases"]:
        failed = {name for name, s in case["stages"].items() if not s["passed"]}
        assert set(stages) <= failed or (case["error"] or "").startswith(stages[0]), case
        # the other families share none of this code
        assert not failed - set(STAGES), failed
