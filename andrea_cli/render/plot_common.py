"""What every PNG plot shares: matplotlib on its file-only Agg backend (an optional extra, so
imported only here and in the render/*_plot.py modules), and the --plot FILE checks."""

from __future__ import annotations

import os
from pathlib import Path

from andrea_cli.errors import AndreaError

INSTALL_HINT = 'pip install "andrea[plot]"'


def pyplot():
    try:
        import matplotlib
    except ImportError:
        raise AndreaError(f"--plot needs matplotlib, which is not installed: {INSTALL_HINT}") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def check_plot_path(path: Path) -> None:
    """Fail before any work: matplotlib missing, or a file that could not be written."""
    pyplot()
    if path.suffix.lower() != ".png":
        raise AndreaError(f"--plot {path}: the file name must end in .png")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise AndreaError(f"--plot {path}: the folder {folder} does not exist; create it first")
    if not os.access(folder, os.W_OK) or path.is_dir():
        raise AndreaError(f"--plot {path}: cannot write there; choose another file name")


def save_figure(fig, path: Path) -> None:
    """Written to a temporary file and renamed, like every other output: a failed save never
    leaves half a PNG where the user's file was."""
    plt = pyplot()
    temporary = path.with_name(f".{path.name}.tmp.png")
    try:
        fig.savefig(temporary, dpi=100)
        os.replace(temporary, path)
    finally:
        plt.close(fig)
        temporary.unlink(missing_ok=True)
