// cuda_runtime.h for the CPU build (andrea): what device code needs from it is in the force-included
// runtime header; host API calls (cudaMalloc, <<<...>>>) have no meaning in a kernel file and are not here.
#pragma once
#include "../cuda_runtime_stub.h"
