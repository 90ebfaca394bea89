// cuda_profiler_api.h for the CPU build (andrea): the profiler's switches, declared for host code
// that names them; a kernel file that calls one is a link error (no profiler on the CPU).
#pragma once
#include "cuda_runtime.h"
cudaError_t cudaProfilerStart();
cudaError_t cudaProfilerStop();
