// cpu_runtime/clocks.h — clock64 and __globaltimer, and __nanosleep, which gives the block's other
// threads a turn: a spin-wait with __nanosleep on another thread's flag makes progress instead of
// hanging.
// Part of cuda_cpu_runtime.h, which includes the parts in order: never included on its own.
#pragma once

#include <ctime>

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
