"""Each measured `andrea bench` row on a GPU beside its static bound at the row's own shape, so the
first lent GPU calibrates the model: measured TFLOP/s / the bound's (1 would reach the bound).

A row's launches are not restated here: its implementation's own prepare runs against a device
that records (geometry.RecordingDevice), then its timed run() once; each launch it records is
bounded at that launch's geometry, and the row's bound time is their sum, as its measured time
is the sum of theirs. Computes only; render/bench.py prints."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from andrea_cli.backends.toolchain.nvrtc import KernelResources
from andrea_cli.bench.bound.geometry import Launch, Placeholder, RecordingDevice, ReferenceLaunch
from andrea_cli.bench.bound.gpus import GpuSpec, spec_for_device
from andrea_cli.bench.bound.report import NOT_MEASURED, kernel_bound, kernel_resources, kernel_sass
from andrea_cli.bench.bound.sass import Instruction, find_cuobjdump
from andrea_cli.bench.sweep import CAUSAL, NO_MASK, BenchResult, Impl, Measurement, costs, swept_mask
from andrea_cli.errors import first_line
from andrea_cli.masks import MaskSpec


def recorded_launches(impl: Impl, H: int, T: int, d_k: int, mask: MaskSpec) -> list[Launch]:
    """What impl's timed run() launches at this shape (its prepare's untimed launches left out)."""
    dev = RecordingDevice()
    q, k, v = (Placeholder((H, T, d_k), np.dtype(np.float32)) for _ in range(3))
    run = impl.prepare_on(dev, q, k, v, mask)
    dev.launches.clear()
    run()
    return list(dev.launches)


def _paired(row: list[Launch], other: list[Launch]) -> list[tuple[Launch, Launch]]:
    """Each launch of the row with the same kernel's launch of the same order under the other mask
    (kernel_bound reads from the pair whether the kernel is handed the mask); itself when the other
    mask does not launch it (the mask kernel)."""
    by_kernel: dict[str, list[Launch]] = {}
    for launch in other:
        by_kernel.setdefault(launch.kernel, []).append(launch)
    seen: Counter = Counter()
    pairs = []
    for launch in row:
        twins = by_kernel.get(launch.kernel, [])
        pairs.append((launch, twins[seen[launch.kernel]] if seen[launch.kernel] < len(twins) else launch))
        seen[launch.kernel] += 1
    return pairs


class RowBounds:
    """The kernel file compiled once for one modelled GPU; the bound of any row at any shape."""

    def __init__(self, spec: GpuSpec, code: dict[str, list[Instruction]], resources: dict[str, KernelResources]):
        self.spec, self.code, self.resources = spec, code, resources
        self._recorded: dict[tuple, list[Launch]] = {}  # a row and its other mask share a recording

    def launches(self, impl: Impl, H: int, T: int, d_k: int, mask: MaskSpec) -> list[Launch]:
        key = (impl.name, H, T, d_k, mask)
        if key not in self._recorded:
            self._recorded[key] = recorded_launches(impl, H, T, d_k, mask)
        return self._recorded[key]

    @classmethod
    def compile(cls, path: Path, spec: GpuSpec) -> "RowBounds":
        return cls(spec, kernel_sass(path, spec.arch), kernel_resources(path, spec.arch))

    def seconds(self, impl: Impl, H: int, T: int, d_k: int, mask: MaskSpec) -> float | None:
        """The least time impl's run() can take at this shape on the modelled GPU (mask: no mask or
        causal, the two bench sweeps, each launch read beside its twin under the other); None when
        a launch has no bound (its kernel not in the compiled file, or a block that cannot launch)."""
        causal = mask.hides_future
        launches = {c: self.launches(impl, H, T, d_k, m) for c, m in ((False, NO_MASK), (True, CAUSAL))}
        total = 0.0
        for launch, twin in _paired(launches[causal], launches[not causal]):
            if launch.kernel not in self.code:
                return None
            full, masked = (twin, launch) if causal else (launch, twin)
            kb = kernel_bound(launch.kernel, self.code[launch.kernel], self.resources.get(launch.kernel),
                              ReferenceLaunch(d_k, full, masked), self.spec, T=T, H=H)
            b = kb.causal if causal else kb.full
            if b is None:
                return None
            total += b.time_s
        return total

    def tflops(self, impl: Impl, m: Measurement) -> float | None:
        """The row's useful FLOPs (the count its measured TFLOP/s uses) over its bound time."""
        seconds = self.seconds(impl, m.H, m.T, m.d_k, swept_mask(m.causal))
        if not seconds:
            return None
        flops, _ = costs(m.direction, m.H, m.T, m.d_k, m.causal)
        return flops / seconds / 1e12


def tools_missing() -> str | None:
    """Why the bound cannot be read here (None when NVRTC and cuobjdump are both found)."""
    if find_cuobjdump() is None:
        return "cuobjdump not found: pip install '.[bound]'"
    return None


def attach_bounds(result: BenchResult, impls: list[Impl], device_name: str, sms: int, path: Path,
                  compile_bounds=RowBounds.compile) -> None:
    """Set bound_tflops and measured_over_bound on every measured row of the kernel file's paths,
    with one note saying for which GPU model, or why there are none (the fields left None)."""
    spec, why = spec_for_device(device_name, sms)
    if spec is None:
        result.notes.append(f"no static bound beside the measured figures: {why}")
        return
    missing = tools_missing()
    if missing is not None:
        result.notes.append(f"no static bound beside the measured figures: {missing}")
        return
    try:
        bounds = compile_bounds(path, spec)
    except Exception as exc:  # NVRTC missing or refusing the file: the timings still stand
        result.notes.append(f"no static bound beside the measured figures: {first_line(exc)}")
        return
    by_name = {impl.name: impl for impl in impls}
    failed: list[str] = []
    for m in result.measurements:
        impl = by_name.get(m.impl)
        if m.tflops is None or impl is None or impl.prepare_on is None:
            continue
        try:
            m.bound_tflops = bounds.tflops(impl, m)
        except Exception as exc:  # the timings are done: a bound that cannot be read costs its row only
            failed.append(f"{m.impl} at T={m.T} d_k={m.d_k}: {first_line(exc)}")
            continue
        if m.bound_tflops:
            m.measured_over_bound = m.tflops / m.bound_tflops
    if failed:
        result.notes.append(f"no static bound for {len(failed)} row(s), first {failed[0]}")
    result.notes.append(f"÷ bound = TFLOP/s / bound_tflops, the {NOT_MEASURED}, of the same launches at each row's "
                        f"shape on the {spec.name} model (`andrea bench --bound --gpu {spec.key}`); 1 reaches it")
