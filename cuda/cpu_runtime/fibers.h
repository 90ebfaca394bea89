// cpu_runtime/fibers.h — the scheduler's state and the fibers' lives: the built-in indices
// (threadIdx, blockIdx per OS thread, blockDim, gridDim as plain globals the scheduler sets), a
// fiber per thread with its own mmap'd stack below a guard page, each warp's collective state,
// the launch's guard state (see guard.h), yield/resume with AddressSanitizer's stack-switch hooks,
// and the codes a launch returns.
// A fiber runs until it blocks: no preemption, so a schedule is reproducible (forward, or
// reversed on request). A launch may spread its blocks over several OS threads (launch.h): each
// has its own scheduler, guard and tensor-core state (PerThread below), each block is run by one
// of them start to end.
// Part of cuda_cpu_runtime.h, which includes the parts in order: never included on its own.
#pragma once

// ---------------------------------------------------------------------------------------------
// Built-in indices: set by the scheduler before it resumes a fiber; per OS thread where they
// differ between the blocks that run at once (the poisoning of shared memory skips them).

static thread_local uint3 threadIdx, blockIdx;
static dim3 blockDim, gridDim;

namespace andrea {
namespace {

// AT_NAMED: at a named barrier (bar.sync id, n); AT_MBARRIER: in mbarrier.try_wait (async_barriers.h)
enum State { READY, AT_BARRIER, AT_WARP, AT_ACTIVEMASK, DONE, AT_NAMED, AT_MBARRIER };
// What a launch returns, written once: the enum here, and andrea_results() (exports.h), which
// gives Python each name with its number.
#define ANDREA_RESULTS(X) X(OK, 0) X(DEADLOCK, 1) X(BAD_LAUNCH, 2) X(INTERNAL, 3) X(FAULT, 4) X(WARP_MISUSE, 5) \
    X(ASSERT, 6) X(TIMEOUT, 7) X(CRASHED, 8)
#define ANDREA_RESULT_ENUM(name, code) name = code,
enum Result { ANDREA_RESULTS(ANDREA_RESULT_ENUM) };
#undef ANDREA_RESULT_ENUM

struct Sched;
struct Guard;

struct Fiber {
    Ctx ctx;
    Sched* sched;      // the scheduler (of one OS thread) whose pool this fiber is in
    char* stack;      // lowest address, the guard page
    size_t stack_size;
    size_t colour;     // bytes left unused at the top of the stack
    void* fake_stack;  // ASan's bookkeeping across switches
    uint3 tid;
    int lid;           // linear thread index in the block
    int state;
    bool parked;       // waiting at the top of its loop, ready to run the kernel again
    const void* site;  // where it called __activemask (the call's return address)
    uint32_t active;   // what that __activemask returns
};

struct Warp {
    uint32_t exists;     // lanes inside the block (fewer than 32 in a partial last warp)
    uint32_t live;       // lanes that exist and have not returned
    uint32_t arrived;    // lanes waiting at a warp collective
    // Per waiting lane: its mask, intrinsic (for messages), operation, offered value and, for a
    // shuffle, the lane it reads; result is filled by the last lane of its group to arrive.
    uint32_t mask[32];
    const char* what[32];
    int op[32];
    uint64_t value[32];
    int src[32];
    uint64_t result[32];
};

// All scheduler state lives here, on the heap: locals do not survive _longjmp reliably.
struct Sched {
    std::vector<Fiber*> pool;
    std::vector<Warp> warps;
    Ctx ctx;  // the scheduler's, while a fiber runs
    Fiber* cur = nullptr;
    void* sched_fake = nullptr;
    const void* main_bottom = nullptr;
    size_t main_size = 0;
    void (*entry)(void**) = nullptr;
    void** args = nullptr;
    int nthreads = 0, live = 0, at_barrier = 0, at_activemask = 0;
    int sweep_pos = 0;  // the place in schedule order of the thread running now (run_block's sweep)
    uint64_t barrier_gen = 0;  // __syncthreads released so far (and blocks started): tags barrier votes
    // A misused warp sync, found inside a fiber: the scheduler ends the launch with it.
    bool misused = false;
    int misuse_warp = 0;
    uint32_t misuse_mask = 0, misuse_lanes = 0;
    char misuse[400];
    // A failed device assert or a __trap(), found inside a fiber: the launch ends with it.
    bool aborted = false;
    char abort_message[400];
    bool reverse = false;
    // A SIGSEGV/SIGBUS in a fiber ends the launch with an error instead of the process.
    volatile sig_atomic_t faulted = 0;
    void* fault_addr = nullptr;
    bool fault_in_guard = false;
    pthread_t owner;
    std::vector<char> alt_stack;
    // __syncthreads_count/_and/_or: the count, tagged with the barrier generation (two buffers: a
    // fast thread may arrive at the next vote before a slow one has read this one)
    uint64_t vote_tag[2] = {~0ull, ~0ull};
    int vote_count[2] = {0, 0}, vote_arrived[2] = {0, 0};
    Guard* guard = nullptr;  // this OS thread's guard state (guard() makes it)
    uint3* thread_idx = nullptr;  // this OS thread's threadIdx (set by each launch: a TLS look-up saved a switch)
};

struct TensorCoreState;
struct AsyncState;  // async_barriers.h

// The state of the OS thread running blocks now: the launching thread's is the library's own
// (one launch at a time), each extra OS thread of a launch has its own.
struct PerThread {
    Sched* sched = nullptr;
    TensorCoreState* tensor_cores = nullptr;
    AsyncState* async = nullptr;  // named barriers, mbarriers (made at first use)
};
thread_local PerThread per_thread;

// (racecheck: never instrumented, so the static's guard is no atomic acquire at every call)
ANDREA_NO_TSAN inline Sched& main_sched() {
    static Sched* s = new Sched();  // never destroyed: fibers may outlive static destructors
    return *s;
}

ANDREA_NO_TSAN inline Sched& sched() {
    Sched*& s = per_thread.sched;
    if (!s) s = &main_sched();
    return *s;
}

// --- guard state (faults, watchdog, isolation: see guard.h and isolation.h) --------------------

struct LaunchOptions {  // from Python; andrea_options_size() checks the layout
    double timeout_s;   // > 0: the most one block may run; 0: the adaptive default below
    double base_s;      // the default: no progress for max(base_s, factor x the slowest block of
    double factor;      // the launch so far), or past ceiling x that in all (guard.h: on_alarm)
    double ceiling;
    int isolate;        // run the launch in a forked child process
    int threads;        // OS threads the blocks are spread over (1: the launching thread alone)
};

struct Guard {
    volatile sig_atomic_t in_fiber = 0;   // a fiber runs now (set and cleared on the fiber's side)
    volatile sig_atomic_t timed_out = 0;  // the watchdog found the block past its budget
    volatile sig_atomic_t fault_write = -1;  // the faulting access: 1 write, 0 read, -1 unknown
    double block_start = 0, budget = 0, slowest = 0;
    double limit = 0;  // the most CPU seconds the block may run in all (the budget with --timeout)
    // Progress: bumped each time a thread blocks at a barrier, a warp collective or __activemask,
    // or returns (yield, fiber_main); the watchdog's tick notes when it last moved. A thread that
    // spins (yielding or not) never bumps it.
    volatile unsigned long progress = 0;
    unsigned long progress_seen = 0;
    double last_progress = 0;  // the thread CPU time at which the tick last saw progress move
    const LaunchOptions* opts = nullptr;
    // dynamic shared memory of the current launch: dyn_bytes from dyn_base, then slack bytes
    // up to the guard page (plain build), or an exact malloc (AddressSanitizer build)
    char* dyn_map = nullptr;
    size_t dyn_map_size = 0;
    char* dyn_base = nullptr;
    size_t dyn_bytes = 0, dyn_slack = 0;
};

ANDREA_NO_TSAN inline Guard& guard() {
    Sched& s = sched();
    if (!s.guard) s.guard = new Guard();
    return *s.guard;
}

// Where every `extern __shared__` array of the kernel file starts during a launch: the CPU build
// rewrites `extern __shared__ T name[];` into `T* const& name = ...(andrea::dyn_shared_base);`
// on the same line (backends/cpu_runtime/build.py), so the runtime can place the launch's bytes
// against a guard page. One per OS thread: each runs its own block.
thread_local char* dyn_shared_base = nullptr;

// --- stack switching, with the AddressSanitizer hooks when instrumented -----------------------

inline void asan_start(void** fake, const void* bottom, size_t size) {
#ifdef ANDREA_ASAN
    __sanitizer_start_switch_fiber(fake, bottom, size);
#else
    (void)fake; (void)bottom; (void)size;
#endif
}
inline void asan_finish(void* fake, const void** bottom, size_t* size) {
#ifdef ANDREA_ASAN
    __sanitizer_finish_switch_fiber(fake, bottom, size);
#else
    (void)fake; (void)bottom; (void)size;
#endif
}

// The next thread of this sweep in schedule order that can run, if nothing is pending that the
// scheduler must see first (a misuse, an abort, a fault, the watchdog); its place becomes the
// sweep's. The scheduler would resume exactly this one next.
ANDREA_NO_TSAN inline Fiber* next_ready(Sched& s) {
    if (s.misused || s.aborted || s.faulted || s.guard->timed_out) return nullptr;
    const int n = s.nthreads;
    for (int k = s.sweep_pos + 1; k < n; k++) {
        Fiber* g = s.pool[s.reverse ? n - 1 - k : k];
        if (g->state == READY) {
            s.sweep_pos = k;
            return g;
        }
    }
    return nullptr;
}

// From a fiber to the next ready one of the sweep, or back to the scheduler (at the sweep's
// end, or when it must see something); returns when this fiber is resumed. Straight from fiber
// to fiber, a lane waiting at a warp collective costs one switch, not two. The guard treats the
// switch as outside any fiber (in_fiber 0): a signal then cannot save into the wrong context.
ANDREA_NO_TSAN __attribute__((noinline)) inline void yield(Fiber* f) {
    Sched& s = *f->sched;
    Guard& g = *s.guard;
    race_yield();
    g.in_fiber = 0;
    if (f->state != READY) g.progress = g.progress + 1;  // it reached a barrier, a collective or its end
    // AddressSanitizer's stack-switch hooks assume every switch goes through the scheduler, and
    // racecheck announces each switch to ThreadSanitizer there (race_yield / race_resume)
#if !defined(ANDREA_ASAN) && !defined(ANDREA_TSAN)
    if (Fiber* next = next_ready(s)) {
        s.cur = next;
        *s.thread_idx = next->tid;
        ctx_switch(f->ctx, next->ctx);
        g.in_fiber = 1;
        return;
    }
#endif
    asan_start(&f->fake_stack, s.main_bottom, s.main_size);
    ctx_switch(f->ctx, s.ctx);
    asan_finish(f->fake_stack, &s.main_bottom, &s.main_size);
    g.in_fiber = 1;
}

// From the scheduler into a fiber; returns when the fiber yields.
ANDREA_NO_TSAN __attribute__((noinline)) inline void resume(Fiber* f) {
    Sched& s = *f->sched;
    s.cur = f;
    *s.thread_idx = f->tid;
    race_resume(f->lid);
    asan_start(&s.sched_fake, f->stack, f->stack_size);
    ctx_switch(s.ctx, f->ctx);
    asan_finish(s.sched_fake, nullptr, nullptr);
}

inline void warp_exit(Fiber* f);

// The thread the scheduler would resume right after f returns, if it has not started yet:
// f's fiber can run it at once on its own stack, without the two switches through the
// scheduler. Nothing else may be pending (a misuse, an abort: the scheduler reports those).
// Not in racecheck's build: the swap of identities would be a switch between CUDA threads that
// ThreadSanitizer is never told of (race_yield / race_resume sit in the scheduler's switches).
ANDREA_NO_TSAN inline Fiber* next_fresh(const Fiber* f) {
#ifdef ANDREA_TSAN
    (void)f;
    return nullptr;
#else
    const Sched& s = *f->sched;
    const int next = f->lid + (s.reverse ? -1 : 1);
    if (next < 0 || next >= s.nthreads || s.misused || s.aborted || s.guard->timed_out) return nullptr;
    Fiber* g = s.pool[next];
    return g->state == READY && g->parked ? g : nullptr;
#endif
}

// f (done) takes over g's thread, and g's untouched fiber stands for f's finished one: the two
// swap identities and places in the pool, so the thread order is the scheduler's own.
ANDREA_NO_TSAN inline void adopt(Fiber* f, Fiber* g) {
    Sched& s = *f->sched;
    std::swap(s.pool[f->lid], s.pool[g->lid]);
    std::swap(f->lid, g->lid);
    std::swap(f->tid, g->tid);
    g->state = DONE;
    f->state = READY;
    *s.thread_idx = f->tid;
    s.sweep_pos = s.reverse ? s.nthreads - 1 - f->lid : f->lid;  // f now stands where g stood
}

// A fiber's life: "run the kernel, mark done, yield" for every block it is given; a thread
// that never blocks is followed by the next one on the same stack (see next_fresh), so a block
// whose threads run straight through costs one switch, not two per thread.
ANDREA_NO_TSAN inline void fiber_main() {
    Sched& s = sched();
    asan_finish(nullptr, &s.main_bottom, &s.main_size);  // first entry, from resume()
    guard().in_fiber = 1;
    for (;;) {
        Fiber* f = s.cur;
        f->parked = false;
        race_kernel_enter();
        s.entry(s.args);
        race_kernel_leave();
        f = s.cur;
        f->state = DONE;
        s.live--;
        s.guard->progress = s.guard->progress + 1;  // (also when it adopts the next thread below)
        warp_exit(f);
        if (Fiber* g = next_fresh(f)) {
            adopt(f, g);
            continue;
        }
        f->parked = true;
        yield(f);
    }
}

// (Re)start a fiber so that resuming it runs the kernel from the top.
inline bool fiber_init(Fiber* f) {
    Sched& s = sched();
    if (!f->stack) {
        const size_t page = (size_t)sysconf(_SC_PAGESIZE);
#ifdef ANDREA_ASAN
        f->stack_size = 1 << 20;  // instrumented frames are larger
#else
        f->stack_size = 256 << 10;
#endif
        void* p = mmap(nullptr, f->stack_size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
        if (p == MAP_FAILED) return false;
        mprotect(p, page, PROT_NONE);  // guard page: an overflow faults instead of corrupting
        f->stack = (char*)p;
        // Stagger the stack tops: at equal offsets every fiber's hot frames would fall into the
        // same few cache sets (the stacks are 256 KiB apart) and each switch would miss.
        f->colour = 64 + (s.pool.size() * 17 * 64) % (32 << 10);
    }
    ctx_make(f->ctx, f->stack + f->stack_size - f->colour, fiber_main);
    f->parked = true;
    return true;
}

}  // namespace
}  // namespace andrea
