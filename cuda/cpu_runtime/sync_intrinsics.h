// cpu_runtime/sync_intrinsics.h — __syncthreads, the warp intrinsics (__syncwarp, __activemask, votes,
// __shfl*_sync with any width) and the device assert/__trap under their CUDA names, on top of
// warps.h and device_abort.h; their misuse is refused there.
// Part of cuda_cpu_runtime.h, which includes the parts in order: never included on its own.
#pragma once

// ---------------------------------------------------------------------------------------------
// Barriers and warp intrinsics

inline void __syncthreads() {
    andrea::RaceQuiet quiet;
    andrea::Sched& s = andrea::sched();
    s.cur->state = andrea::AT_BARRIER;
    s.at_barrier++;
    andrea::yield(s.cur);
}
inline void __syncwarp(unsigned mask = 0xffffffffu) { andrea::warp_sync(mask, "__syncwarp"); }
// Never inlined: its return address tells one call site from another.
__attribute__((noinline)) inline unsigned __activemask() {
    return andrea::activemask(__builtin_return_address(0));
}
inline unsigned __ballot_sync(unsigned mask, int pred) { return andrea::vote(mask, pred, "__ballot_sync"); }
inline int __any_sync(unsigned mask, int pred) { return andrea::vote(mask, pred, "__any_sync") != 0; }
inline int __all_sync(unsigned mask, int pred) { return andrea::vote(mask, pred, "__all_sync") == mask; }

template <class T> inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
    const int lane = andrea::lane_id(), base = lane & ~(width - 1);
    return andrea::shfl(mask, v, base + (src & (width - 1)), "__shfl_sync");
}
template <class T> inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    const int lane = andrea::lane_id();
    const int src = (lane & (width - 1)) >= (int)delta ? lane - (int)delta : -1;
    return andrea::shfl(mask, v, src, "__shfl_up_sync");  // -1: no source, the lane keeps its value
}
template <class T> inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    const int lane = andrea::lane_id();
    const int src = (lane & (width - 1)) + (int)delta < width ? lane + (int)delta : -1;
    return andrea::shfl(mask, v, src, "__shfl_down_sync");
}
template <class T> inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
    // PTX shfl.bfly: the source may lie in an earlier group of `width` lanes (it is read), a later
    // group gives the lane its own value.
    const int lane = andrea::lane_id(), src = lane ^ lane_mask;
    return andrea::shfl(mask, v, src <= (lane | (width - 1)) ? src : -1, "__shfl_xor_sync");
}

// assert() expands to glibc's __assert_fail: this definition (hidden in the kernel library)
// turns a failed device assert into an error of the launch.
extern "C" void __assert_fail(const char* expr, const char* file, unsigned int line, const char* function) noexcept {
    const char* slash = std::strrchr(file, '/');
    const uint3 t = threadIdx;
    andrea::device_abort("device assert failed at %s:%u in %s, thread (%u, %u, %u): `%s` (on a GPU: "
                         "cudaErrorAssert, and the context is lost)", slash ? slash + 1 : file, line, function,
                         t.x, t.y, t.z, expr);
}
[[noreturn]] inline void __trap() {
    const uint3 t = threadIdx;
    andrea::device_abort("__trap() in thread (%u, %u, %u) (on a GPU: an illegal-instruction error, and the "
                         "context is lost)", t.x, t.y, t.z);
}
