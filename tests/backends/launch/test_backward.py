"""The backward kernels through the CPU build of the kernel file, against the float64 NumPy
backward: staged and fused, both thread schedules, awkward shapes; the logsumexp option leaves the
fused forward's output untouched. (verify runs the full sweep with derived bounds; here the
bounds are plain relative ones, enough to tell a right gradient from a wrong one.)"""

import numpy as np
import pytest

from andrea_cli import reference_backward
from andrea_cli.backends.launch.staged import DEFAULT_PLAN, KERNEL1_PLAN
from andrea_cli.masks import MaskSpec
from andrea_cli.scale import course_scale


def inputs(H, T, d_k, d_v, seed=0):
    rng = np.random.default_rng(seed)
    q, k = (rng.standard_normal((H, T, d_k), dtype=np.float32) for _ in range(2))
    v, d_out = (rng.standard_normal((H, T, d_v), dtype=np.float32) for _ in range(2))
    return q, k, v, d_out


def rel_err(got, expected) -> float:
    """The worst error relative to the largest entry (T = 1 has dQ = dK = 0 exactly: 0 then)."""
    err = float(np.abs(got - expected).max())
    return err / float(np.abs(expected).max()) if err else 0.0


@pytest.mark.parametrize("T, d_k, d_v, mask, scaled", [
    (1, 1, 1, MaskSpec("causal"), True),
    (33, 5, 7, MaskSpec("none"), False),  # widths no tile divides; kernel1 only
    (70, 40, 36, MaskSpec("window", 33), True),  # two columns per lane; a window across tiles
    (65, 128, 64, MaskSpec("causal"), True),  # the widest head the fused kernels take
    (130, 64, 70, MaskSpec("causal"), True),  # past the staged kernel2's 64 and 128-wide tiles
])
def test_backward_matches_numpy(cpu_each_schedule, T, d_k, d_v, mask, scaled):
    q, k, v, d_out = inputs(2, T, d_k, d_v)
    exact = reference_backward.backward(q, k, v, d_out, mask, scaled)
    cpu = cpu_each_schedule
    # the staged products register-tiled (dv/dp/dq/dk_kernel2, the default) and one per thread
    staged = [cpu.attention_backward(q, k, v, d_out, mask=mask, scaled=scaled, plan=plan)
              for plan in (DEFAULT_PLAN, KERNEL1_PLAN)]
    fused = cpu.attention_backward_fused(q, k, v, d_out, mask=mask, scaled=scaled)
    for got in (*staged, fused):
        for name in ("dq", "dk", "dv"):
            assert rel_err(getattr(got, name), getattr(exact, name)) < 1e-5, name
    for got in staged:
        assert rel_err(got.d_scores, exact.d_scores) < 1e-5
        assert (got.d_scores[:, ~mask.visible(T)] == 0).all()  # exactly 0 where the mask hid a key


@pytest.mark.parametrize("variant", [1, 2])
def test_lse_kernels_write_the_same_output_and_the_logsumexp(cpu_each_schedule, variant):
    q, k, v, d_out = inputs(2, 45, 16, 8, seed=1)
    cpu, mask = cpu_each_schedule, MaskSpec("causal")
    plain = cpu.attention_fused(q, k, v, mask=mask, scaled=True, variant=variant).output
    with_lse = cpu.attention_backward_fused(q, k, v, d_out, mask=mask, scaled=True, variant=variant)
    s = np.where(mask.visible(45), np.matmul(q.astype(np.float64), k.astype(np.float64).transpose(0, 2, 1)) / 4, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    lse = (m + np.log(np.exp(s - m).sum(axis=-1, keepdims=True)))[..., 0]
    np.testing.assert_allclose(with_lse.lse, lse, rtol=1e-5, atol=1e-5)
    # same inputs, same body: the lse variant's output is bit for bit the plain kernel's
    from andrea_cli.backends.launch.backward import launch_fused_lse

    dev = cpu.device()
    out, lse_out = dev.empty((2, 45, 8)), dev.empty((2, 45))
    launch_fused_lse(dev, *(dev.to_device(a) for a in (q, k, v)), out, lse_out, T=45, d_k=16, d_v=8, H=2,
                     mask=mask, scale=course_scale(16), variant=variant)
    assert np.array_equal(out, plain)
