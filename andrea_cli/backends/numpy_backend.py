"""The NumPy path as a backend: the reference stages, timed, results returned as float32."""

from __future__ import annotations

import platform
import time

import numpy as np

from andrea_cli import reference, reference_backward as rb
from andrea_cli.backends.base import Availability, StageOutputs
from andrea_cli.backends.launch.backward import BackwardOutputs
from andrea_cli.masks import MaskSpec
from andrea_cli.scale import resolve_scale


class NumpyBackend:
    name = "numpy"

    def available(self) -> Availability:
        return Availability(True)

    def device_name(self) -> str:
        return f"CPU ({platform.machine() or 'unknown'}), NumPy {np.__version__}, float64 math"

    def attention(self, q, k, v, *, mask: MaskSpec, scaled: bool) -> StageOutputs:
        timings: dict[str, float] = {}

        def timed(stage, fn, *args):
            start = time.perf_counter()
            result = fn(*args)
            timings[stage] = (time.perf_counter() - start) * 1e3
            return result

        s = timed("scores", reference.scores, q, k)
        s_scaled = timed("scale", reference.scale, s, q.shape[-1], scaled) if scaled else s
        s_masked = timed("mask", reference.mask, s_scaled, mask) if mask.kind != "none" else s_scaled
        p = timed("softmax", reference.softmax, s_masked)
        out = timed("av", reference.weighted_sum, p, v)
        timings["total"] = sum(timings.values())
        # The report's dtype, as the kernels give; a stage that did not run is its input, converted once.
        converted: dict[int, np.ndarray] = {}

        def f32(a: np.ndarray) -> np.ndarray:
            if id(a) not in converted:
                converted[id(a)] = a.astype(np.float32)
            return converted[id(a)]

        return StageOutputs(f32(s), f32(s_scaled), f32(s_masked), f32(p), f32(out), timings)

    def attention_backward(self, q, k, v, d_out, *, mask: MaskSpec, scaled: bool) -> BackwardOutputs:
        """The float64 backward, stage by stage as the staged kernels run it, results as float32."""
        timings: dict[str, float] = {}

        def timed(stage, fn, *args):
            start = time.perf_counter()
            result = fn(*args)
            timings[stage] = (time.perf_counter() - start) * 1e3
            return result

        factor = resolve_scale(q.shape[-1], scaled).factor  # resolved once, where the run enters
        p = timed("forward", rb.forward_weights, q, k, mask, scaled)
        dv = timed("dv", rb.value_gradient, p, d_out, k.shape[0])
        dp = timed("dp", rb.weight_gradient, d_out, v)
        ds = timed("ds", rb.softmax_backward, p, dp)
        dq = timed("dq", rb.query_gradient, ds, k, factor)
        dk = timed("dk", rb.key_gradient, ds, q, factor, k.shape[0])
        timings["total"] = sum(timings.values())
        out = reference.weighted_sum(p, v)  # the forward's output, untimed: the layer's W_O needs it
        dq, dk, dv, dp, ds, p, out = (a.astype(np.float32) for a in (dq, dk, dv, dp, ds, p, out))
        return BackwardOutputs(dq, dk, dv, timings, d_weights=dp, d_scores=ds, weights=p, output=out)
