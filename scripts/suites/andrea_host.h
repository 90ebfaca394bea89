// The host half of a CUDA program, for the suite runners (scripts/suites/host.py): the CUDA
// runtime API calls the suites make, over three callbacks into Python. Device memory is
// andrea's guarded arrays, so host and kernels see one address; each <<<...>>> launch (rewritten
// by cuda_source.host_half into andrea_host::launcher) goes through andrea_cli.RawModule.
// Not part of andrea: a test harness for running public suites unchanged.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>  // older libstdc++ brought it with <string>; the suites' host code relies on it
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __constant__
#define __shared__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict

struct uint3 { unsigned x, y, z; };
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct float2 { float x, y; };
struct float4 { float x, y, z, w; };
struct int2 { int x, y; };
struct int4 { int x, y, z, w; };

// Device functions that headers shared with host code mention in inline __device__ functions:
// declared so those headers parse in the host compile; never called there (no definitions).
template <class T, class U> T atomicAdd(T*, U);
template <class T, class U> T atomicAdd_system(T*, U);
template <class T, class U> T atomicAdd_block(T*, U);
template <class T, class U> T atomicSub(T*, U);
template <class T, class U> T atomicExch(T*, U);
template <class T, class U> T atomicMax(T*, U);
template <class T, class U> T atomicMin(T*, U);
template <class T, class U, class V> T atomicCAS(T*, U, V);
void __syncthreads();
void __threadfence();
void __threadfence_system();

typedef enum cudaError { cudaSuccess = 0, cudaErrorMemoryAllocation = 2, cudaErrorLaunchFailure = 719 } cudaError_t;
enum cudaMemcpyKind { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice,
                      cudaMemcpyDefault };
typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;
struct cudaDeviceProp {
    char name[256] = "andrea CPU build";
    size_t totalGlobalMem = size_t(16) << 30;
    int multiProcessorCount = 1, maxThreadsPerBlock = 1024, warpSize = 32, major = 8, minor = 0;
};
#define cudaMemAttachGlobal 1

namespace andrea_host {
using launch_fn = int (*)(const char* name, const unsigned* grid, const unsigned* block, size_t shared, void** args,
                          int nargs);
inline launch_fn launch_callback = nullptr;
inline void* (*alloc_callback)(size_t) = nullptr;
inline void (*free_callback)(void*) = nullptr;
inline cudaError_t last_error = cudaSuccess;

template <class F> struct Launcher;
template <class... P> struct Launcher<void (*)(P...)> {
    const char* name;
    dim3 grid, block;
    size_t shared;
    template <class... A> void operator()(A&&... a) const {
        static_assert(sizeof...(A) == sizeof...(P), "a launch with the wrong number of arguments");
        std::tuple<std::decay_t<P>...> values(static_cast<std::decay_t<P>>(a)...);
        void* argv[sizeof...(P) + 1] = {};
        std::apply([&](auto&... v) { int i = 0; ((argv[i++] = const_cast<void*>(static_cast<const void*>(&v))), ...); },
                   values);
        unsigned g[3] = {grid.x, grid.y, grid.z}, b[3] = {block.x, block.y, block.z};
        if (launch_callback(name, g, b, shared, argv, int(sizeof...(P))) != 0) last_error = cudaErrorLaunchFailure;
    }
};
template <class F> Launcher<F> launcher(const char* name, dim3 grid, dim3 block, size_t shared = 0,
                                        cudaStream_t = nullptr) {
    return Launcher<F>{name, grid, block, shared};
}
}  // namespace andrea_host

inline cudaError_t cudaMalloc(void** p, size_t n) {
    *p = andrea_host::alloc_callback(n);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
template <class T> cudaError_t cudaMalloc(T** p, size_t n) { return cudaMalloc(reinterpret_cast<void**>(p), n); }
template <class T> cudaError_t cudaMallocManaged(T** p, size_t n, unsigned = 1) {
    return cudaMalloc(reinterpret_cast<void**>(p), n);
}
inline cudaError_t cudaFree(void* p) { if (p) andrea_host::free_callback(p); return cudaSuccess; }
inline cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind) { memmove(d, s, n); return cudaSuccess; }
inline cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind k, cudaStream_t = nullptr) {
    return cudaMemcpy(d, s, n, k);
}
inline cudaError_t cudaMemset(void* d, int v, size_t n) { memset(d, v, n); return cudaSuccess; }
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
inline cudaError_t cudaThreadSynchronize() { return cudaSuccess; }
inline cudaError_t cudaDeviceReset() { return cudaSuccess; }
inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
inline cudaError_t cudaGetDeviceCount(int* n) { *n = 1; return cudaSuccess; }
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) { *p = cudaDeviceProp(); return cudaSuccess; }
inline cudaError_t cudaGetLastError() { cudaError_t e = andrea_host::last_error; andrea_host::last_error = cudaSuccess; return e; }
inline cudaError_t cudaPeekAtLastError() { return andrea_host::last_error; }
inline const char* cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "launch failed"; }
inline cudaError_t cudaStreamCreate(cudaStream_t* s) { *s = nullptr; return cudaSuccess; }
inline cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaStreamQuery(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaEventCreate(cudaEvent_t* e) { *e = nullptr; return cudaSuccess; }
inline cudaError_t cudaEventDestroy(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t = nullptr) { return cudaSuccess; }
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t) { *ms = 0; return cudaSuccess; }
