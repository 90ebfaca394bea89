"""Where the kernel file is, and what it holds."""

from __future__ import annotations

import re
from pathlib import Path

from andrea_cli.errors import AndreaError

KERNEL_FILE_NAME = "microgpt_cuda.cu"
# What the launchers call: an edited copy must keep every one of them (its bodies are the user's).
REQUIRED_KERNELS = ("scores_kernel1", "scale_kernel1", "mask_kernel1", "softmax_kernel1", "softmax_kernel2",
                    "av_kernel1", "attention_fused_kernel1", "attention_fused_kernel2")
_KERNEL_RE = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(')


def packaged_kernel_path() -> Path:
    """The wheel carries the file inside the package; a source checkout has it at cuda/."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "cuda" / KERNEL_FILE_NAME, here.parent / "cuda" / KERNEL_FILE_NAME):
        if candidate.is_file():
            return candidate
    raise AndreaError(f"the packaged kernel file {KERNEL_FILE_NAME} is missing: reinstall andrea (pip install .)")


def resolve_kernel_path(user_path: Path | None) -> Path:
    """--kernel FILE, checked, or the packaged file."""
    if user_path is None:
        return packaged_kernel_path()
    if not user_path.is_file():
        raise AndreaError(f"--kernel {user_path}: no such file; pass a copy of {KERNEL_FILE_NAME}")
    try:
        text = user_path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise AndreaError(f"--kernel {user_path}: cannot read it as text ({exc.__class__.__name__})") from None
    missing = [name for name in REQUIRED_KERNELS if name not in _KERNEL_RE.findall(text)]
    if missing:
        raise AndreaError(f'--kernel {user_path}: no extern "C" __global__ {", ".join(missing)} in it; '
                          f"an edited copy of {KERNEL_FILE_NAME} must keep every kernel")
    return user_path


def kernel_names(path: Path) -> list[str]:
    return _KERNEL_RE.findall(path.read_text())
