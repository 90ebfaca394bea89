// math_constants.h for the CPU build (andrea): CUDA's CUDART_* float and double constants.
#pragma once
#include "../cuda_runtime_stub.h"
