#!/usr/bin/env bash
# The one GPU check: run from the repository root on a machine with an NVIDIA GPU, where cupy,
# numpy, typer, rich and pytest are installed and nothing can be downloaded:
#     PYTHONPATH=. bash scripts/gpu-check.sh RESULTS_DIR
# It runs the tensor-core building blocks native against emulated, the gpu tests, verify on cuda,
# cuda against the CPU build, attend at T 128/1024/4096, the ANDREA-120M layer, the fused kernels
# (fp32 and bf16) at long T, the backward (grad, staged, fused and bf16; verify and bench include it
# too), a bench with 12 heads and the static bound of each kernel for this GPU (bench --bound), and writes
# RESULTS_DIR/<device>-<date>.json (device, versions, date, results) and a .log beside it.
# Without a GPU it runs the same steps on the CPU build at small sizes, to check the script itself.
set -uo pipefail
# RESULTS_DIR is taken relative to where the script is called from, the default to the repository
if [ $# -ge 1 ]; then mkdir -p "$1" && results="$(cd "$1" && pwd)"; fi
cd "$(dirname "$0")/.."
results="${results:-$PWD/bench/results}"
mkdir -p "$results"
export PYTHONPATH="${PYTHONPATH:-.}"
exec python3 scripts/gpu_check.py "$results"
