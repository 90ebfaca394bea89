"""CpuModule (cpu_runtime/module.py), the CPU execution layer: CUDA semantics on fibers, checked
with small kernels (tests/kernels/basics.cu), and the project's softmax_kernel1 against NumPy.
(Its build and cache: test_build.py; its sanitizer build: test_sanitize.py.)"""

import os
import pathlib

import numpy as np
import pytest

from andrea_cli.backends.cpu_runtime.errors import (
    CpuArgumentError, CpuDeadlockError, CpuFaultError, CpuLaunchError, CpuRuntimeError, CpuWarpError)
from andrea_cli.backends.cpu_runtime.module import CpuModule
from andrea_cli.errors import AndreaError

KERNELS = pathlib.Path(__file__).parents[2] / "kernels"
BASICS = KERNELS / "basics.cu"
REPO = pathlib.Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def basics():
    return CpuModule(BASICS)


@pytest.fixture(scope="session")
def basics_reverse():
    return CpuModule(BASICS, schedule="reverse")


def test_kernel_names_and_signature(basics):
    assert "scale" in basics.kernel_names and "block_sum" in basics.kernel_names
    assert basics.get_function("scale").signature == ["p8", "p8", "i4", "f4"]


def test_grid_stride_scale(basics):
    x = np.arange(1000, dtype=np.float32)
    y = np.zeros_like(x)
    basics.get_function("scale")((3,), (128,), (x, y, np.int32(1000), np.float32(0.5)))
    np.testing.assert_array_equal(y, x * np.float32(0.5))


@pytest.mark.parametrize("schedule", ["forward", "reverse"])
def test_barrier_counts_returned_threads(basics, basics_reverse, schedule):
    # n = 300 leaves the second block with 44 live threads: 212 return before the barrier.
    mod = basics if schedule == "forward" else basics_reverse
    n = 300
    x = np.arange(n, dtype=np.int32)
    y = np.zeros_like(x)
    mod.get_function("reverse_block")((2,), (256,), (x, y, np.int32(n)))
    np.testing.assert_array_equal(y, np.concatenate([x[:256][::-1], x[256:][::-1]]))


