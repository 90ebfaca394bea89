// cpu_runtime/qualifiers.h — the macros a kernel file tests (__CUDACC__, ANDREA_CPU_BUILD) and CUDA's
// function and variable qualifiers. __global__/__device__/__host__ mean nothing on the CPU; __shared__
// becomes thread_local (one OS thread runs a block, so its TLS block is the block's shared memory),
// `static` in the AddressSanitizer build. __launch_bounds__ is accepted and ignored. __CUDA_ARCH__ is
// refused by leaving it undefined: device code takes the portable branch nvcc's host pass needs.
// Part of cuda_cpu_runtime.h, which includes the parts in order: never included on its own.
#pragma once

// ---------------------------------------------------------------------------------------------
// What a kernel file can test. The CPU build compiles device code the way nvcc's host pass sees
// a .cu file: __CUDACC__ is defined (the CUDA keywords and headers exist), __CUDA_ARCH__ is not,
// so code written for one GPU architecture (inline PTX, tensor-core instructions) takes the
// portable branch it must have for the host pass anyway. ANDREA_CPU_BUILD names this build.
#define __CUDACC__ 1
#define ANDREA_CPU_BUILD 1

// ---------------------------------------------------------------------------------------------
// Qualifiers

#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline __attribute__((always_inline))
// GCC's own spelling of the attribute is the same word: a standard header that writes
// __attribute__((__noinline__)) after this line breaks, so the runtime header includes those first.
#define __noinline__ __attribute__((noinline))
#ifdef _GLIBCXX_SIMD_NEVER_INLINE  // <experimental/simd> writes the word where its macro is used
#undef _GLIBCXX_SIMD_NEVER_INLINE
#define _GLIBCXX_SIMD_NEVER_INLINE [[__gnu__::noinline]]
#endif
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ thread_local  // (the AddressSanitizer build: `static`, see below)

#if defined(__SANITIZE_ADDRESS__)
#define ANDREA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ANDREA_ASAN 1
#endif
#endif
#ifdef ANDREA_ASAN
#include <sanitizer/common_interface_defs.h>
// AddressSanitizer puts no redzones around thread_local variables; around statics it does. A
// block-scope static is shared by every fiber just as thread_local is (that build runs a launch on
// one OS thread: launch.h).
#undef __shared__
#define __shared__ static
#endif
