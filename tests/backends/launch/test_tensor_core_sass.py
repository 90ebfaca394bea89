"""Proof without a GPU that attention_fused_kernel4, kernel5 and the bf16 backward (dkdv_kernel2,
dq_kernel2) are tensor-core code: compiled by NVRTC for sm_80 and sm_90, their SASS (read by
cuobjdump, which runs nvdisasm: pip `nvidia-cuda-cuobjdump` and `nvidia-cuda-nvdisasm`, both in
the bound extra) holds HMMA (mma.sync) and LDSM (ldmatrix) instructions and LDGSTS (cp.async); the
FP32 kernels hold none of them.
(Registers and spills of every kernel: test_kernel_compile.py.)"""

from __future__ import annotations

import re

import pytest

from andrea_cli.bench.bound.sass import find_cuobjdump, find_nvdisasm
from andrea_cli.kernel_file import packaged_kernel_path

pytest.importorskip("cupy", reason="cupy is not installed (it brings the NVRTC bindings): pip install '.[test,bound]'")

TENSOR_CORE_KERNELS = ("attention_fused_kernel4_d64", "attention_fused_kernel4_d128",
                       "attention_fused_kernel5_d64", "attention_fused_kernel5_d128",
                       "attention_fused_lse_kernel4_d64", "attention_fused_lse_kernel4_d128",
                       "attention_backward_dkdv_kernel2_d64", "attention_backward_dkdv_kernel2_d128",
                       "attention_backward_dq_kernel2_d64", "attention_backward_dq_kernel2_d128")


def sass_by_kernel(arch: str) -> dict[str, str]:
    """The kernel file's SASS for one architecture, by kernel (andrea bench --bound's reader)."""
    from andrea_cli.bench.bound.report import disassembled

    parts = re.split(r"\n\s*Function : (\w+)\n", disassembled(packaged_kernel_path(), arch))
    return dict(zip(parts[1::2], parts[2::2]))


@pytest.mark.slow  # NVRTC compiles the whole kernel file per architecture, cuobjdump disassembles it
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_kernel4_is_tensor_core_code(arch, isolated_cache):
    if find_cuobjdump() is None or find_nvdisasm() is None:
        pytest.skip("cuobjdump/nvdisasm not found: pip install '.[test,bound]'")
    sass = sass_by_kernel(arch)
    assert set(TENSOR_CORE_KERNELS) <= set(sass), sorted(sass)
    for name in TENSOR_CORE_KERNELS:
        code = sass[name]
        counts = {op: len(re.findall(rf"\b{op}\b", code)) for op in ("HMMA", "LDSM", "LDGSTS")}
        assert counts["HMMA"] >= 8 and counts["LDSM"] >= 2 and counts["LDGSTS"] >= 1, (name, counts)
        assert "HMMA.16816.F32.BF16" in code, name  # m16n8k16, fp32 accumulate, bf16 inputs
        assert re.search(r"LDSM\.16\.MT88", code), name  # ldmatrix.trans for V (dO, Q, K in the backward)
    for name in ("attention_fused_kernel2", "scores_kernel1", "attention_backward_dkdv_kernel1"):
        assert "HMMA" not in sass[name] and "LDSM" not in sass[name], name
