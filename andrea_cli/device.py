"""Device arrays for the CPU build, cupy's shape (`andrea_cli.device.zeros(n, dtype)`,
`asarray(a)`, `a.get()`, `a.ptr`): one address for host and kernels, so pointers stored inside
device memory work. See andrea_cli/backends/cpu_runtime/device_array.py."""

from andrea_cli.backends.cpu_runtime.device_array import DeviceArray, asarray, empty, zeros  # noqa: F401
