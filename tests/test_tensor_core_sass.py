"""Proof without a GPU that attention_fused_kernel4 and the bf16 backward (dkdv_kernel2,
dq_kernel2) are tensor-core code: compiled by NVRTC for sm_80 and sm_90, their SASS (read by
cuobjdump, which runs nvdisasm: pip `nvidia-cuda-cuobjdump` and `nvidia-cuda-nvdisasm`, both in
the test extra) holds HMMA (mma.sync) and LDSM (ldmatrix) instructions and LDGSTS (cp.async); the
FP32 kernels hold none of them.
(Registers and spills of every kernel: test_kernel_compile.py.)"""

from __future__ import annotations

import pathlib
import re
import os
import shutil
import struct
import subprocess

import pytest

from andrea_cli.kernel_file import packaged_kernel_path

pytest.importorskip("cupy", reason="cupy is not installed (it brings the NVRTC bindings): pip install '.[test]'")
from cupy.cuda import nvrtc  # noqa: E402

TENSOR_CORE_KERNELS = ("attention_fused_kernel4_d64", "attention_fused_kernel4_d128",
                       "attention_fused_lse_kernel4_d64", "attention_fused_lse_kernel4_d128",
                       "attention_backward_dkdv_kernel2_d64", "attention_backward_dkdv_kernel2_d128",
                       "attention_backward_dq_kernel2_d64", "attention_backward_dq_kernel2_d128")


def find_cuobjdump() -> str | None:
    """On PATH, or in the pip package nvidia-cuda-cuobjdump (nvidia/cu*/bin/cuobjdump)."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:
        import nvidia
    except ImportError:
        return None
    for root in map(pathlib.Path, nvidia.__path__):
        for candidate in sorted(root.glob("*/bin/cuobjdump")):
            return str(candidate)
    return None


def cubin(source: str, arch: str) -> bytes:
    program = nvrtc.createProgram(source, "microgpt_cuda.cu", [], [])
    try:
        nvrtc.compileProgram(program, [f"--gpu-architecture={arch}", "--std=c++17"])
        binary = nvrtc.getCUBIN(program)
    finally:
        nvrtc.destroyProgram(program)
    # cupy's getCUBIN reads the binary like a C string and drops its last byte (a zero of the
    # program header table, which ends the file): restore the length the ELF header states
    shoff, phoff = struct.unpack_from("<QQ", binary, 0x28)[0], struct.unpack_from("<Q", binary, 0x20)[0]
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", binary, 0x36)
    end = max(shoff + shentsize * shnum, phoff + phentsize * phnum)
    return binary + b"\0" * max(0, end - len(binary))


def sass_by_kernel(tool: str, binary: bytes, tmp_path: pathlib.Path) -> dict[str, str]:
    path = tmp_path / "kernels.cubin"
    path.write_bytes(binary)
    # cuobjdump runs nvdisasm, which the pip package puts beside it
    env = dict(os.environ, PATH=f"{pathlib.Path(tool).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = subprocess.run([tool, "-sass", str(path)], capture_output=True, text=True, env=env)
    if "nvdisasm" in proc.stderr:
        pytest.skip(f"cuobjdump needs nvdisasm: pip install nvidia-cuda-nvdisasm ({proc.stderr.strip()[:120]})")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    parts = re.split(r"\n\s*Function : (\w+)\n", text)
    return dict(zip(parts[1::2], parts[2::2]))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_kernel4_is_tensor_core_code(arch, tmp_path):
    tool = find_cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump not found: pip install nvidia-cuda-cuobjdump (in the test extra)")
    sass = sass_by_kernel(tool, cubin(packaged_kernel_path().read_text(), arch), tmp_path)
    assert set(TENSOR_CORE_KERNELS) <= set(sass), sorted(sass)
    for name in TENSOR_CORE_KERNELS:
        code = sass[name]
        counts = {op: len(re.findall(rf"\b{op}\b", code)) for op in ("HMMA", "LDSM", "LDGSTS")}
        assert counts["HMMA"] >= 8 and counts["LDSM"] >= 2 and counts["LDGSTS"] >= 1, (name, counts)
        assert "HMMA.16816.F32.BF16" in code, name  # m16n8k16, fp32 accumulate, bf16 inputs
        assert re.search(r"LDSM\.16\.MT88", code), name  # ldmatrix.trans for V (dO, Q, K in the backward)
    for name in ("attention_fused_kernel2", "scores_kernel1", "attention_backward_dkdv_kernel1"):
        assert "HMMA" not in sass[name] and "LDSM" not in sass[name], name
