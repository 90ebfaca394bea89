// cpu_runtime/guard.h — the guard that turns a wrong kernel into a reported launch error instead
// of a dead process: the fault and trap handlers (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT in a
// fiber), the CPU-time watchdog, dynamic shared memory against a guard page with a canary, and the
// words for a fault. Refuses nothing a GPU accepts; what it cannot catch in-process (a stray write
// into the heap) is left to isolation.h.
// Part of cuda_cpu_runtime.h, which includes the parts in order: never included on its own.
#pragma once

namespace andrea {
namespace {

// =================================================================================================
// Guard: a wrong kernel is reported and never takes the caller down (issue 9).
//  - Signals in a fiber (a fault, an abort, a trap, an integer division by zero) end the launch
//    with the thread, its block and the address, instead of ending the process.
//  - Dynamic shared memory lives in its own mapping whose last byte ends at a guard page, so one
//    element past the launch's bytes faults at that access; the few bytes that 16-byte alignment
//    leaves between the end and the guard page are a canary checked at each block's end. In the
//    AddressSanitizer build it is an exact malloc instead: ASan's redzone starts at the first
//    byte past it. (Device arrays get the same guard pages from Python: cpu_runtime.)
//  - A watchdog: a block that runs past its budget is stopped (an endless loop?). With --timeout
//    the budget is the most CPU seconds a block may run. Otherwise it judges progress: a block is
//    endless once no thread has reached a barrier, a warp collective or its end for max(base,
//    factor x the slowest block of the launch so far) CPU seconds, or once it has run ceiling x
//    that in all (a loop of barriers that never ends). A slow block that keeps reaching barriers
//    (racecheck's build on a busy machine, its first block touching fresh fiber stacks) goes on.
//  - Isolation: the launch runs in a launch worker (worker.cpp), or with opts->isolate in a
//    forked child (isolation.h); the device arrays are MAP_SHARED (Python allocates them so), the
//    report comes back in a shared page, and a stray write into the heap, an abort or a crash
//    ends only that process.

// The watchdog counts CPU seconds, not wall-clock ones: a loaded machine slows honest work down
// but does not make it look endless.
inline double seconds(clockid_t clock) {
    timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}
inline double cpu_now() { return seconds(CLOCK_THREAD_CPUTIME_ID); }

struct SignalState { struct sigaction segv, bus, fpe, ill, abrt, alarm; };  // the process's handlers before
struct ThreadWatch { stack_t alt; timer_t timer; bool timer_ok; };  // one OS thread's, while it runs blocks

// From a signal handler in a fiber back to the scheduler, for good: the fiber is restarted
// before its next use.
ANDREA_NO_TSAN inline void escape_fiber(int sig) {
    Sched& s = sched();
    Fiber* f = s.cur;
    race_yield();
    guard().in_fiber = 0;
    sigset_t unblock;
    sigemptyset(&unblock);
    sigaddset(&unblock, sig);
    pthread_sigmask(SIG_UNBLOCK, &unblock, nullptr);  // the handler never returns to unblock it
    asan_start(&f->fake_stack, s.main_bottom, s.main_size);
    ctx_switch(f->ctx, s.ctx);  // back into resume()
}

// Like CUDA's "illegal memory access": a signal while a fiber runs returns to the scheduler,
// which reports it. Anything else falls through to the handler that was there before.
inline void on_fault(int sig, siginfo_t* si, void* uc) {
    Sched& s = sched();
    Fiber* f = s.cur;
    if (!f || !guard().in_fiber || f->state != READY || !pthread_equal(pthread_self(), s.owner)) {
        signal(sig, SIG_DFL);  // re-raised on return; a second fault now ends the process
        return;
    }
    s.faulted = sig;
    s.fault_addr = si->si_addr;
    s.fault_in_guard = (char*)si->si_addr >= f->stack && (char*)si->si_addr < f->stack + sysconf(_SC_PAGESIZE);
#if defined(__x86_64__)
    // the page-fault error code: bit 1 is set for a write
    guard().fault_write = sig == SIGSEGV ? (int)((static_cast<ucontext_t*>(uc)->uc_mcontext.gregs[REG_ERR] >> 1) & 1) : -1;
#else
    (void)uc;
    guard().fault_write = -1;
#endif
    escape_fiber(sig);
}

// The watchdog's tick (every 25 ms of the launch's CPU time): past the budget, a fiber that never yields is
// left at once; one that does yield is stopped by the scheduler, which sees the flag.
inline void on_alarm(int, siginfo_t*, void*) {
    Guard& g = guard();
    if (g.timed_out) return;
    const double now = cpu_now();
    if (g.progress != g.progress_seen) {
        g.progress_seen = g.progress;
        g.last_progress = now;
    }
    if (now - g.last_progress < g.budget && now - g.block_start < g.limit) return;
    g.timed_out = 1;
    if (g.in_fiber) escape_fiber(SIGALRM);
}

// A block begins: its budget (no progress for that long is endless) and its limit in all.
inline void watch_block(const LaunchOptions* opts, double slowest) {
    Guard& g = guard();
    const bool given = opts->timeout_s > 0;  // --timeout: a hard limit, progress or not
    g.budget = given ? opts->timeout_s : std::max(opts->base_s, opts->factor * slowest);
    g.limit = given ? g.budget : g.budget * std::max(1.0, opts->ceiling);
    g.block_start = g.last_progress = cpu_now();
    g.progress_seen = g.progress;
}

// The handlers, for the whole process (one launch at a time installs them).
inline void catch_faults(SignalState& old) {
    struct sigaction sa {};
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old.segv);
    sigaction(SIGBUS, &sa, &old.bus);
    sigaction(SIGFPE, &sa, &old.fpe);
    sigaction(SIGILL, &sa, &old.ill);
    sigaction(SIGABRT, &sa, &old.abrt);
    sa.sa_sigaction = on_alarm;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigaction(SIGALRM, &sa, &old.alarm);
}

inline void restore_faults(const SignalState& old) {
    sigaction(SIGALRM, &old.alarm, nullptr);
    sigaction(SIGSEGV, &old.segv, nullptr);
    sigaction(SIGBUS, &old.bus, nullptr);
    sigaction(SIGFPE, &old.fpe, nullptr);
    sigaction(SIGILL, &old.ill, nullptr);
    sigaction(SIGABRT, &old.abrt, nullptr);
}

// This OS thread, while it runs blocks: its faults land on an alternate stack (the faulting
// fiber's stack may be the problem), and the watchdog's tick counts its own CPU time.
inline void watch_thread(ThreadWatch& w) {
    Sched& s = sched();
    s.owner = pthread_self();
    s.faulted = 0;
    if (s.alt_stack.empty()) s.alt_stack.resize(64 << 10);
    stack_t alt{};
    alt.ss_sp = s.alt_stack.data();
    alt.ss_size = s.alt_stack.size();
    sigaltstack(&alt, &w.alt);
    // The tick goes to this thread only (other threads of the caller must not take it).
    sigevent ev{};
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = SIGALRM;
    ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
    w.timer_ok = timer_create(CLOCK_THREAD_CPUTIME_ID, &ev, &w.timer) == 0;
    if (w.timer_ok) {
        const itimerspec tick{{0, 25000000}, {0, 25000000}};
        timer_settime(w.timer, 0, &tick, nullptr);
    }
}

inline void unwatch_thread(const ThreadWatch& w) {
    if (w.timer_ok) timer_delete(w.timer);  // a tick already sent is delivered before this returns
    sigaltstack(&w.alt, nullptr);
}

// Dynamic shared memory for one launch; every `extern __shared__` name points at its start.
inline bool dyn_map(size_t bytes) {
    Guard& g = guard();
    g.dyn_bytes = bytes;
#ifdef ANDREA_ASAN
    void* p = nullptr;
    if (posix_memalign(&p, 16, bytes)) return false;
    g.dyn_base = static_cast<char*>(p);
    g.dyn_slack = 0;
#else
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), rounded = (bytes + 15) & ~size_t(15);
    const size_t data = (rounded + page - 1) / page * page;
    g.dyn_map_size = data + 2 * page;  // a guard page on either side
    void* m = mmap(nullptr, g.dyn_map_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return false;
    g.dyn_map = static_cast<char*>(m);
    if (data && mprotect(g.dyn_map + page, data, PROT_READ | PROT_WRITE)) return false;
    g.dyn_base = g.dyn_map + page + data - rounded;
    g.dyn_slack = rounded - bytes;
#endif
    dyn_shared_base = g.dyn_base;
    return true;
}

inline void dyn_unmap() {
    Guard& g = guard();
    dyn_shared_base = nullptr;
#ifdef ANDREA_ASAN
    free(g.dyn_base);
#else
    if (g.dyn_map) munmap(g.dyn_map, g.dyn_map_size);
#endif
    g.dyn_map = nullptr;
    g.dyn_base = nullptr;
}

// The guard page after the launch's dynamic shared memory, and the canary bytes before it.
inline bool in_dyn_guard(const void* a) {
    const Guard& g = guard();
    const char* end = g.dyn_base + g.dyn_bytes;
    return g.dyn_base && (const char*)a >= end && (const char*)a < end + g.dyn_slack + (size_t)sysconf(_SC_PAGESIZE);
}

inline long dyn_canary_hit() {  // the first slack byte a block wrote, or -1
    const Guard& g = guard();
    for (size_t i = 0; i < g.dyn_slack; i++)
        if ((unsigned char)g.dyn_base[g.dyn_bytes + i] != 0xff) return (long)i;
    return -1;
}

inline const char* signal_text(int sig) {
    switch (sig) {
        case SIGSEGV: return "SIGSEGV";
        case SIGBUS: return "SIGBUS";
        case SIGFPE: return "SIGFPE";
        case SIGILL: return "SIGILL";
        case SIGABRT: return "SIGABRT";
        case SIGKILL: return "SIGKILL";
        case SIGINT: return "SIGINT";
        case SIGTERM: return "SIGTERM";
        default: return "a signal";
    }
}

// A fiber ended by a signal: what happened, in words (Python names the device array, if any).
inline void describe_fault(const Fiber* f, LaunchInfo* info) {
    Sched& s = sched();
    const Guard& g = guard();
    info->thread[0] = (int)f->tid.x; info->thread[1] = (int)f->tid.y; info->thread[2] = (int)f->tid.z;
    info->signal = s.faulted;
    info->access = g.fault_write;
    info->address = (unsigned long long)(uintptr_t)s.fault_addr;
    const char* rw = g.fault_write == 1 ? "wrote" : g.fault_write == 0 ? "read" : "touched";
    char* m = info->message;
    const size_t n = sizeof info->message;
    if (s.faulted == SIGABRT)
        std::snprintf(m, n, "thread (%u, %u, %u) aborted (an assert that failed?)", f->tid.x, f->tid.y, f->tid.z);
    else if (s.faulted == SIGFPE)
        std::snprintf(m, n, "thread (%u, %u, %u) raised an arithmetic trap (an integer division by zero?)",
                      f->tid.x, f->tid.y, f->tid.z);
    else if (s.faulted == SIGILL)
        std::snprintf(m, n, "thread (%u, %u, %u) executed a trap (__trap or an illegal instruction)",
                      f->tid.x, f->tid.y, f->tid.z);
    else if (s.fault_in_guard)
        std::snprintf(m, n, "stack overflow in thread (%u, %u, %u): its stack is %zu KiB",
                      f->tid.x, f->tid.y, f->tid.z, f->stack_size >> 10);
    else if (in_dyn_guard(s.fault_addr))
        std::snprintf(m, n, "thread (%u, %u, %u) %s byte %td of dynamic shared memory, which has %zu bytes "
                      "(the launch's shared_mem): an overrun", f->tid.x, f->tid.y, f->tid.z, rw,
                      (const char*)s.fault_addr - g.dyn_base, g.dyn_bytes);
    else if (g.dyn_base && (const char*)s.fault_addr < g.dyn_base &&
             (const char*)s.fault_addr >= g.dyn_base - 2 * sysconf(_SC_PAGESIZE))
        std::snprintf(m, n, "thread (%u, %u, %u) %s byte %td of dynamic shared memory, before its start: "
                      "an underrun", f->tid.x, f->tid.y, f->tid.z, rw, (const char*)s.fault_addr - g.dyn_base);
    else
        std::snprintf(m, n, "illegal memory access in thread (%u, %u, %u): it %s address %p, outside every array",
                      f->tid.x, f->tid.y, f->tid.z, rw, s.fault_addr);
}

}  // namespace
}  // namespace andrea
