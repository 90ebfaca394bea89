"""The launchers: the kernel file's kernels driven through a KernelDevice (cupy on a GPU, the
CPU build without one), one module per family: staged.py, fused.py, fused_bf16.py, backward.py."""
