"""The TMA tensor maps a kernel that copies with cp.async.bulk.tensor takes (kernel7: K and V), each
128 bytes in device memory. The device encodes them: the CPU build with its own encoder
(cpu_runtime/tensor_map.py, the fields async_barriers.h reads), a GPU through the driver's
cuTensorMapEncodeTiled (cuda_tensor_map.py)."""

from __future__ import annotations

from andrea_cli.backends.launch.device import KernelDevice
from andrea_cli.errors import AndreaError

KV_BOX = (64, 8)  # kernel7's box: 64 keys (TC_KEYS) x 8 columns (16 bytes: one core-matrix row)


def kv_tensor_maps(dev: KernelDevice, kb, vb, rows: int, d: int) -> tuple:
    """The maps of bf16 K and V as (rows, d) matrices (rows = H_kv * S: every K/V head one after
    the other, as the kernels index them), with kernel7's box."""
    encode = getattr(dev, "tensor_map", None)
    if encode is None:
        raise AndreaError(f"the {dev.name} device encodes no TMA tensor maps: run attention_fused_kernel6 "
                          "on it (the default; variant=6 through the Python API)")
    # Fewer than 64 rows in all (S < 64): the kernel copies its one tile by hand and never uses
    # the maps, which the encoder still asks a box inside the tensor of
    box = (min(KV_BOX[0], rows), KV_BOX[1])
    return tuple(encode(x, (rows, d), box) for x in (kb, vb))
