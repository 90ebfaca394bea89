"""verify's family registry (verification/families.py): every stage a family checks is one it
declares, and the backward's stages show as three grouped columns."""

from andrea_cli.kernel_file import packaged_kernel_path


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
