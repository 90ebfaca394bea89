"""What builds and places the kernel file for a GPU: nvrtc.py (the compiler and its cubin cache),
cuda_arch.py (which architecture to build for), cuda_setup.py (the driver and the cupy wheel),
cache.py (where compiled code is kept, shared with the CPU build)."""
