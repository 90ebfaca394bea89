// cuda_runtime_api.h for the CPU build (andrea): see cuda_runtime.h.
#pragma once
#include "cuda_runtime.h"
