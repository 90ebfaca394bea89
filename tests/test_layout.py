"""The package's rooms, and the API's names. (How the kernel file is read: test_kernel_file.py.)"""

from pathlib import Path

import andrea_cli

# The modules and packages at andrea_cli/'s root. A new one here is a conscious choice: most new
# code belongs in a room (commands/, runs/, verification/, backends/, bench/, render/).
ROOT = {
    "__init__", "__main__", "api", "cli",  # the two doors: Python and the command line
    "device",  # cupy-shaped device arrays for andrea_cli.RawModule (one address for host and kernels)
    "commands", "runs", "verification", "bench", "render", "backends",  # the rooms
    # the spec: the equation in float64, its inputs, outputs, statistics, errors and defaults
    "reference", "reference_backward", "masks", "scale", "stats", "inputs", "layer_inputs", "outputs",
    "overflow", "errors", "defaults", "kernel_file",
    # torch's SDPA: its float64 spec, its arguments checked, the array types it takes and gives back
    "reference_sdpa", "sdpa_inputs", "array_types",
}


def test_root_modules_are_the_listed_ones():
    here = Path(andrea_cli.__file__).parent
    found = {p.stem for p in here.glob("*.py")} | {p.name for p in here.iterdir()
                                                    if p.is_dir() and (p / "__init__.py").is_file()}
    assert found == ROOT, f"new at the root: {sorted(found - ROOT)}; gone: {sorted(ROOT - found)}"


def test_api_names_are_the_functions():
    assert callable(andrea_cli.verify) and andrea_cli.verify.__module__ == "andrea_cli.api"
    assert andrea_cli.AndreaError.__module__ == "andrea_cli.errors"
