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