@pytest.mark.parametrize("threads", [32, 64, 256, 1024])
def test_block_sum_where_only_warp0_shuffles_again(basics, threads):
    rows, n = 3, 1000
    x = np.random.default_rng(0).standard_normal((rows, n)).astype(np.float32)
    out = np.zeros(rows, np.float32)
    basics.get_function("block_sum")((rows,), (threads,), (x, out, np.int32(n)), shared_mem=threads // 32 * 4)
    np.testing.assert_allclose(out, x.sum(axis=1, dtype=np.float64), rtol=1e-5, atol=1e-4)


def _expected_shuffles(threads: int, width: int) -> np.ndarray:
    """CUDA's shuffle rules: a source outside the lane's sub-warp yields the lane's own value."""
    out = np.zeros((threads, 4), np.int32)
    for t in range(threads):
        warp, lane = divmod(t, 32)
        value = lambda src: 100 + 32 * warp + src  # noqa: E731
        base = lane & ~(width - 1)
        out[t, 0] = value(lane ^ 1)
        out[t, 1] = value(lane + 3) if lane % width + 3 < width else 100 + t
        out[t, 2] = value(lane - 2) if lane % width >= 2 else 100 + t
        out[t, 3] = value(base + (5 & (width - 1)))
    return out


# Partial warps (48 and 100 threads) with sub-warps that fit inside the lanes that exist.
@pytest.mark.parametrize("threads,width", [(32, 32), (48, 16), (48, 8), (100, 4), (64, 4)])
def test_shuffles_partial_warps_and_width(basics, threads, width):
    out = np.zeros((threads, 4), np.int32)
    basics.get_function("shuffles")((1,), (threads,), (out, np.int32(width), np.int32(0)))
    np.testing.assert_array_equal(out, _expected_shuffles(threads, width))


@pytest.mark.parametrize("whole_mask,match", [
    (1, r"__shfl_xor_sync\(0xffffffff, \.\.\.\) in warp 1 \(lane \d+ calls it\) names lanes 16-31, which do not "
        r"exist: the block has 48 threads"),
    (0, r"__shfl_down_sync\(0x0000ffff, \.\.\.\) in warp 1: lane 1[3-5] reads lane 1[6-8], which does not exist"),
])
def test_partial_warp_lanes_past_the_block_are_errors(basics, basics_reverse, whole_mask, match):
    # 48 threads: warp 1 has lanes 0-15. On a GPU naming or reading lanes 16-31 is undefined.
    for mod in (basics, basics_reverse):
        with pytest.raises(CpuWarpError, match=match) as e:
            mod.get_function("shuffles")((1,), (48,), (np.zeros((48, 4), np.int32), np.int32(32),
                                                      np.int32(whole_mask)))
        assert e.value.kernel == "shuffles" and e.value.block == (0, 0, 0) and e.value.warp == 1
    assert "__ballot_sync/__activemask" in str(e.value)
    test_shuffles_partial_warps_and_width(basics, 48, 16)  # the module goes on working


def test_shuffle_among_live_lanes_after_others_returned(basics):
    out = np.full(32, -1, np.int32)
    basics.get_function("shuffle_exited")((1,), (32,), (out, np.uint32(0x55555555), np.int32(2)))
    np.testing.assert_array_equal(out[0::2], np.arange(0, 32, 2) ^ 2)
    assert (out[1::2] == -1).all()


@pytest.mark.parametrize("schedule", ["forward", "reverse"])
@pytest.mark.parametrize("mask,lane_mask,match", [
    (0xffffffff, 2, r"__shfl_xor_sync\(0xffffffff, \.\.\.\).*returned.*keep (that lane|those lanes) alive "
                    r"until the shuffle"),
    (0x55555555, 1, r"__shfl_xor_sync\(0x55555555, \.\.\.\) in warp 0: lane \d+ reads lane \d+, which has returned"),
])
def test_shuffle_with_returned_lanes_is_an_error(basics, basics_reverse, schedule, mask, lane_mask, match):
    # The reviewer's case: `if (j >= T) return;` then a full-mask warp reduction.
    mod = basics if schedule == "forward" else basics_reverse
    with pytest.raises(CpuWarpError, match=match) as e:
        mod.get_function("shuffle_exited")((1,), (32,), (np.zeros(32, np.int32), np.uint32(mask),
                                                         np.int32(lane_mask)))
    assert e.value.warp == 0 and e.value.mask == mask and e.value.lanes & 0xaaaaaaaa == e.value.lanes
    assert isinstance(e.value, AndreaError)
    test_shuffle_among_live_lanes_after_others_returned(basics)


@pytest.mark.parametrize("threads,n,mask,match", [
    (32, 32, 0xffffffff, None),
    (32, 20, 0, None),            # __activemask(): lanes 0-19
    (32, 20, 0x000fffff, None),
    (32, 20, 0xffffffff, r"returned"),
    (20, 20, 0xffffffff, r"names lanes 20-31, which do not exist: the block has 20 threads, so this warp "
                         r"has lanes 0-19"),
    (32, 32, 0x00000001, r"lane [1-9]\d* of warp 0 calls __syncwarp\(0x00000001, \.\.\.\) with a mask that does "
                         r"not name itself"),
])
def test_syncwarp_mask_must_name_only_lanes_that_arrive(basics, threads, n, mask, match):
    out = np.zeros(threads, np.int32)
    kernel = basics.get_function("syncwarp_after_return")
    if match is None:
        kernel((1,), (threads,), (out, np.int32(n), np.uint32(mask)))
        assert (out[:n] == 1).all() and (out[n:] == 0).all()
    else:
        with pytest.raises(CpuWarpError, match=match):
            kernel((1,), (threads,), (out, np.int32(n), np.uint32(mask)))


def test_activemask_is_the_converged_live_lanes_and_votes(basics):
    # 40 threads: warp 1 has lanes 0-7. Each branch of the divergent if sees only its half-warp.
    n = 40
    out = np.zeros(3 * n, np.uint32)
    basics.get_function("active_lanes")((1,), (n,), (out,))
    assert [hex(m) for m in out[:n]] == ["0xffff"] * 16 + ["0xffff0000"] * 16 + ["0xff"] * 8
    assert (out[n:n + 32] == 0xaaaaaaaa).all() and (out[n + 32:2 * n] == 0xaa).all()
    lane0 = np.repeat([0, 32], [32, 8])
    np.testing.assert_array_equal(out[2 * n:], lane0 + 1000 + 2000 * (lane0 == 0))


def test_float4_loads(basics):
    x = np.arange(4 * 50, dtype=np.float32)
    y = np.zeros_like(x)
    basics.get_function("double4")((2,), (32,), (x, y, np.int32(50)))
    np.testing.assert_array_equal(y, 2 * x)


def test_atomics(basics):
    count, maxid = np.zeros(1, np.int32), np.zeros(1, np.int32)
    fsum, exch, cas = np.zeros(1, np.float32), np.zeros(1, np.int32), np.zeros(1, np.int32)
    basics.get_function("atomics")((3,), (100,), (count, fsum, maxid, exch, cas))
    assert (count[0], fsum[0], maxid[0], exch[0]) == (300, 150.0, 299, 7)
    # one CAS wins and no later one overwrites it: the first thread of whichever block got there
    # first (a block's threads run in order; blocks run on several OS threads at once, so on a
    # busy machine block 1 or 2 may start before block 0)
    assert cas[0] in (1, 101, 201), cas[0]


def test_deadlock_is_an_error_and_the_module_survives(basics):
    out = np.zeros(32, np.float32)
    with pytest.raises(CpuDeadlockError) as e:
        basics.get_function("deadlock")((1,), (32,), (out,))
    assert e.value.kernel == "deadlock" and e.value.block == (0, 0, 0)
    assert "16 of 32 threads wait at __syncthreads" in str(e.value)
    assert isinstance(e.value, AndreaError)
    test_grid_stride_scale(basics)  # the fibers stuck in the dead block start over cleanly


@pytest.mark.parametrize("kernel,args,match", [
    ("wild_read", lambda x: (x, x, np.int64(1 << 40)), r"illegal memory access in thread \(0, 0, 0\)"),
    ("stack_overflow", lambda x: (x, np.int32(10_000)), r"stack overflow in thread \(0, 0, 0\)"),
])
def test_memory_faults_are_errors_not_crashes(basics, kernel, args, match):
    # On a GPU these end the context with "illegal address"; here they must not end Python.
    x = np.zeros(64, np.float32)
    with pytest.raises(CpuFaultError, match=match):
        basics.get_function(kernel)((2,), (32,), args(x))
    test_block_sum_where_only_warp0_shuffles_again(basics, 64)  # still works afterwards


def test_reverse_schedule_exposes_missing_barrier(basics, basics_reverse):
    want = np.arange(-1, 63, dtype=np.float32)
    want[0] = -1
    for with_barrier in (0, 1):
        forward, reverse = np.zeros(64, np.float32), np.zeros(64, np.float32)
        basics.get_function("neighbour")((1,), (64,), (forward, np.int32(with_barrier)))
        basics_reverse.get_function("neighbour")((1,), (64,), (reverse, np.int32(with_barrier)))
        np.testing.assert_array_equal(forward, want)  # forward passes by luck either way
        if with_barrier:
            np.testing.assert_array_equal(reverse, want)
        else:
            assert np.isnan(reverse[1:]).all()  # the reads ran before the writes


def test_unwritten_shared_memory_reads_nan(basics):
    out = np.zeros(64, np.float32)
    kernel = basics.get_function("unwritten")
    kernel((1,), (32,), (out, np.int32(1)), shared_mem=32 * 4)
    assert (out[:32] == 1).all() and (out[32:] == 2).all()
    kernel((1,), (32,), (out, np.int32(0)), shared_mem=32 * 4)  # stale 1s and 2s must not show
    assert np.isnan(out).all()


def _read_only(x: np.ndarray) -> np.ndarray:
    y = x.copy()
    y.flags.writeable = False
    return y


@pytest.mark.parametrize("args,match", [
    (lambda x: (x, x, np.int32(4), 0.5), r"argument 3 \(float s\) needs float32, got Python float"),
    (lambda x: (x, x, np.int32(4), np.float64(0.5)), r"argument 3 .* got numpy float64"),
    (lambda x: (x, x, 4, np.float32(0.5)), r"argument 2 \(int n\) needs int32, got Python int"),
    (lambda x: (x, x, np.int64(4), np.float32(0.5)), r"argument 2 .* got numpy int64"),
    (lambda x: (x, np.float32(1), np.int32(4), np.float32(0.5)), r"argument 1 .* needs a numpy array"),
    (lambda x: (x.astype(np.float64), x, np.int32(4), np.float32(0.5)), r"argument 0 .* float32, got .* float64"),
    (lambda x: (x[::2], x, np.int32(2), np.float32(0.5)), r"argument 0 .* C-contiguous"),
    (lambda x: (x, x, np.int32(4)), r"scale takes 4 arguments, got 3"),
    (lambda x: (x, _read_only(x), np.int32(4), np.float32(1)), r"argument 1 .* read-only"),
])
def test_argument_types_are_checked(basics, args, match):
    x = np.zeros(8, np.float32)
    with pytest.raises(CpuArgumentError, match=match):
        basics.get_function("scale")((1,), (32,), args(x))


def test_python_int_is_fine_for_long(basics):
    # cupy passes a Python int as int64: exactly a `long`, so no error there.
    x = np.arange(64, dtype=np.float32)
    y = np.zeros_like(x)
    basics.get_function("wild_read")((1,), (64,), (x, y, 3))
    assert (y == 3).all()


@pytest.mark.parametrize("grid,block,shared", [
    ((1,), (1025,), 0), ((1,), (32, 32, 2), 0), ((1,), (0,), 0), ((1, 1, 1, 1), (32,), 0),
    ((1,), (32,), 229 * 1024), ((0,), (32,), 0),
])
def test_launch_geometry_is_checked(basics, grid, block, shared):
    x = np.zeros(8, np.float32)
    with pytest.raises(CpuLaunchError):
        basics.get_function("scale")(grid, block, (x, x, np.int32(8), np.float32(1)), shared_mem=shared)


def test_unknown_kernel(basics):
    with pytest.raises(CpuRuntimeError, match="no __global__ kernel 'nope'"):
        basics.get_function("nope")


def _project_kernel_file() -> pathlib.Path | None:
    for path in (REPO / "cuda" / "microgpt_cuda.cu", pathlib.Path(os.environ.get("ANDREA_KERNEL_FILE", ""))):
        if path.is_file():
            return path
    return None


def test_project_softmax_matches_numpy():
    path = _project_kernel_file()
    if path is None:
        pytest.skip("cuda/microgpt_cuda.cu is not in this checkout (set ANDREA_KERNEL_FILE to one)")
    mod = CpuModule(path)
    # The file's comment block documents softmax_kernel1: one block per row, blockDim.x a multiple
    # of 32, shared_mem one float per warp.
    if "softmax_kernel1" not in mod.kernel_names or "one block per row" not in path.read_text():
        pytest.skip(f"{path.name} has no documented one-block-per-row softmax_kernel1 (it has {mod.kernel_names})")
    assert mod.get_function("softmax_kernel1").signature == ["p8", "p8", "i4", "i4"]
    reverse = CpuModule(path, schedule="reverse")  # a missing barrier would show here
    for T, threads, module in [(1, 32, mod), (7, 64, mod), (33, 32, reverse), (130, 128, mod), (130, 256, reverse)]:
        kernel = module.get_function("softmax_kernel1")
        x = np.random.default_rng(T).standard_normal((T, T)).astype(np.float32) * 4
        x[0, 1:] = -np.inf  # a causal first row
        p = np.zeros_like(x)
        kernel((T, 1, 1), (threads, 1, 1), (x, p, np.int32(T), np.int32(T)), shared_mem=threads // 32 * 4)
        e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
        np.testing.assert_allclose(p, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
        assert (p[0, 1:] == 0).all()
