#!/usr/bin/env bash
# The one GPU check: run from the repository root on a machine with an NVIDIA GPU, where cupy,
# numpy, typer, rich and pytest are installed and nothing can be downloaded:
#     PYTHONPATH=. bash scripts/gpu-check.sh RESULTS_DIR
# It runs the tensor-core building blocks native against emulated, then the parity step (before
# verify: it is what a lent GPU is for, and bench checks every row it times against float64):
# issue 22's GPU targets, one bench at T 16,384, 12 heads, d 64 and 128, causal and not, of the
# default bf16 kernel (kernel6 on sm_90, else kernel5) and every tensor-core kernel by name
# (kernel4, kernel5, kernel6, kernel7 through its TMA tensor maps) beside torch SDPA in bf16 pinned
# to its FlashAttention backend, pinned to cuDNN and left to choose; the default's TFLOP/s over
# FlashAttention-2's published H100 figures (target >= 0.9, andrea_cli/bench/anchors.py) and over
# the flash backend's measured in the same run (target >= 1.0), cuDNN's beside, the kernels and
# backends ranked fastest first at each point, with torch's, CUDA's and cuDNN's versions and the
# backend SDPA chose (the summary's "parity"). Then verify on cuda,
# the gpu tests, cuda against the CPU build, attend at T 128/1024/4096, the ANDREA-120M layer, the
# fused kernels (fp32 and bf16) at long T, the backward (grad, staged, fused and bf16; verify and
# bench include it too), a bench with 12 heads and the static bound of each kernel for this GPU
# (bench --bound), and writes RESULTS_DIR/<device>-<date>.json (device, versions, date, results)
# and a .log beside it.
# Without a GPU it runs the same steps on the CPU build at small sizes, to check the script itself.
set -uo pipefail
# RESULTS_DIR is taken relative to where the script is called from, the default to the repository
if [ $# -ge 1 ]; then mkdir -p "$1" && results="$(cd "$1" && pwd)"; fi
cd "$(dirname "$0")/.."
results="${results:-$PWD/bench/results}"
mkdir -p "$results"
export PYTHONPATH="${PYTHONPATH:-.}"
exec python3 scripts/gpu_check.py "$results"
