// cuda_fp16.h for the CPU build (andrea): __half and __half2 (see ../cpu_runtime/half.h).
#pragma once
#include "../half.h"
