"""Where andrea keeps what it compiles (the CPU build's libraries, the GPU's cubins):
$ANDREA_CACHE_DIR, else $XDG_CACHE_HOME/andrea, else ~/.cache/andrea."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    if os.environ.get("ANDREA_CACHE_DIR"):
        return Path(os.environ["ANDREA_CACHE_DIR"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "andrea"
    return Path.home() / ".cache" / "andrea"
