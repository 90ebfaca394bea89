"""bench's tests: its GPU side on a device that reports an H200, the CPU build running its kernels."""

import pytest


@pytest.fixture
def bench_gpu_as_h200(monkeypatch, cpu_backend):
    """andrea_cli.bench.gpu on a device that reports an H200 (name, SM count, clocks, memory) while
    the CPU build runs its kernels and the host clock times them: bench's GPU side without a GPU.
    Returns the module; a test patches whatever else it needs (torch, the bound, the cupy peer)."""
    cupy = pytest.importorskip("cupy")
    from andrea_cli.backends import cuda
    from andrea_cli.bench import gpu as bench_gpu
    from andrea_cli.bench.cpu import perf_counter_timer

    class CpuBuildAsGpu:
        def __init__(self, path):
            self.backend = cpu_backend()

        def device(self):
            return self.backend.device()

        def device_name(self):
            return "NVIDIA H200 (sm_90, 132 SMs)"

    props = {"name": b"NVIDIA H200", "major": 9, "minor": 0, "multiProcessorCount": 132, "clockRate": 1_980_000,
             "memoryClockRate": 3_201_000, "memoryBusWidth": 6144, "l2CacheSize": 60 << 20}
    monkeypatch.setattr(cuda, "CudaBackend", CpuBuildAsGpu)
    monkeypatch.setattr(bench_gpu, "gpu_properties", lambda: props)
    monkeypatch.setattr(bench_gpu, "event_timer_with_l2_flush", lambda l2_bytes: perf_counter_timer)
    monkeypatch.setattr(bench_gpu, "release_gpu_memory", lambda: None)
    monkeypatch.setattr(cupy.cuda.runtime, "memGetInfo", lambda: (1 << 34, 1 << 34))
    return bench_gpu
