"""The Python half of the CPU build, read top to bottom: errors, build (scan, wrap, compile,
cache), native (load, launch), module (CpuModule, CpuKernel), sanitize (the ASan worker)."""
