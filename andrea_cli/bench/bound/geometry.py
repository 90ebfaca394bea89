"""Where each kernel's launch geometry comes from: the launchers themselves, run against a
device that records instead of launching. Every grid, block, shared-memory size and argument
below is the one `andrea attend`/`grad` would launch at the reference shape; nothing here
restates a launcher's arithmetic, so a new tile size or a new variant shows up on its own."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from andrea_cli.backends.launch.backward import launch_fused_backward, launch_fused_lse, launch_staged_backward, \
    lse_variants
from andrea_cli.backends.launch.decode import VARIANT as CACHE_PRECISIONS, append, decode, new_cache
from andrea_cli.backends.launch.fused import fused_variants, launch_fused
from andrea_cli.backends.launch.backward_bf16 import launch_backward_bf16, launch_fused_lse_bf16
from andrea_cli.backends.launch.fused_bf16 import BF16_DIMS, BF16_KERNELS, convert_inputs, launch_fused_bf16, launch_to_bf16
from andrea_cli.backends.launch.staged import ALL_PLANS, allocate_stages, launch_stages
from andrea_cli.errors import first_line
from andrea_cli.masks import MaskSpec, mask_array
from andrea_cli.scale import course_scale

REFERENCE_T = 4096
REFERENCE_HEADS = 12  # GPT-2 small: 12 heads of 64
HEAD_SIZES = (64, 128)


@dataclass(frozen=True)
class Placeholder:
    """An array that is never allocated: its shape and dtype are all a launch needs to record."""

    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * np.dtype(self.dtype).itemsize


@dataclass(frozen=True)
class Launch:
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_shared: int
    args: tuple = field(repr=False)

    @property
    def blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def warps_per_block(self) -> int:
        return -(-self.threads_per_block // 32)

    @property
    def array_bytes(self) -> int:
        """Every array argument once: what the launch must at least read or write in memory."""
        return sum(a.nbytes for a in self.args if isinstance(a, Placeholder))

    def scalars(self) -> tuple:
        return tuple(a.item() if hasattr(a, "item") else a for a in self.args if not isinstance(a, Placeholder))


def _dim3(x) -> tuple[int, int, int]:
    x = tuple(int(v) for v in x)
    return x + (1,) * (3 - len(x))


class RecordingDevice:
    """A KernelDevice whose kernels record their launch and do nothing."""

    name = "recording"
    warmup_runs = 0

    def __init__(self) -> None:
        self.launches: list[Launch] = []

    def get_function(self, name: str):
        def record(grid, block, args, shared_mem: int = 0) -> None:
            self.launches.append(Launch(name, _dim3(grid), _dim3(block), int(shared_mem), tuple(args)))

        return record

    def empty(self, shape, dtype=np.float32) -> Placeholder:
        return Placeholder(tuple(shape), np.dtype(dtype))

    def to_device(self, a) -> Placeholder:
        """A host array stands for the device copy it would become: its bytes count in the launch."""
        return Placeholder(tuple(a.shape), np.dtype(a.dtype))

    def to_host(self, a):
        return a

    def tensor_map(self, x, shape, box) -> Placeholder:
        """A TMA tensor map (kernel7's K and V): 128 bytes in device memory."""
        return Placeholder((128,), np.dtype(np.uint8))

    def clock(self):
        raise NotImplementedError("a recording device times nothing")


def _paths(dev: RecordingDevice, T: int, H: int, d: int, mask: MaskSpec):
    """Every path the launchers offer at one shape, by name: the staged plans, the fused
    variants, the tensor-core kernels with their conversions, the staged and fused backward, the
    bf16 backward with its forward."""
    q, k, v, d_out, out = (dev.empty((H, T, d)) for _ in range(5))

    def staged():
        for plan in ALL_PLANS:
            buf = allocate_stages(dev, H, T, d, mask=mask, scaled=True)
            launch_stages(dev, q, k, v, buf, T=T, d_k=d, d_v=d, H=H, mask=mask, scale=course_scale(d), plan=plan)

    def fused():
        for variant in fused_variants(d, d):
            launch_fused(dev, q, k, v, out, H, T, d, d, mask=mask, scale=course_scale(d), variant=variant)

    def tensor_cores():
        if d in BF16_DIMS:
            qb, kb, vb = convert_inputs(dev, q, k, v, (H, T, d), course_scale(d))
            for variant in BF16_KERNELS:  # kernel4 .. kernel7
                launch_fused_bf16(dev, qb, kb, vb, out, H, T, d, mask=mask, variant=variant)

    def staged_backward():
        for gemm_variant in sorted({plan.gemm_variant for plan in ALL_PLANS}):
            launch_staged_backward(dev, dev.empty((H, T, T)), q, k, v, d_out, dev.empty((H, T, T)),
                                   dev.empty((H, T, T)), dev.empty((H, T, d)), dev.empty((H, T, d)),
                                   dev.empty((H, T, d)), T=T, d_k=d, d_v=d, H=H, mask=mask, scale=course_scale(d),
                                   gemm_variant=gemm_variant)

    def fused_backward():
        lse, delta = dev.empty((H, T)), dev.empty((H, T))
        for variant in lse_variants(d, d):
            launch_fused_lse(dev, q, k, v, out, lse, T=T, d_k=d, d_v=d, H=H, mask=mask, scale=course_scale(d),
                             variant=variant)
        launch_fused_backward(dev, q, k, v, out, d_out, lse, delta, dev.empty((H, T, d)), dev.empty((H, T, d)),
                              dev.empty((H, T, d)), T=T, d_k=d, d_v=d, H=H, mask=mask, scale=course_scale(d))

    def bf16_backward():
        if d in BF16_DIMS:
            qb, kb, vb = convert_inputs(dev, q, k, v, (H, T, d), course_scale(d))
            dob, lse, delta = dev.empty((H, T, d), np.uint16), dev.empty((H, T)), dev.empty((H, T))
            launch_to_bf16(dev, d_out, dob, H * T * d, 1.0)
            launch_fused_lse_bf16(dev, qb, kb, vb, out, lse, H=H, T=T, d=d, mask=mask)
            launch_backward_bf16(dev, qb, kb, vb, dob, out, d_out, lse, delta, dev.empty((H, T, d)),
                                 dev.empty((H, T, d)), dev.empty((H, T, d)), H=H, T=T, d=d, mask=mask, scale=course_scale(d))

    def mask_array_step():  # the staged path with a mask array (mask_kernel2): a bias of zeros
        spec = mask_array(np.zeros((T, T), np.float32), T, T)
        buf = allocate_stages(dev, H, T, d, mask=spec, scaled=True)
        launch_stages(dev, q, k, v, buf, T=T, d_k=d, d_v=d, H=H, mask=spec, scale=course_scale(d),
                      dbias=dev.empty((1, T, T)))

    def decode_step():  # the last step of generating T tokens: one query per head, T cached keys
        for precision in CACHE_PRECISIONS:
            cache = new_cache(dev, H, T, d, d, precision)
            append(dev, cache, dev.empty((H, d)), dev.empty((H, d)), T - 1)
            decode(dev, cache, dev.empty((H, d)), T, H, mask=mask, scale=course_scale(d))

    return {"staged": staged, "fused": fused, "tensor-core": tensor_cores, "staged backward": staged_backward,
            "fused backward": fused_backward, "bf16 backward": bf16_backward, "mask array": mask_array_step,
            "decode": decode_step}


@dataclass(frozen=True)
class ReferenceLaunch:
    """One kernel's launch at the reference shape, without and with the causal mask."""

    head_size: int
    full: Launch
    causal: Launch

    @property
    def sees_mask(self) -> bool:
        """The launcher hands the kernel the mask (its scalars differ): it can skip what is hidden."""
        return self.full.scalars() != self.causal.scalars()


@dataclass
class References:
    launches: dict[str, ReferenceLaunch]
    failures: list[str]  # launcher paths that would not run at the reference shape, and why


def reference_launches(T: int = REFERENCE_T, H: int = REFERENCE_HEADS) -> References:
    """{kernel: its first launch at head size 64 (128 for a kernel only that size runs)}. A path
    whose launcher refuses the reference shape is named in `failures`; the others still count."""
    found: dict[str, ReferenceLaunch] = {}
    failures: list[str] = []
    for d in HEAD_SIZES:
        by_mask = []
        for mask in (MaskSpec("none"), MaskSpec("causal")):
            dev = RecordingDevice()
            for label, run in _paths(dev, T, H, d, mask).items():
                try:
                    run()
                except Exception as exc:  # a launcher changed under us: its kernels get no geometry, said so
                    why = f"the {label} launcher at d {d}, mask {mask}: {first_line(exc)}"
                    if why not in failures:
                        failures.append(why)
            first: dict[str, Launch] = {}
            for launch in dev.launches:
                first.setdefault(launch.kernel, launch)
            by_mask.append(first)
        full, causal = by_mask
        for name in causal:  # mask_kernel1 runs only under a mask: its "no mask" launch is the causal one
            if name not in found:
                found[name] = ReferenceLaunch(d, full.get(name, causal[name]), causal[name])
    return References(found, failures)
