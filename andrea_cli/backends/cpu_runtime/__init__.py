"""The Python half of the CPU build, read top to bottom: errors, build (scan, wrap, compile,
cache), native (load, launch), module (CpuModule, CpuKernel), sanitize (the ASan worker),
racecheck (the ThreadSanitizer worker) and race_report (its reports in CUDA's terms),
raw_module (RawModule and RawKernel: cupy's shape for any kernel file, the public face),
coverage (what the CPU build runs and refuses, for `andrea info`)."""

from andrea_cli.backends.cpu_runtime.raw_module import RawKernel, RawModule  # noqa: E402,F401
