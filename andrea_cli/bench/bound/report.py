"""`andrea bench --bound`: the kernel file compiled for one GPU, each kernel's resources from
ptxas, its hot loop from the SASS, its launch from the launchers, and the bound of each.
Computes only; render/bound.py prints."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from andrea_cli.backends.launch.catalogue import matmul_products
from andrea_cli.backends.toolchain.cuda_arch import CompileTarget
from andrea_cli.backends.toolchain.nvrtc import (KernelResources, compile_kernel_file, compiled_kernel_file,
                                                nvrtc_version)
from andrea_cli.bench.bound.geometry import REFERENCE_HEADS, REFERENCE_T, ReferenceLaunch, reference_launches
from andrea_cli.bench.bound.gpus import GpuSpec, gpu_spec
from andrea_cli.bench.bound.lanes import with_wavefronts
from andrea_cli.bench.bound.model import Bound, Work, attention_matmul_flops, bound, occupancy
from andrea_cli.bench.bound.sass import INSTALL_HINT, Instruction, Mix, disassemble, find_cuobjdump, find_nvdisasm, \
    hot_loop, mix_of, parse_kernels, steady_state, straight_line
from andrea_cli.errors import AndreaError
from andrea_cli.kernel_file import kernel_parameters

NOT_MEASURED = "static bound, not a measurement"


@dataclass
class KernelBound:
    kernel: str
    registers: int
    shared_bytes: int  # static + dynamic at the reference launch
    spill_bytes: int  # spill stores + loads ptxas reports, per thread
    mix: Mix  # one trip of the hot loop (the whole kernel when it has no loop)
    loop: tuple[int, int] | None  # the hot loop's addresses
    launch: ReferenceLaunch | None = None
    warps_per_sm: int | None = None
    occupancy_limit: str | None = None
    full: Bound | None = None  # no mask
    causal: Bound | None = None
    notes: list[str] = field(default_factory=list)
    trip: list[Instruction] = field(default_factory=list, repr=False)  # the instructions `mix` counts

    @property
    def bottleneck(self) -> str | None:
        return self.full.bottleneck if self.full else None

    def to_json(self) -> dict:
        def pipes(b: Bound | None) -> dict | None:
            if b is None:
                return None
            return {"bottleneck": b.bottleneck, "runner_up": b.runner_up, "bound_us": b.time_s * 1e6,
                    "bound_tflops": b.tflops, "peak_fraction": b.peak_fraction, "trips": b.trips,
                    "clock_ghz": b.clock_ghz, "at_peak_because": list(b.at_peak_because),
                    "pipe_us": {pipe: s * 1e6 for pipe, s in b.seconds.items()}}

        m = self.mix
        return {
            "kernel": self.kernel,
            "registers": self.registers,
            "shared_bytes": self.shared_bytes,
            "warps_per_sm": self.warps_per_sm,
            "bottleneck": self.bottleneck,
            "bound_tflops": self.full.tflops if self.full else None,
            "peak_fraction": self.full.peak_fraction if self.full else None,
            "runner_up": self.full.runner_up if self.full else None,
            "occupancy_limit": self.occupancy_limit,
            "spill_bytes": self.spill_bytes,
            "head_size": self.launch.head_size if self.launch else None,
            "grid": list(self.launch.full.grid) if self.launch else None,
            "block": list(self.launch.full.block) if self.launch else None,
            "hot_loop": None if self.loop is None else {"start": f"0x{self.loop[0]:04x}", "end": f"0x{self.loop[1]:04x}"},
            "per_trip": {"instructions": m.instructions, "hmma": m.hmma, "hgmma": m.hgmma, "ffma": m.ffma, "fp32_pipe": m.fp32, "imad": m.imad,
                         "alu": m.alu, "mufu": m.mufu, "convert": m.convert, "shfl": m.shfl, "bar": m.bar,
                         "shared_load_bytes": m.shared_load_bytes, "shared_store_bytes": m.shared_store_bytes,
                         "wgmma_shared_bytes": m.wgmma_shared_bytes,
                         "global_load_bytes": m.global_load_bytes, "global_store_bytes": m.global_store_bytes,
                         "local_bytes": m.local_bytes,
                         "shared_conflict_wavefronts": m.shared_conflict_wavefronts,
                         "shared_accesses_derived": m.shared_derived, "shared_accesses_assumed": m.shared_assumed},
            "no_mask": pipes(self.full),
            "causal": pipes(self.causal),
            "notes": self.notes,
        }


@dataclass
class BoundReport:
    gpu: GpuSpec
    kernel_path: Path
    T: int
    heads: int
    kernels: list[KernelBound]
    notes: list[str] = field(default_factory=list)  # launchers that would not run at the reference shape

    def to_json(self) -> list[dict]:
        """A list, one object per kernel; each says what it is (a static bound) and for which GPU."""
        rows = []
        for k in self.kernels:
            row = k.to_json()
            row.update(gpu=self.gpu.name, reference={"T": self.T, "heads": self.heads, "d_k": row["head_size"]},
                       what=NOT_MEASURED)
            rows.append(row)
        return rows


def kernel_resources(path: Path, arch: str) -> dict[str, KernelResources]:
    return {r.kernel: r for r in compile_kernel_file(path, arch)}


def require_bound_tools() -> None:
    """NVRTC, cuobjdump and nvdisasm, checked before anything compiles: one line naming the bound
    extra, which brings all three (NVRTC's own message names the GPU extras, which do not)."""
    try:
        nvrtc_version()
    except AndreaError:
        raise AndreaError(f"bench --bound compiles the kernel file with NVRTC, which is not available here: "
                          f"{INSTALL_HINT}") from None
    for name, found in (("cuobjdump", find_cuobjdump()), ("nvdisasm", find_nvdisasm())):
        if found is None:
            raise AndreaError(f"bench --bound reads the SASS with {name}, which is not found: {INSTALL_HINT}")


def disassembled(path: Path, arch: str) -> str:
    """`cuobjdump -sass` of the kernel file compiled for one architecture (the cubin cached)."""
    return disassemble(compiled_kernel_file(path, CompileTarget(arch, "cubin")).read_bytes())


def kernel_sass(path: Path, arch: str) -> dict[str, list[Instruction]]:
    """{kernel: its instructions}, each shared access with its wavefronts where lanes.py derives them."""
    return {name: with_wavefronts(code) for name, code in parse_kernels(disassembled(path, arch)).items()}


def _work(name: str, launch: ReferenceLaunch, causal: bool, T: int, H: int) -> Work:
    chosen = launch.causal if causal else launch.full
    products = matmul_products(name)
    skips = causal and launch.sees_mask
    d = launch.head_size
    return Work(warps=chosen.blocks * chosen.warps_per_block, array_bytes=chosen.array_bytes,
                executed_flops=attention_matmul_flops(products, H, T, d, skips),
                useful_flops=attention_matmul_flops(products, H, T, d, causal))


def kernel_bound(name: str, code: list[Instruction], res: KernelResources | None, launch: ReferenceLaunch | None,
                 gpu: GpuSpec, T: int = REFERENCE_T, H: int = REFERENCE_HEADS) -> KernelBound:
    loop = hot_loop(code)
    trip = steady_state(loop) if loop else straight_line(code)
    mix = mix_of(trip)
    registers = res.registers if res else 0
    spills = (res.spill_stores + res.spill_loads) if res else 0
    static_shared = res.shared_bytes if res else 0
    dynamic = launch.full.dynamic_shared if launch else 0
    kb = KernelBound(name, registers, static_shared + dynamic, spills, mix,
                     None if loop is None else (loop.start, loop.end), launch, trip=trip)
    if spills:
        kb.notes.append(f"spills: {res.spill_stores} bytes stored and {res.spill_loads} loaded per thread "
                        "(local memory, counted on the shared/L1 path)")
    if res is None:
        kb.notes.append("ptxas reported no resources for it")
    if launch is None:
        kb.notes.append("no reference geometry: no launcher runs it, so no bound (the SASS mix is still read)")
        return kb
    occ = occupancy(gpu, registers, static_shared + dynamic, launch.full.warps_per_block)
    kb.warps_per_sm, kb.occupancy_limit = occ.warps_per_sm, occ.limit
    if occ.blocks_per_sm == 0:
        kb.notes.append(f"a block needs {static_shared + dynamic:,} bytes of shared memory or more threads than "
                        f"the {gpu.name} gives: it cannot launch there")
        return kb
    for causal in (False, True):
        b = bound(mix, _work(name, launch, causal, T, H), gpu, occ.warps_per_sm, looped=loop is not None)
        if causal:
            kb.causal = b
        else:
            kb.full = b
    if kb.full.at_peak_because:
        b = kb.full
        where = "the tensor peak" if b.bottleneck == "tensor" and b.peak_fraction >= 0.99 else \
            f"its {b.bottleneck} pipe's ceiling"
        kb.notes.append(f"{b.tflops:.1f} TFLOP/s, {where}, only if: " + "; ".join(b.at_peak_because))
    if mix.shared_conflict_wavefronts:
        kb.notes.append(f"bank conflicts: {mix.shared_conflict_wavefronts:g} shared wavefronts a trip beyond "
                        "the bytes / 128 of its accesses (their lane addresses read from the SASS)")
    return kb


def compute_bounds(path: Path, gpu: str = "h200", only: list[str] | None = None,
                   progress: Callable[[str], None] | None = None) -> BoundReport:
    """progress: told each step (a compile takes some 15-40 s on two cores), then each kernel."""
    say = progress or (lambda line: None)
    spec = gpu_spec(gpu)
    require_bound_tools()
    say(f"compiling the kernel file for {spec.arch} with NVRTC (ptxas reports each kernel's registers)")
    resources = kernel_resources(path, spec.arch)
    say(f"disassembling the {spec.arch} cubin (cuobjdump -sass)")
    code = kernel_sass(path, spec.arch)
    say("the reference launches' geometry")
    references = reference_launches()
    launches = references.launches
    # the kernel file's own order (its catalogue's); names the source does not spell last
    source_order = list(kernel_parameters(Path(path).read_text()))
    names = sorted(code, key=lambda n: (source_order.index(n) if n in source_order else len(source_order), n))
    kernels = []
    for n, name in enumerate(names, 1):
        say(f"[{n}/{len(names)}] bounding {name}")
        kernels.append(kernel_bound(name, code[name], resources.get(name), launches.get(name), spec))
    return BoundReport(spec, Path(path), REFERENCE_T, REFERENCE_HEADS, kernels, references.failures)
