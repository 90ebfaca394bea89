// cpu_runtime/cuda_runtime_stub.h — what cuda_runtime.h and math_constants.h give device code,
// for the CPU build: the version macros, CUDA's named constants, and the host API's types, which
// headers shared by host and device code declare (a class with a cudaStream_t member): the types
// only, as nvcc's implicit cuda_runtime.h has them in every .cu file. The API's functions
// (cudaMalloc, cudaStreamCreate) are not here: a kernel file that calls one is a link error.
#pragma once
#include <cstddef>

typedef enum cudaError {
    cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2, cudaErrorNotReady = 600
} cudaError_t;
enum cudaMemcpyKind { cudaMemcpyHostToHost = 0, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2,
                      cudaMemcpyDeviceToDevice = 3, cudaMemcpyDefault = 4 };
typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;
typedef struct CUgraph_st* cudaGraph_t;
typedef struct CUgraphExec_st* cudaGraphExec_t;
typedef unsigned long long cudaTextureObject_t;
typedef unsigned long long cudaSurfaceObject_t;
struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem, sharedMemPerBlock, sharedMemPerBlockOptin, totalConstMem;
    int regsPerBlock, warpSize, maxThreadsPerBlock, maxThreadsDim[3], maxGridSize[3], clockRate, major, minor,
        multiProcessorCount, maxThreadsPerMultiProcessor, l2CacheSize, memoryBusWidth, memoryClockRate;
};
#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventDisableTiming 0x02
#define cudaMemAttachGlobal 0x01

#ifndef CUDART_VERSION
#define CUDART_VERSION 12000  // the API the CPU build follows (CUDA 12)
#endif
#ifndef __CUDACC_VER_MAJOR__
#define __CUDACC_VER_MAJOR__ 12
#define __CUDACC_VER_MINOR__ 0
#endif

#define CUDART_INF_F INFINITY
#define CUDART_NAN_F NAN
#define CUDART_ZERO_F 0.0f
#define CUDART_ONE_F 1.0f
#define CUDART_MAX_NORMAL_F 3.40282347e+38f
#define CUDART_MIN_DENORM_F 1.40129846e-45f
#define CUDART_PI_F 3.141592654f
#define CUDART_PIO2_F 1.570796327f
#define CUDART_2_OVER_PI_F 0.636619772f
#define CUDART_SQRT_HALF_F 0.707106781f
#define CUDART_SQRT_2_OVER_PI_F 0.797884561f
#define CUDART_L2E_F 1.442695041f
#define CUDART_LN2_F 0.693147181f
#define CUDART_INF __longlong_as_double(0x7ff0000000000000ULL)
#define CUDART_NAN __longlong_as_double(0xfff8000000000000ULL)
#define CUDART_PI 3.1415926535897931e+0
#define CUDART_PIO2 1.5707963267948966e+0
#define CUDART_SQRT_2PI 2.5066282746310002e+0
#define CUDART_SQRT_HALF 7.0710678118654757e-1
#define CUDART_L2E 1.4426950408889634e+0
#define CUDART_LN2 6.9314718055994529e-1
