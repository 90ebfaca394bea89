"""The scale, resolved once (andrea_cli/scale.py): the course's 1/sqrt(d_k), none, or a factor
given; the launchers read the Scale they are handed and never interpret the convention."""

import math
from pathlib import Path

import numpy as np
import pytest

from andrea_cli.masks import MaskSpec
from andrea_cli.reference import attention
from andrea_cli.scale import Scale, course_scale, given_scale, resolve_scale

LAUNCH = Path(__file__).parents[1] / "andrea_cli" / "backends" / "launch"


@pytest.mark.parametrize("scaled, factor, applied, given, kernel_given", [
    (True, 1 / math.sqrt(64), True, False, 0.0),  # 0: scale_kernel1 works out 1.0f / sqrtf(d_k) itself
    (False, 1.0, False, False, 0.0),
    (0.3, 0.3, True, True, 0.3),
    (np.float32(0.5), 0.5, True, True, 0.5),
])
def test_each_convention_resolves_once(scaled, factor, applied, given, kernel_given):
    scale = resolve_scale(64, scaled)
    assert (scale.factor, scale.applied, scale.given, scale.kernel_given()) == pytest.approx(
        (factor, applied, given, kernel_given))
    assert bool(scale) is applied and given_scale(scale) is given
    assert resolve_scale(16, scale) is scale  # resolved: passed through as it is, whatever d_k
    assert course_scale(64) == Scale(0.125)


def test_no_launcher_reads_the_convention_itself():
    for path in LAUNCH.glob("*.py"):
        text = path.read_text()
        assert "scale_for" not in text and "given_scale" not in text and "resolve_scale" not in text, path.name


def test_a_resolved_scale_runs_as_the_flag_did(cpu_backend):
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((1, 21, 8)).astype(np.float32) for _ in range(3))
    for scaled in (True, False, 0.3):
        out = cpu_backend().attention(q, k, v, mask=MaskSpec("causal"), scaled=resolve_scale(8, scaled))
        assert np.abs(out.output - attention(q, k, v, MaskSpec("causal"), scaled)).max() < 1e-5
