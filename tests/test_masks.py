"""masks.py: a window's shape, the rows a mask shows are rows of the whole matrix, and a bad
--mask is the user's error."""

import numpy as np
import pytest

from andrea_cli.masks import MaskSpec, parse_mask

MASKS = [MaskSpec("causal"), MaskSpec("none"), MaskSpec("window", 2)]


def test_window_mask_shape():
    visible = MaskSpec("window", 3).visible(5)
    assert visible.tolist()[4] == [False, False, True, True, True]
    assert visible.tolist()[0] == [True, False, False, False, False]


@pytest.mark.parametrize("text", ["window:0", "window:x", "window:", "sometimes", "window:-2"])
def test_bad_masks_are_user_errors(text):
    from andrea_cli.errors import AndreaError

    with pytest.raises(AndreaError):
        parse_mask(text)


@pytest.mark.parametrize("mask", MASKS, ids=str)
def test_visible_rows_are_rows_of_the_whole_matrix(mask):
    rows = np.array([0, 3, 6, 12])
    np.testing.assert_array_equal(mask.visible(13, rows), mask.visible(13)[rows])


@pytest.mark.parametrize("text", ["window:4,33", "sinks:4,window:64", "alibi", "alibi,window:8",
                                  "alibi,sinks:2,window:16", "window:0,3"])
def test_the_flavours_read_back_as_written(text):
    assert str(parse_mask(text)) == text and parse_mask(str(parse_mask(text))) == parse_mask(text)


def test_a_two_sided_window_and_sinks_show_the_keys_their_rules_name():
    two_sided = parse_mask("window:1,2").visible(6)  # p-1 .. p+2
    assert two_sided[2].tolist() == [False, True, True, True, True, False]
    sinks = parse_mask("sinks:2,window:2").visible(6)  # keys 0, 1 and p-1, p, never past p
    assert sinks[5].tolist() == [True, True, False, False, True, True]
    assert sinks[0].tolist() == [True, False, False, False, False, False]
    assert parse_mask("window:3,0") == parse_mask("window:4")  # W keys wide: its own and W - 1 before


def test_alibi_slopes_follow_the_paper():
    from andrea_cli.masks import alibi_slopes

    assert alibi_slopes(8).tolist() == [2.0 ** -(h + 1) for h in range(8)]
    # 6 heads: the 4 slopes of 4 heads, then slopes 0 and 2 of 8 heads (get_slopes)
    assert alibi_slopes(6).tolist() == [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8, 2 ** -1, 2 ** -3]
    bias = parse_mask("alibi").score_bias(2, 3, S=5)  # the 3 queries last of 5 keys: p = i + 2
    assert bias[0, 0].tolist() == [-0.125, -0.0625, 0.0, 0.0625, 0.125]  # slope 2^-4; future hidden apart


@pytest.mark.parametrize("text", ["alibi,window:4,2", "sinks:3", "alibi,none", "causal,window:4", "window:4,x"])
def test_flavours_that_mean_nothing_are_user_errors(text):
    from andrea_cli.errors import AndreaError

    with pytest.raises(AndreaError):
        parse_mask(text)


@pytest.mark.parametrize("text", ["window:2,3", "sinks:2,window:3", "alibi", "alibi,window:4"])
def test_the_reference_agrees_with_its_loops(text):
    from andrea_cli import reference

    rng = np.random.default_rng(1)
    q = rng.standard_normal((3, 7, 4)).astype(np.float32)
    k, v = (rng.standard_normal((3, 9, 4)).astype(np.float32) for _ in range(2))
    spec = parse_mask(text)
    np.testing.assert_allclose(reference.attention(q, k, v, spec), reference.attention_loops(q, k, v, spec),
                               atol=1e-12)


def test_the_kernels_that_take_only_the_bounds_refuse_a_flavour_in_one_line():
    from andrea_cli.errors import AndreaError

    with pytest.raises(AndreaError, match="^--mask sinks:4,window:8: these kernels take causal, none and "
                                          "window:W only, not sinks:4"):
        parse_mask("sinks:4,window:8").kernel_args(4, 4)
    assert len(parse_mask("window:8").kernel_args(4, 4)) == 3 and len(parse_mask("alibi").kernel_args(4, 4, heads=2)) == 6
    assert parse_mask("alibi").kernel_args(4, 4, heads=2)[5] == 2  # alibi: the query heads
