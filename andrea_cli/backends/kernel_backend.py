"""What the cuda and cpu backends share: the kernel file, loaded once per process, launched
through a KernelDevice by the staged and fused launchers. A run's scale (True, False or a factor
given) is resolved here, where it enters, into the Scale every launcher reads."""

from __future__ import annotations

import time
from pathlib import Path

from andrea_cli.backends.base import StageOutputs
from andrea_cli.backends.launch.backward import BackwardOutputs, run_fused_backward, run_staged_backward
from andrea_cli.backends.launch.backward_bf16 import run_backward_bf16
from andrea_cli.backends.launch.device import KernelDevice
from andrea_cli.backends.launch.fused import FusedOutputs, run_fused
from andrea_cli.backends.launch.fused_bf16 import run_fused_bf16
from andrea_cli.backends.launch.staged import DEFAULT_PLAN, LaunchPlan, run_staged
from andrea_cli.errors import AndreaError
from andrea_cli.masks import MaskSpec
from andrea_cli.scale import resolve_scale

ARRAY_STAGED_ONLY = "a mask array runs the fp32 kernels (staged, or fused kernels 1-3): drop --precision bf16"
NO_ARRAY_BACKWARD = ("a mask array has no backward kernel yet: the backward takes --mask (causal, none, "
                     "window:W, window:L,R, sinks:N,window:W, alibi)")


def staged_only(mask: MaskSpec, what: str = ARRAY_STAGED_ONLY) -> None:
    """The staged forward (mask_kernel2) and the fused fp32 kernels read a mask array; the bf16
    and backward kernels take the Mask's fields alone and refuse one, in one line."""
    if mask.is_array:
        raise AndreaError(what)


class KernelFileBackend:
    name = "kernel file"

    def __init__(self, kernel_path: Path, plan: LaunchPlan = DEFAULT_PLAN):
        self.kernel_path = Path(kernel_path)
        self.plan = plan
        self._device: KernelDevice | None = None
        self._load_ms = 0.0

    def _load(self) -> KernelDevice:
        """Compile (or fetch from a cache) the kernel file for this side."""
        raise NotImplementedError

    def device(self) -> KernelDevice:
        if self._device is None:
            start = time.perf_counter()
            self._device = self._load()
            self._load_ms = (time.perf_counter() - start) * 1e3
        return self._device

    def attention(self, q, k, v, *, mask: MaskSpec, scaled: bool, plan: LaunchPlan | None = None) -> StageOutputs:
        result = run_staged(self.device(), q, k, v, mask=mask, scale=resolve_scale(q.shape[-1], scaled),
                            plan=plan or self.plan)
        result.load_ms = self._load_ms
        return result

    def attention_fused(self, q, k, v, *, mask: MaskSpec, scaled: bool, variant: int | None = None,
                        precision: str = "fp32") -> FusedOutputs:
        """precision fp32: the FP32 fused kernels (variant picks one); bf16: the tensor-core kernels
        (variant 4 to 7; the default the device's fastest: 6 on sm_90, else 5)."""
        scale = resolve_scale(q.shape[-1], scaled)
        if precision == "bf16":
            staged_only(mask)
            result = run_fused_bf16(self.device(), q, k, v, mask=mask, scale=scale, variant=variant)
        else:
            result = run_fused(self.device(), q, k, v, mask=mask, scale=scale, variant=variant)
        result.load_ms = self._load_ms
        return result

    def attention_backward(self, q, k, v, d_out, *, mask: MaskSpec, scaled: bool,
                           plan: LaunchPlan | None = None) -> BackwardOutputs:
        """The staged forward, then dv, dp, ds, dq, dk (plan: the forward's kernels and geometry, and
        the backward products' GEMM variant): every intermediate comes back."""
        staged_only(mask, NO_ARRAY_BACKWARD)
        result = run_staged_backward(self.device(), q, k, v, d_out, mask=mask, scale=resolve_scale(q.shape[-1], scaled),
                                     plan=plan or self.plan)
        result.load_ms = self._load_ms
        return result

    def attention_backward_fused(self, q, k, v, d_out, *, mask: MaskSpec, scaled: bool,
                                 variant: int | None = None, precision: str = "fp32") -> BackwardOutputs:
        """The fused forward with its logsumexp, then the fused backward (variant: the forward's);
        precision bf16: the tensor-core forward and backward instead."""
        staged_only(mask, NO_ARRAY_BACKWARD)
        scale = resolve_scale(q.shape[-1], scaled)
        if precision == "bf16":
            result = run_backward_bf16(self.device(), q, k, v, d_out, mask=mask, scale=scale)
        else:
            result = run_fused_backward(self.device(), q, k, v, d_out, mask=mask, scale=scale, variant=variant)
        result.load_ms = self._load_ms
        return result
