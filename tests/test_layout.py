"""The package's rooms, and how the sizes the Python launchers share with the kernel file are read."""

from pathlib import Path

import andrea_cli
from andrea_cli.kernel_file import integer_defines, launch_bounds

# The modules and packages at andrea_cli/'s root. A new one here is a conscious choice: most new
# code belongs in a room (commands/, runs/, verification/, backends/, bench/, render/).
ROOT = {
    "__init__", "__main__", "api", "cli",  # the two doors: Python and the command line
    "device",  # cupy-shaped device arrays for andrea_cli.RawModule (one address for host and kernels)
    "commands", "runs", "verification", "bench", "render", "backends",  # the rooms
    # the spec: the equation in float64, its inputs, outputs, statistics, errors and defaults
    "reference", "reference_backward", "masks", "stats", "inputs", "layer_inputs", "outputs",
    "overflow", "errors", "defaults", "kernel_file",
}


def test_root_modules_are_the_listed_ones():
    here = Path(andrea_cli.__file__).parent
    found = {p.stem for p in here.glob("*.py")} | {p.name for p in here.iterdir()
                                                    if p.is_dir() and (p / "__init__.py").is_file()}
    assert found == ROOT, f"new at the root: {sorted(found - ROOT)}; gone: {sorted(ROOT - found)}"


def test_integer_defines_evaluate_names_and_skip_the_rest():
    text = ("#define A 4  // four\n#define B (16 * A)\n#define C __int_as_float(0x7f800000)\n"
            "#if X\n#define D 1\n#else\n#define D 0\n#endif\n#define E 1.5f\n")
    assert integer_defines(text) == {"A": 4, "B": 64, "D": 1}


def test_launch_bounds_are_read_before_or_after_void():
    text = ("#define W 4\nextern \"C\" __global__ void __launch_bounds__(256, 2) a(int n) {}\n"
            "extern \"C\" __global__ void __launch_bounds__(32 * W)\nb(int n) {}\n"
            "__global__ __launch_bounds__(64) void c(int n) {}\nextern \"C\" __global__ void d(int n) {}\n")
    assert launch_bounds(text) == {"a": 256, "b": 128, "c": 64}


def test_api_names_are_the_functions():
    assert callable(andrea_cli.verify) and andrea_cli.verify.__module__ == "andrea_cli.api"
    assert andrea_cli.AndreaError.__module__ == "andrea_cli.errors"
