// cpu_runtime/sync_intrinsics.h — __syncthreads and the device assert/__trap under their CUDA names,
// on top of fibers.h and device_abort.h.
// Part of cuda_cpu_runtime.h, which includes the parts in order: never included on its own.
#pragma once

// ---------------------------------------------------------------------------------------------
// The block's barrier

inline void __syncthreads() {
    andrea::RaceQuiet quiet;
    andrea::Sched& s = andrea::sched();
    s.cur->state = andrea::AT_BARRIER;
    s.at_barrier++;
    andrea::yield(s.cur);
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
