"""The host side of TMA on the CPU build: a tensor map with cuTensorMapEncodeTiled's fields (global
address, dims, strides, box, element size, swizzle), checked as the driver checks them, in the
128-byte layout cuda/cpu_runtime/async_barriers.h reads (TensorMapFields). A kernel takes it as a
pointer to the 128 bytes (a tensor map in global memory)."""

from __future__ import annotations

import numpy as np

from andrea_cli.backends.cpu_runtime.errors import CpuRuntimeError

MAGIC = 0x50414D54  # "TMAP", kTensorMapMagic
SWIZZLES = (0, 32, 64, 128)  # CU_TENSOR_MAP_SWIZZLE_NONE, _32B, _64B, _128B: the span in bytes

FIELDS = np.dtype([("magic", "<u4"), ("rank", "<u4"), ("elem_bytes", "<u4"), ("swizzle", "<u4"),
                   ("base", "<u8"), ("dims", "<u8", 5), ("strides", "<u8", 4), ("box", "<u4", 5),
                   ("pad", "<u4", 3)])
assert FIELDS.itemsize == 128


def encode_tiled(tensor: np.ndarray, box: tuple[int, ...], swizzle: int = 0) -> np.ndarray:
    """cuTensorMapEncodeTiled for `tensor` (C order; box innermost last, like its shape): 128 bytes.
    The array must stay alive and in place while kernels use the map (it holds its address); for the
    CPU build's launch worker, allocate it with guarded_memory.guarded_empty/guarded_copy."""
    rank, eb = tensor.ndim, tensor.itemsize
    if not 1 <= rank <= 5:
        raise CpuRuntimeError(f"encode_tiled: a tensor of rank {rank}; TMA takes rank 1 to 5")
    if len(box) != rank:
        raise CpuRuntimeError(f"encode_tiled: box {box} has {len(box)} dims for a tensor of rank {rank}")
    if eb not in (1, 2, 4, 8):
        raise CpuRuntimeError(f"encode_tiled: element size {eb} bytes; TMA takes 1, 2, 4 or 8")
    if swizzle not in SWIZZLES:
        raise CpuRuntimeError(f"encode_tiled: swizzle {swizzle}; use one of {SWIZZLES} (bytes)")
    if tensor.ctypes.data % 16:
        raise CpuRuntimeError("encode_tiled: the tensor's address is not 16-byte aligned")
    dims, strides = tensor.shape[::-1], tensor.strides[::-1]  # innermost first, as the driver wants
    if strides[0] != eb:
        raise CpuRuntimeError("encode_tiled: the innermost dimension must be contiguous")
    for s in strides[1:]:
        if s % 16 or s >= 1 << 40:
            raise CpuRuntimeError(f"encode_tiled: stride {s} bytes; strides must be multiples of 16 below 2^40")
    inner = box[-1] * eb
    for b, d in zip(box[::-1], dims):
        if not 1 <= b <= 256 or b > d:
            raise CpuRuntimeError(f"encode_tiled: box {box} for shape {tensor.shape}: each box dim 1..256 and "
                                  "within the tensor")
    if inner % 16:
        raise CpuRuntimeError(f"encode_tiled: the box's inner dimension is {inner} bytes; it must be a multiple of 16")
    if swizzle and inner > swizzle:
        raise CpuRuntimeError(f"encode_tiled: the box's inner dimension is {inner} bytes, more than the "
                              f"{swizzle}-byte swizzle span")
    m = np.zeros((), FIELDS)
    m["magic"], m["rank"], m["elem_bytes"], m["swizzle"] = MAGIC, rank, eb, swizzle
    m["base"] = tensor.ctypes.data
    m["dims"][:rank] = dims
    m["strides"][:rank - 1] = strides[1:]
    m["box"][:rank] = box[::-1]
    return np.frombuffer(m.tobytes(), np.uint8).copy()


def swizzled_offset(offset: int, swizzle: int) -> int:
    """Where byte `offset` of a box lands in shared memory: CUTLASS's Swizzle<B, 4, 3> for the 32,
    64 and 128-byte modes (B = 1, 2, 3), the identity without swizzle."""
    b = {0: 0, 32: 1, 64: 2, 128: 3}[swizzle]
    return offset ^ (((offset >> 7) & ((1 << b) - 1)) << 4)
