"""Where the kernel file is, and what it holds."""

from __future__ import annotations

import re
from pathlib import Path

from andrea_cli.errors import AndreaError

KERNEL_FILE_NAME = "microgpt_cuda.cu"
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
    if not _KERNEL_RE.search(text):
        raise AndreaError(f'--kernel {user_path}: no extern "C" __global__ kernel in it; pass a copy of {KERNEL_FILE_NAME}')
    return user_path


def kernel_names(path: Path) -> list[str]:
    return _KERNEL_RE.findall(path.read_text())
