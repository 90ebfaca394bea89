// cuda.h for the CPU build (andrea): the driver API's version macro and handle types, which headers
// shared by host and device code name; the driver's functions have no meaning in a kernel file.
#pragma once
#include "cuda_runtime.h"

#ifndef CUDA_VERSION
#define CUDA_VERSION 12000
#endif
typedef enum cudaError_enum { CUDA_SUCCESS = 0, CUDA_ERROR_INVALID_VALUE = 1 } CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st* CUcontext;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef cudaStream_t CUstream;
typedef cudaEvent_t CUevent;
