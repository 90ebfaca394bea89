// cpu_runtime/intrinsics.h — the rest of CUDA's device intrinsics for the CPU build: cache-hinted
// loads and stores (__ldg among them), clocks and sleeps. Included by cuda_cpu_runtime.h after
// barriers.h (it uses the scheduler of fibers.h).
#pragma once

#include <ctime>

// ---------------------------------------------------------------------------------------------
// Cache-hinted loads and stores: the hint is about the GPU's caches, the value is the same.

template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T __ldca(const T* p) { return *p; }
template <class T> inline T __ldcg(const T* p) { return *p; }
template <class T> inline T __ldcs(const T* p) { return *p; }
template <class T> inline T __ldlu(const T* p) { return *p; }
template <class T> inline T __ldcv(const T* p) { return *p; }
template <class T> inline void __stwb(T* p, T v) { *p = v; }
template <class T> inline void __stcg(T* p, T v) { *p = v; }
template <class T> inline void __stcs(T* p, T v) { *p = v; }
template <class T> inline void __stwt(T* p, T v) { *p = v; }
// ---------------------------------------------------------------------------------------------
// Clocks and sleeping. A thread that sleeps gives the others a turn, so a spin-wait with
// __nanosleep (waiting for another thread's flag) makes progress instead of hanging.

inline long long clock64() {  // nanoseconds of a monotonic clock: counts up, as the SM's cycle counter does
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}
inline unsigned long long __globaltimer() { return (unsigned long long)clock64(); }
inline void __nanosleep(unsigned) {
    andrea::RaceQuiet quiet;
    andrea::Sched& s = andrea::sched();
    if (andrea::in_kernel()) andrea::yield(s.cur);
}
