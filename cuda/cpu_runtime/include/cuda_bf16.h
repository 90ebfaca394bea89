// cuda_bf16.h for the CPU build (andrea): __nv_bfloat16 and __nv_bfloat162 (see ../cpu_runtime/half.h).
#pragma once
#include "../half.h"
