// cpu_runtime/device_abort.h — a failed device assert (assert() calls glibc's __assert_fail, which
// the kernel library defines here) and __trap(): on a GPU they end the launch with an error; here
// the fiber records the message and stops, and the scheduler ends the launch with it (ASSERT).
// Outside a kernel the host's behaviour stands: print and abort.
// Part of cuda_cpu_runtime.h, which includes the parts in order: never included on its own.
#pragma once

namespace andrea {
namespace {

// --- device-side assert and __trap ----------------------------------------------------------------
// On a GPU a failed assert ends the launch with cudaErrorAssert (and __trap with an error too);
// here the fiber records where and stops, and the scheduler ends the launch with the message.
// Outside a launch (never in a kernel) the host's behaviour stands: print and abort.

inline bool in_kernel() {
    Sched& s = sched();
    return s.cur && s.cur->state == READY && pthread_equal(pthread_self(), s.owner);
}

[[noreturn]] inline void device_abort(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] inline void device_abort(const char* fmt, ...) {
    RaceQuiet quiet;
    Sched& s = sched();
    va_list ap;
    va_start(ap, fmt);
    if (!in_kernel()) {
        std::vfprintf(stderr, fmt, ap);
        std::fputc('\n', stderr);
        std::abort();
    }
    if (!s.aborted) {
        s.aborted = true;
        std::vsnprintf(s.abort_message, sizeof s.abort_message, fmt, ap);
    }
    va_end(ap);
    Fiber* f = s.cur;
    f->state = AT_WARP;  // never runs on; restarted before its next use
    for (;;) yield(f);
}

}  // namespace
}  // namespace andrea

// ---------------------------------------------------------------------------------------------
// The CUDA names. assert() expands to glibc's __assert_fail: this definition (hidden in the
// kernel library) turns a failed device assert into an error of the launch.

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
