"""The staged launcher's scale stage: scale_kernel1 works out the course's 1.0f / sqrtf(d_k) itself
(the line the course quotes is in its code, not only in a comment), and takes a factor given."""

from __future__ import annotations

import re

import numpy as np
import pytest

from andrea_cli.kernel_file import packaged_kernel_path, strip_comments


def scale_body() -> str:
    code = strip_comments(packaged_kernel_path().read_text())
    start = code.index("void scale_kernel1(")
    return code[start:code.index("\n}", start)]


def test_the_course_line_is_in_the_scale_kernel_code():
    # the course: "scores[i][j] = dot(Q[i], K[j]) * (1.0f / sqrtf(d_k));"
    assert re.search(r"1\.0f / sqrtf\(\(float\)d_k\)", scale_body())


@pytest.mark.parametrize("d_k", [64, 6, 7, 300])  # 6, 7, 300: 1.0f / sqrtf(d) is not float32(1/sqrt(d))
def test_scale_kernel1_multiplies_by_its_own_factor_or_the_one_given(cpu_device, d_k):
    n = 1000
    x = np.random.default_rng(d_k).standard_normal(n).astype(np.float32)
    run = cpu_device.get_function("scale_kernel1")

    def scaled(given: float) -> np.ndarray:
        out = np.full(n, np.nan, np.float32)
        run((4, 1, 1), (256, 1, 1), (x, out, np.int64(n), np.int32(d_k), np.float32(given)))
        return out

    course = np.float32(1.0) / np.sqrt(np.float32(d_k))  # float32 sqrt, then a float32 division
    np.testing.assert_array_equal(scaled(0.0), x * course)
    np.testing.assert_array_equal(scaled(0.3), x * np.float32(0.3))
