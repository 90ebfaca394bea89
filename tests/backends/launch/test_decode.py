"""The decode launcher on the CPU build: a step of generation against a float64 softmax written
out here (one query, its keys), in both schedules; the slices it cuts; what it refuses."""

import numpy as np
import pytest

from andrea_cli.backends.launch import decode as launch
from andrea_cli.errors import AndreaError
from andrea_cli.masks import MaskSpec
from andrea_cli.scale import course_scale


def one_step(q, k, v, group: int, first: int = 0) -> np.ndarray:
    """(H, d_v): each query head against its K/V head's keys first.., in float64."""
    out = []
    for h in range(q.shape[0]):
        kk, vv = k[h // group, first:].astype(np.float64), v[h // group, first:].astype(np.float64)
        s = kk @ q[h].astype(np.float64) / np.sqrt(q.shape[1])
        p = np.exp(s - s.max())
        out.append(p / p.sum() @ vv)
    return np.array(out)


def run_step(backend, q, k, v, precision: str, mask: MaskSpec, length: int | None = None):
    dev = backend.device()
    H_kv, S, d_k = k.shape
    cache = launch.new_cache(dev, H_kv, S + 3, d_k, v.shape[-1], precision)  # capacity past what is used
    for t in range(S):
        launch.append(dev, cache, dev.to_device(k[:, t]), dev.to_device(v[:, t]), t)
    step = launch.decode(dev, cache, dev.to_device(q), length or S, q.shape[0], mask=mask, scale=course_scale(d_k))
    return dev.to_host(step.output), step


def bf16(x):
    bits = (x.astype(np.float32).view(np.uint32).astype(np.uint64) + 0x7FFF + ((x.view(np.uint32) >> 16) & 1)) >> 16
    return (bits.astype(np.uint32) << 16).view(np.float32)


@pytest.mark.parametrize("H, H_kv, S, d_k, d_v, mask, first", [
    (1, 1, 1, 64, 64, MaskSpec("causal"), 0),  # the first step: one key
    (4, 2, 300, 64, 48, MaskSpec("causal"), 0),  # grouped K/V heads, several slices
    (8, 1, 200, 32, 32, MaskSpec("window", 70), 130),  # one K/V head (MQA); the window's first key mid-cache
    (2, 2, 129, 128, 128, MaskSpec("causal"), 0),  # widest head, two slices of 64 and 65 keys
])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_step_is_the_softmax_over_the_cache(cpu_each_schedule, H, H_kv, S, d_k, d_v, mask, first, precision):
    rng = np.random.default_rng(S)
    q = rng.standard_normal((H, d_k), dtype=np.float32)
    k = rng.standard_normal((H_kv, S, d_k), dtype=np.float32)
    v = rng.standard_normal((H_kv, S, d_v), dtype=np.float32)
    got, step = run_step(cpu_each_schedule, q, k, v, precision, mask)
    kv = (bf16(k), bf16(v)) if precision == "bf16" else (k, v)  # what the cache holds
    np.testing.assert_allclose(got, one_step(q, *kv, H // H_kv, first), atol=2e-6, rtol=1e-5)
    assert step.slices == launch.slices(S - first, H)[0]


def test_bf16_rounding_here_is_round_to_nearest_even():
    x = np.array([1.0, 1.0 + 2**-8, 1.0 + 3 * 2**-8, -2.5], dtype=np.float32)
    assert bf16(x).tolist() == [1.0, 1.0, 1.0 + 2**-6, -2.5]


def test_slices_fill_the_machine_but_not_past_the_keys():
    assert launch.slices(1, 12) == (1, 1)
    assert launch.slices(127, 1) == (1, 127)  # under two slices' minimum: one
    n, per = launch.slices(1 << 16, 1)
    assert n == launch.TARGET_BLOCKS and n * per >= 1 << 16 > (n - 1) * per
    n, per = launch.slices(1024, 12)
    assert n * 12 <= launch.TARGET_BLOCKS + 12 and per >= launch.MIN_SLICE_KEYS


def test_the_cache_says_what_a_step_reads(cpu_device):
    assert launch.new_cache(cpu_device, 2, 10, 64, 32, "fp32").bytes_read(5) == 2 * 5 * 96 * 4
    assert launch.new_cache(cpu_device, 2, 10, 64, 32, "bf16").bytes_read(5) == 2 * 5 * 96 * 2


@pytest.mark.parametrize("d_k, d_v, precision, flag", [(129, 64, "fp32", "--d-k"), (64, 33, "bf16", "--d-v"),
                                                      (64, 64, "fp16", "--precision")])
def test_shapes_it_cannot_hold_are_refused(cpu_device, d_k, d_v, precision, flag):
    with pytest.raises(AndreaError, match=flag):
        launch.new_cache(cpu_device, 1, 4, d_k, d_v, precision)


def test_steps_outside_the_cache_are_refused(cpu_device):
    cache = launch.new_cache(cpu_device, 2, 4, 8, 8)
    q = cpu_device.to_device(np.zeros((3, 8), np.float32))
    with pytest.raises(AndreaError, match="multiple of the K/V heads"):
        launch.decode(cpu_device, cache, q, 2, 3, mask=MaskSpec("causal"), scale=course_scale(8))
    with pytest.raises(AndreaError, match="1 to 4 cached keys"):
        launch.decode(cpu_device, cache, q, 5, 2, mask=MaskSpec("causal"), scale=course_scale(8))
    with pytest.raises(AndreaError, match="outside the cache"):
        launch.append(cpu_device, cache, q, q, 4)
