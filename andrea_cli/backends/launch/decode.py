"""Launch one step of generation (the kernel file's DECODE section): the step's k and v appended to
the KV cache, then flash-decoding over the cache (one block per slice of keys and head) and the
merge of the slices by their logsumexps. Drives cupy or the CPU build through the same
`KernelDevice` as the other launchers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from andrea_cli.backends.launch.catalogue import family, kernel
from andrea_cli.backends.launch.device import KernelDevice, StageClock, cdiv
from andrea_cli.backends.launch.kernel_spec import define
from andrea_cli.errors import AndreaError
from andrea_cli.masks import MaskSpec
from andrea_cli.scale import Scale

APPEND = family("decode", "append")  # {1: float32 cache, 2: bf16 cache}
DECODE = family("decode", "decode")  # {1: reads a float32 cache, 2: a bf16 one}
MERGE = kernel("decode", "merge")
VARIANT = {"fp32": 1, "bf16": 2}  # the cache's precision -> the kernels' variant
DECODE_MAX_D = define("DECODE_MAX_D")  # each lane holds d / DECODE_LANES columns of q and of the output
# The online softmaxes of a block (one per DECODE_LANES lanes), merged at its end: what the
# tolerances count rescales and merges over
STREAMS = DECODE[1].block_threads() // define("DECODE_LANES")
# Slices: enough blocks that every SM of the largest GPU andrea targets streams part of the cache
# (two per SM of an H100's 132; flash-decoding's rule: fill the machine, then stop splitting, as
# each slice adds a partial row to merge), but no slice under MIN_SLICE_KEYS keys (its 4 warps would
# idle through the merge in shared memory for a handful of keys)
TARGET_BLOCKS = 264
MIN_SLICE_KEYS = 64


def check_decode_shape(d_k: int, d_v: int, precision: str) -> None:
    if precision not in VARIANT:
        raise AndreaError(f"--precision {precision!r} is not one of {', '.join(VARIANT)}: e.g. --precision bf16")
    for flag, d in (("--d-k", d_k), ("--d-v", d_v)):
        if d > DECODE_MAX_D:
            raise AndreaError(f"the decode kernel takes {flag} <= {DECODE_MAX_D} (got {d}): each lane holds "
                              f"d / {define('DECODE_LANES')} columns; use a smaller {flag}")
        if precision == "bf16" and d % 2:
            raise AndreaError(f"the bf16 KV cache stores two values a word: {flag} must be even (got {d}), "
                              "or use --precision fp32")


def slices(keys_seen: int, heads: int) -> tuple[int, int]:
    """(slices, keys per slice) for a step whose query sees keys_seen keys: at most TARGET_BLOCKS
    blocks over all heads, at least MIN_SLICE_KEYS keys a slice, every slice holding a key."""
    n = max(1, min(cdiv(TARGET_BLOCKS, heads), keys_seen // MIN_SLICE_KEYS))
    per_slice = cdiv(keys_seen, n)
    return cdiv(keys_seen, per_slice), per_slice


@dataclass
class KVCache:
    """The cache on the device: (H_kv, capacity, d) float32, or bf16 two to a uint32 word."""

    k: Any
    v: Any
    capacity: int
    heads: int  # K/V heads
    d_k: int
    d_v: int
    precision: str

    @property
    def bytes_per_value(self) -> int:
        return 2 if self.precision == "bf16" else 4

    def bytes_read(self, keys: int) -> int:
        """What a step reads of the cache when its query sees `keys` keys."""
        return self.heads * keys * (self.d_k + self.d_v) * self.bytes_per_value


def new_cache(dev: KernelDevice, heads: int, capacity: int, d_k: int, d_v: int, precision: str = "fp32") -> KVCache:
    check_decode_shape(d_k, d_v, precision)
    if precision == "bf16":
        k = dev.empty((heads, capacity, d_k // 2), dtype=np.uint32)
        v = dev.empty((heads, capacity, d_v // 2), dtype=np.uint32)
    else:
        k, v = dev.empty((heads, capacity, d_k)), dev.empty((heads, capacity, d_v))
    return KVCache(k, v, capacity, heads, d_k, d_v, precision)


def append(dev: KernelDevice, cache: KVCache, k_new, v_new, position: int) -> dict[str, str]:
    """k_new (H_kv, d_k), v_new (H_kv, d_v), already on the device, into row `position`."""
    if not 0 <= position < cache.capacity:
        raise AndreaError(f"position {position} is outside the cache's {cache.capacity} rows")
    k = APPEND[VARIANT[cache.precision]]
    dev.get_function(k.entry())((1, 1, cache.heads), (k.block_threads(), 1, 1),
                                (k_new, v_new, cache.k, cache.v, np.int32(position), np.int32(cache.capacity),
                                 np.int32(cache.d_k), np.int32(cache.d_v)))
    return {"append": k.entry()}


@dataclass
class DecodeStep:
    output: Any  # (H, d_v) on the device
    lse: Any  # (H,) each head's logsumexp over the keys it saw
    slices: int
    keys_per_slice: int
    keys: int  # the cached keys the query saw (all `length` of them, or a window's last)
    kernels: dict[str, str]


def decode(dev: KernelDevice, cache: KVCache, q, length: int, heads: int, *, mask: MaskSpec, scale: Scale,
           clock: StageClock | None = None) -> DecodeStep:
    """q (H, d_k) on the device, the newest position's query, against the cache's first `length`
    rows; H a multiple of the cache's K/V heads (query head h reads K/V head h / (H / H_kv))."""
    if heads % cache.heads:
        raise AndreaError(f"{heads} query heads cannot share {cache.heads} K/V heads: the query heads must be "
                          "a multiple of the K/V heads")
    if not 1 <= length <= cache.capacity:
        raise AndreaError(f"a step reads 1 to {cache.capacity} cached keys (got {length})")
    if mask.right:
        raise AndreaError(f"--mask {mask}: a decode step's query is the newest position, with no later key "
                          "to see: use window:W or window:L,0")
    keys = mask.decode_keys(length)  # the keys the Mask shows the query: its window's, and the sinks
    n, per_slice = slices(keys, heads)
    part_out = dev.empty((heads, n, cache.d_v))
    part_lse = dev.empty((heads, n))
    out, lse = dev.empty((heads, cache.d_v)), dev.empty((heads,))
    k, merge = DECODE[VARIANT[cache.precision]], MERGE
    if clock:
        clock.start("decode")
    dev.get_function(k.entry())(
        (n, 1, heads), (k.block_threads(), 1, 1),
        (q, cache.k, cache.v, part_out, part_lse, np.int32(length), np.int32(cache.capacity), np.int32(cache.d_k),
         np.int32(cache.d_v), np.float32(scale.factor), *mask.kernel_args(heads=heads),
         np.int32(heads // cache.heads), np.int32(per_slice)))
    if clock:
        clock.stop("decode")
        clock.start("merge")
    dev.get_function(merge.entry())((1, 1, heads), (merge.block_threads(), 1, 1),
                                    (part_out, part_lse, out, lse, np.int32(n), np.int32(cache.d_v)))
    if clock:
        clock.stop("merge")
    return DecodeStep(out, lse, n, per_slice, keys, {"decode": k.entry(), "merge": merge.entry()})
