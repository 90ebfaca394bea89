"""The blocks of a launch spread over OS threads (RawModule / CpuModule threads=N): each block is
still run start to end by one thread's fibers, atomics are real atomics across the threads, a
kernel without races or float atomics gives the same bits for any thread count, and a failing
launch reports the lowest failing block, as on one thread."""

from __future__ import annotations

import json

import numpy as np
import pytest

from andrea_cli.backends.cpu_runtime import RawModule
from andrea_cli.backends.cpu_runtime.errors import CpuFaultError, CpuRuntimeError
from andrea_cli.backends.cpu_runtime.module import CpuModule
from andrea_cli.kernel_file import packaged_kernel_path
from andrea_cli.masks import MaskSpec

CODE = r'''
extern "C" __global__ void count(unsigned long long* total, int* per_block) {
    atomicAdd(total, 1ull);  // every thread of every block, from every OS thread at once
    atomicAdd(&per_block[blockIdx.x], 1);
}

// a block sum through static shared memory and barriers: each block's own, whatever OS thread runs it
extern "C" __global__ void block_sums(const float* x, float* out) {
    __shared__ float part[128];
    part[threadIdx.x] = x[blockIdx.x * 128 + threadIdx.x];
    __syncthreads();
    for (int s = 64; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = part[0];
}

// blocks from `bad` on read far past x: the lowest of them is the failure reported
extern "C" __global__ void fault_from(const float* x, float* y, int bad) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = x[i + (blockIdx.x >= bad ? 1 << 20 : 0)];
}
'''


def test_atomics_count_every_thread_across_os_threads():
    module = RawModule(code=CODE, threads=4)
    total, per_block = np.zeros(1, np.uint64), np.zeros(200, np.int32)
    module.get_function("count")((200,), (96,), (total, per_block))
    assert total[0] == 200 * 96 and (per_block == 96).all()


def test_same_bits_for_any_thread_count():
    x = np.random.default_rng(0).standard_normal(300 * 128).astype(np.float32)
    outs = []
    for threads in (1, 2, 3):
        out = np.zeros(300, np.float32)
        RawModule(code=CODE, threads=threads).get_function("block_sums")((300,), (128,), (x, out))
        outs.append(out)
    np.testing.assert_allclose(outs[0], x.reshape(300, 128).sum(axis=1, dtype=np.float64), rtol=1e-5, atol=1e-5)
    assert all(o.tobytes() == outs[0].tobytes() for o in outs[1:])


def test_the_kernel_files_fused_kernel_gives_the_same_bits_on_two_threads():
    rng = np.random.default_rng(1)
    T, d, rows = 96, 64, 8  # rows: query rows (warps) a block, as backends/fused.py launches it
    q, k, v = (rng.standard_normal((T, d)).astype(np.float32) for _ in range(3))
    shared = 4 * (rows * d + 32 * (d | 1) + 32 * d)  # q tile, padded k tile, v tile
    outs = []
    for threads in (1, 2):
        out = np.zeros((T, d), np.float32)
        CpuModule(packaged_kernel_path(), threads=threads).get_function("attention_fused_kernel1")(
            (T // rows, 1, 1), (32, rows, 1),
            (q, k, v, out, np.int32(T), np.int32(T), np.int32(d), np.int32(d), np.int32(1), np.float32(0.125),
             *MaskSpec("causal").kernel_args(T, T, heads=1), None, np.int32(0)),  # no mask array
            shared_mem=shared)
        outs.append(out)
    scores = (q.astype(np.float64) @ k.T.astype(np.float64)) * 0.125
    scores[np.triu_indices(T, 1)] = -np.inf
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    want = (weights / weights.sum(axis=1, keepdims=True)) @ v
    np.testing.assert_allclose(outs[0], want, rtol=1e-4, atol=1e-5)
    assert outs[0].tobytes() == outs[1].tobytes()


def test_a_failure_names_the_lowest_failing_block_on_any_thread_count():
    x, y = np.zeros(64 * 32, np.float32), np.zeros(64 * 32, np.float32)
    for threads in (1, 4):
        with pytest.raises(CpuFaultError, match=r"fault_from: thread \(0, 0, 0\) of block \(37, 0, 0\) read x"):
            RawModule(code=CODE, threads=threads).get_function("fault_from")((64,), (32,), (x, y, np.int32(37)))


def test_threads_must_be_a_positive_whole_number():
    with pytest.raises(CpuRuntimeError, match=r"threads=0: use a whole number of OS threads, at least 1"):
        RawModule(code=CODE, threads=0)


def test_attend_threads_option_gives_the_same_report(run_main):
    reports = []
    for threads in (1, 3):
        code, out, err = run_main("attend", "--backend", "cpu", "--fused", "-T", 70, "--threads", threads, "--json")
        assert code == 0, err
        report = json.loads(out)
        for timing in ("timings_ms", "transfer_ms", "load_ms"):
            report.pop(timing, None)
        reports.append(report)
    assert reports[0] == reports[1]
    code, out, err = run_main("attend", "--backend", "cpu", "-T", 8, "--threads", 0)
    assert code == 2 and err.strip() == ("error: --threads 0: give a whole number of OS threads, at least 1 "
                                         "(or leave it out for every core)")
