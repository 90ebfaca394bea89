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


def overlap_in_hot_loop(path) -> dict[str, tuple[bool, bool]]:
    """{kernel6 entry point: (a WARPGROUP.DEPBAR.LE gsb0, 0x1 in its hot loop, a wait for no group
    in flight after the loop's last MUFU.EX2: P·V's own)}: sm_90a SASS, the hot loop as bench
    --bound picks it. (The first tile's wait_group 0, on the path without a P·V, comes earlier.)"""
    from andrea_cli.bench.bound.report import kernel_sass
    from andrea_cli.bench.bound.sass import hot_loop

    code = kernel_sass(path, "sm_90a")
    found = {}
    for d in (64, 128):
        body = hot_loop(code[f"attention_fused_kernel6_d{d}"]).body
        waits = [(i.address, i.operands.replace(" ", "")) for i in body if i.opcode == "WARPGROUP.DEPBAR.LE"]
        last_exp = max(i.address for i in body if i.opcode == "MUFU.EX2")
        found[f"attention_fused_kernel6_d{d}"] = (any(w == "gsb0,0x1" for _, w in waits),
                                                  any(a > last_exp for a, w in waits if w == "gsb0,0x0"))
    return found


@pytest.mark.slow  # NVRTC compiles the kernel file for sm_90a, cuobjdump disassembles it
def test_kernel6_keeps_a_wgmma_group_in_flight_across_its_softmax(isolated_cache, tmp_path):
    # issue 34: S(n) and P(n-1)·V(n-1) issued together, S waited for alone (wait_group 1), and the
    # P·V's own wait (wait_group 0) after the softmax's last exponential: ptxas hoists it to just
    # after the first wait when P's conversions share the softmax's basic block
    if find_cuobjdump() is None or find_nvdisasm() is None:
        pytest.skip("cuobjdump/nvdisasm not found: pip install '.[test,bound]'")
    for name, (in_flight, not_hoisted) in overlap_in_hot_loop(packaged_kernel_path()).items():
        assert in_flight and not_hoisted, (name, in_flight, not_hoisted)
    # the check can fail: with P packed in the softmax's block, the wait<0> comes up before it
    source = packaged_kernel_path().read_text()
    packed_apart = ("        if (n + 1 < n_tiles) {\n            pack_p();\n        } else {  // the last tile: the "
                    "epilogue packs it; both paths leave no wgmma in flight\n            wgmma_wait<0>();\n"
                    "#pragma unroll\n            for (int i = 0; i < D / 2; ++i) wgmma_hold(acc[i]);\n        }\n")
    assert source.count(packed_apart) == 1, "kernel6's pack moved: update this broken copy"
    broken = tmp_path / "microgpt_cuda.cu"
    broken.write_text(source.replace(packed_apart, "        pack_p();\n"))
    assert not all(not_hoisted for _, not_hoisted in overlap_in_hot_loop(broken).values())
