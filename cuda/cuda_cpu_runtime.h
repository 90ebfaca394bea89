// cuda_cpu_runtime.h — the CUDA execution model on the CPU, so the unmodified kernel file runs
// without a GPU. Force-included (g++ -include) into a generated C++ file that holds the kernel
// file's text (its `extern __shared__` lines pointed at the guarded dynamic shared bytes);
// andrea_cli/backends/cpu_runtime/build.py writes that file, module.py and native.py launch it.
//
// Model: every CUDA thread of a block is a fiber (own mmap'd stack with a guard page) on one OS
// thread; blocks run one after another. Fibers are created once and switched by a few lines of
// assembly (x86-64; elsewhere makecontext + _setjmp/_longjmp), never swapcontext (a syscall per
// switch). A scheduler runs each runnable fiber until it blocks; when nothing can run it
// releases __syncthreads if every live thread waits there (returned threads count as arrived),
// else it reports a deadlock.
// Warp syncs are strict, as CUDA specifies: every lane a mask names must exist and reach the same
// sync, and a shuffle must not read a lane that does not exist or has returned; anything else is
// undefined on a GPU (a hang or garbage) and ends the launch with WARP_MISUSE here.
// __shared__ is thread_local (a block-scope static per OS thread); the module's whole TLS block
// is therefore shared memory and is poisoned with NaN bytes at each block start.
// Launches of one library are serialized by a mutex, so the scheduler state is plain globals.

// Fortified _longjmp aborts when it jumps between stacks: turn it off before any system header.
#undef _FORTIFY_SOURCE

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

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
#define __noinline__ __attribute__((noinline))
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
// block-scope static is shared by every fiber just as thread_local is (one OS thread runs a launch).
#undef __shared__
#define __shared__ static
#endif

// ---------------------------------------------------------------------------------------------
// Vector types (CUDA's alignments: float4/int4 are 16-byte aligned, float2/int2 8)

struct __attribute__((aligned(8))) float2 { float x, y; };
struct float3 { float x, y, z; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
struct __attribute__((aligned(8))) int2 { int x, y; };
struct int3 { int x, y, z; };
struct __attribute__((aligned(16))) int4 { int x, y, z, w; };
struct __attribute__((aligned(16))) double2 { double x, y; };
struct uint3 { unsigned int x, y, z; };
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};

inline float2 make_float2(float x, float y) { return float2{x, y}; }
inline float3 make_float3(float x, float y, float z) { return float3{x, y, z}; }
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
inline int2 make_int2(int x, int y) { return int2{x, y}; }
inline int3 make_int3(int x, int y, int z) { return int3{x, y, z}; }
inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }
inline double2 make_double2(double x, double y) { return double2{x, y}; }
inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return uint3{x, y, z}; }

// ---------------------------------------------------------------------------------------------
// Math intrinsics: the libm equivalents (GPU __expf and FMA contraction differ in the last bits)

#define CUDART_INF_F INFINITY
#define CUDART_NAN_F NAN
static constexpr int warpSize = 32;

inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanhf(float x) { return tanhf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline int __float_as_int(float x) { int i; std::memcpy(&i, &x, 4); return i; }
inline float __int_as_float(int i) { float x; std::memcpy(&x, &i, 4); return x; }
inline unsigned __float_as_uint(float x) { unsigned i; std::memcpy(&i, &x, 4); return i; }
inline float __uint_as_float(unsigned i) { float x; std::memcpy(&x, &i, 4); return x; }
inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
inline int __float2int_rz(float x) { return (int)x; }
inline float __int2float_rn(int i) { return (float)i; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
using std::isinf;
using std::isnan;
using std::isfinite;

// CUDA's min/max are overloaded for every arithmetic type; mixed types take the common type.
template <class A, class B, class = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
inline std::common_type_t<A, B> min(A a, B b) { return b < a ? b : a; }
template <class A, class B, class = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
inline std::common_type_t<A, B> max(A a, B b) { return a < b ? b : a; }

template <class T> inline T __ldg(const T* p) { return *p; }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }

// ---------------------------------------------------------------------------------------------
// Atomics (one OS thread runs a launch, but std::atomic_ref keeps them honest for any caller)

template <class T> inline T atomicAdd(T* p, std::type_identity_t<T> v) { return std::atomic_ref<T>(*p).fetch_add(v); }
template <class T> inline T atomicSub(T* p, std::type_identity_t<T> v) { return std::atomic_ref<T>(*p).fetch_sub(v); }
template <class T> inline T atomicExch(T* p, std::type_identity_t<T> v) { return std::atomic_ref<T>(*p).exchange(v); }
template <class T> inline T atomicCAS(T* p, std::type_identity_t<T> expected, std::type_identity_t<T> desired) {
    std::atomic_ref<T>(*p).compare_exchange_strong(expected, desired);
    return expected;  // the old value, whether or not the swap happened
}
template <class T> inline T atomicMax(T* p, std::type_identity_t<T> v) {
    std::atomic_ref<T> r(*p);
    T old = r.load();
    while (old < v && !r.compare_exchange_weak(old, v)) {}
    return old;
}
template <class T> inline T atomicMin(T* p, std::type_identity_t<T> v) {
    std::atomic_ref<T> r(*p);
    T old = r.load();
    while (v < old && !r.compare_exchange_weak(old, v)) {}
    return old;
}

// ---------------------------------------------------------------------------------------------
// Built-in indices: plain globals, set by the scheduler before it resumes a fiber

static uint3 threadIdx, blockIdx;
static dim3 blockDim, gridDim;

namespace andrea {
// Internal linkage: two kernel libraries in one process must not share a scheduler (inline
// functions' statics would otherwise become process-wide unique symbols).
namespace {

enum State { READY, AT_BARRIER, AT_WARP, AT_ACTIVEMASK, DONE };
enum Result { OK = 0, DEADLOCK = 1, BAD_LAUNCH = 2, INTERNAL = 3, FAULT = 4, WARP_MISUSE = 5, ASSERT = 6,
              TIMEOUT = 7, CRASHED = 8 };

// --- context switching ---------------------------------------------------------------------------
// x86-64: a hand-written switch of the callee-saved registers and the stack pointer (a few ns;
// glibc's _setjmp/_longjmp cost ~60 ns a pair here, swapcontext a syscall). Elsewhere:
// makecontext once, then _setjmp/_longjmp.

#if defined(__x86_64__) && !defined(ANDREA_PORTABLE_SWITCH)
struct Ctx { void* sp; };

// andrea_ctx_switch(void** save_sp, void* load_sp): push the callee-saved registers, store rsp,
// load the other stack's rsp, pop its registers, return into it.
asm(R"(
    .text
    .p2align 4
    .type andrea_ctx_switch, @function
    .hidden andrea_ctx_switch
andrea_ctx_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size andrea_ctx_switch, .-andrea_ctx_switch
)");
extern "C" void andrea_ctx_switch(void** save_sp, void* load_sp);

inline void ctx_switch(Ctx& from, const Ctx& to) { andrea_ctx_switch(&from.sp, to.sp); }

// A context that starts fn on the stack below top (fn must never return).
inline void ctx_make(Ctx& c, char* top, void (*fn)()) {
    void** sp = reinterpret_cast<void**>(reinterpret_cast<uintptr_t>(top) & ~uintptr_t(15));
    *--sp = nullptr;                      // fn's "return address": keeps the ABI's alignment
    *--sp = reinterpret_cast<void*>(fn);  // where the switch's ret goes
    for (int i = 0; i < 6; i++) *--sp = nullptr;  // rbp rbx r12-r15
    c.sp = sp;
}
#else
struct Ctx { jmp_buf jb; };

inline void ctx_switch(Ctx& from, const Ctx& to) {
    if (!_setjmp(from.jb)) _longjmp(const_cast<Ctx&>(to).jb, 1);
}

struct CtxBoot { Ctx* c; void (*fn)(); ucontext_t back; };
inline CtxBoot& ctx_boot() { static CtxBoot b; return b; }
inline void ctx_trampoline() {
    CtxBoot& b = ctx_boot();
    void (*fn)() = b.fn;
    if (!_setjmp(b.c->jb)) setcontext(&b.back);  // parked; the first switch here runs fn
    fn();
}
inline void ctx_make(Ctx& c, char* top, void (*fn)()) {
    CtxBoot& b = ctx_boot();
    ucontext_t uc;
    getcontext(&uc);
    const size_t size = 64 << 10;
    uc.uc_stack.ss_sp = top - size;  // makecontext only needs room for the trampoline's frame
    uc.uc_stack.ss_size = size;
    uc.uc_link = nullptr;
    makecontext(&uc, ctx_trampoline, 0);
    b.c = &c;
    b.fn = fn;
    swapcontext(&b.back, &uc);
}
#endif

struct Fiber {
    Ctx ctx;
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
    std::mutex mu;
};

inline Sched& sched() {
    static Sched* s = new Sched();  // never destroyed: fibers may outlive static destructors
    return *s;
}

// --- guard state (faults, watchdog, isolation: see "Guard" below) ------------------------------

struct LaunchOptions {  // from Python; andrea_options_size() checks the layout
    double timeout_s;   // > 0: the most one block may run; 0: the adaptive default below
    double base_s;      // the default: max(base_s, factor x the slowest block of the launch so far)
    double factor;
    int isolate;        // run the launch in a forked child process
};

struct Guard {
    volatile sig_atomic_t in_fiber = 0;   // a fiber runs now (set and cleared on the fiber's side)
    volatile sig_atomic_t timed_out = 0;  // the watchdog found the block past its budget
    volatile sig_atomic_t fault_write = -1;  // the faulting access: 1 write, 0 read, -1 unknown
    double block_start = 0, budget = 0, slowest = 0;
    const LaunchOptions* opts = nullptr;
    // dynamic shared memory of the current launch: dyn_bytes from dyn_base, then slack bytes
    // up to the guard page (plain build), or an exact malloc (AddressSanitizer build)
    char* dyn_map = nullptr;
    size_t dyn_map_size = 0;
    char* dyn_base = nullptr;
    size_t dyn_bytes = 0, dyn_slack = 0;
};

inline Guard& guard() {
    static Guard* g = new Guard();
    return *g;
}

// Where every `extern __shared__` array of the kernel file starts during a launch: the CPU build
// rewrites `extern __shared__ T name[];` into `T* const& name = ...(andrea::dyn_shared_base);`
// on the same line (cpu_build.py), so the runtime can place the launch's bytes against a guard page.
char* dyn_shared_base = nullptr;

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

// From a fiber back to the scheduler; returns when the scheduler resumes this fiber.
__attribute__((noinline)) inline void yield(Fiber* f) {
    Sched& s = sched();
    guard().in_fiber = 0;
    asan_start(&f->fake_stack, s.main_bottom, s.main_size);
    ctx_switch(f->ctx, s.ctx);
    asan_finish(f->fake_stack, &s.main_bottom, &s.main_size);
    guard().in_fiber = 1;
}

// From the scheduler into a fiber; returns when the fiber yields.
__attribute__((noinline)) inline void resume(Fiber* f) {
    Sched& s = sched();
    s.cur = f;
    threadIdx = f->tid;
    asan_start(&s.sched_fake, f->stack, f->stack_size);
    ctx_switch(s.ctx, f->ctx);
    asan_finish(s.sched_fake, nullptr, nullptr);
}

inline void warp_exit(Fiber* f);

// A fiber's life: "run the kernel, mark done, yield" for every block it is given.
inline void fiber_main() {
    Sched& s = sched();
    asan_finish(nullptr, &s.main_bottom, &s.main_size);  // first entry, from resume()
    guard().in_fiber = 1;
    for (;;) {
        Fiber* f = s.cur;
        f->parked = false;
        s.entry(s.args);
        f = s.cur;
        f->state = DONE;
        s.live--;
        warp_exit(f);
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

// --- warps --------------------------------------------------------------------------------------
// A warp collective (__syncwarp, a shuffle, a vote, a reduce, a match) completes when every lane
// its mask names has arrived with the same mask; the last lane to arrive computes every lane's
// result from what each offered, releases exactly those lanes, and goes on. Groups of a warp
// with disjoint masks (cooperative-groups tiles) therefore sync independently.

enum Collective { C_SYNC, C_SHFL, C_BALLOT, C_ADD, C_MIN_I, C_MIN_U, C_MAX_I, C_MAX_U, C_AND, C_OR, C_XOR,
                  C_MATCH_ANY, C_MATCH_ALL };

// "0-3,8,10-11"
inline std::string lanes_text(uint32_t m) {
    std::string out;
    for (int i = 0; i < 32; i++) {
        if (!(m >> i & 1)) continue;
        int j = i;
        while (j < 31 && (m >> (j + 1) & 1)) j++;
        out += (out.empty() ? "" : ",") + std::to_string(i) + (j > i ? "-" + std::to_string(j) : "");
        i = j;
    }
    return out;
}

// Record a misused warp sync; the scheduler reports it when the fiber yields.
inline void warp_misuse(int warp, uint32_t mask, uint32_t lanes, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
inline void warp_misuse(int warp, uint32_t mask, uint32_t lanes, const char* fmt, ...) {
    Sched& s = sched();
    if (s.misused) return;  // the first one found is the one reported
    s.misused = true;
    s.misuse_warp = warp;
    s.misuse_mask = mask;
    s.misuse_lanes = lanes;
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(s.misuse, sizeof s.misuse, fmt, ap);
    va_end(ap);
}

// From inside the kernel: this fiber never goes on (it is restarted before its next use).
[[noreturn]] inline void warp_fail(Fiber* f) {
    f->state = AT_WARP;
    for (;;) yield(f);
}

#define ANDREA_RULE "every lane a warp-sync mask names must exist and reach the same sync " \
                    "(on a GPU: undefined, a hang or garbage)"

// "the shuffle" or "the __syncwarp": what a lane named in a mask must stay alive for.
inline const char* sync_kind(const char* what) {
    return std::strcmp(what, "__syncwarp") ? "the shuffle" : "the __syncwarp";
}

// A returned lane must not be one that lanes waiting at a warp sync named in their mask.
inline void warp_exit(Fiber* f) {
    const int wi = f->lid >> 5, lane = f->lid & 31;
    Warp& w = sched().warps[wi];
    const uint32_t bit = 1u << lane;
    w.live &= ~bit;
    uint32_t waiting = 0;
    int first = -1;
    for (uint32_t m = w.arrived & ~bit; m; m &= m - 1) {
        const int l = __builtin_ctz(m);
        if (w.mask[l] & bit) { waiting |= 1u << l; if (first < 0) first = l; }
    }
    if (waiting)
        warp_misuse(wi, w.mask[first], bit,
                    "%s(0x%08x, ...) in warp %d: lane%s %s wait%s for lane %d, which has returned: "
                    ANDREA_RULE "; compute the mask with __ballot_sync/__activemask or keep that lane "
                    "alive until %s", w.what[first], w.mask[first], wi, __builtin_popcount(waiting) > 1 ? "s" : "",
                    lanes_text(waiting).c_str(), __builtin_popcount(waiting) > 1 ? "" : "s", lane,
                    sync_kind(w.what[first]));
}

template <class T> inline uint64_t to_bits(T v) {
    static_assert(sizeof(T) <= 8, "a warp collective on a type wider than 8 bytes");
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    return bits;
}
template <class T> inline T from_bits(uint64_t bits) {
    T v;
    std::memcpy(&v, &bits, sizeof(T));
    return v;
}

// A shuffle's lane l reads lane src outside the group: record the misuse (false: the caller fails).
inline bool complete_misread(Warp& w, int wi, uint32_t mask, int l, int src) {
    const uint32_t src_bit = 1u << src;
    if (!(w.live & src_bit))
        warp_misuse(wi, mask, src_bit, "%s(0x%08x, ...) in warp %d: lane %d reads lane %d, which %s: on "
                    "a GPU the value is undefined; read only lanes inside the block that take part in "
                    "the shuffle (compute the mask with __ballot_sync/__activemask or keep those lanes "
                    "alive until the shuffle)", w.what[l], mask, wi, l, src,
                    (w.exists & src_bit) ? "has returned" : "does not exist (partial warp)");
    else
        warp_misuse(wi, mask, src_bit, "%s(0x%08x, ...) in warp %d: lane %d reads lane %d, which is not "
                    "in the mask: on a GPU the value is undefined; add lane %d to the mask or read a "
                    "lane inside it", w.what[l], mask, wi, l, src, src);
    return false;
}

// The last lane of a group computes every lane's result; false (after recording the misuse)
// when a shuffle reads a lane outside the group.
inline bool complete(Warp& w, int wi, uint32_t mask, int op, int size) {
    if (op == C_SYNC) return true;
    if (op == C_SHFL) {  // the common case, alone: each lane's source, in the group or not
        for (uint32_t m = mask; m; m &= m - 1) {
            const int l = __builtin_ctz(m), src = w.src[l];
            if (src < 0 || src >= 32) w.result[l] = w.value[l];
            else if (mask >> src & 1) w.result[l] = w.value[src];
            else return complete_misread(w, wi, mask, l, src);
        }
        return true;
    }
    const auto sext = [&](uint64_t b) { return size == 8 ? (int64_t)b : (int64_t)(int32_t)(uint32_t)b; };
    uint64_t acc = 0;
    bool first = true;
    uint32_t ballot = 0;
    for (uint32_t m = mask; m; m &= m - 1) {
        const int l = __builtin_ctz(m);
        const uint64_t v = w.value[l];
        if (v) ballot |= 1u << l;
        if (first) { acc = v; first = false; continue; }
        switch (op) {
        case C_ADD: acc += v; break;
        case C_MIN_I: acc = sext(v) < sext(acc) ? v : acc; break;
        case C_MAX_I: acc = sext(v) > sext(acc) ? v : acc; break;
        case C_MIN_U: acc = v < acc ? v : acc; break;
        case C_MAX_U: acc = v > acc ? v : acc; break;
        case C_AND: acc &= v; break;
        case C_OR: acc |= v; break;
        case C_XOR: acc ^= v; break;
        }
    }
    for (uint32_t m = mask; m; m &= m - 1) {
        const int l = __builtin_ctz(m);
        uint64_t r = acc;
        if (op == C_BALLOT) {
            r = ballot;
        } else if (op == C_MATCH_ANY || op == C_MATCH_ALL) {
            uint32_t same = 0;
            for (uint32_t k = mask; k; k &= k - 1)
                if (w.value[__builtin_ctz(k)] == w.value[l]) same |= 1u << __builtin_ctz(k);
            r = op == C_MATCH_ANY ? same : (same == mask ? mask : 0);
        }
        w.result[l] = r;
    }
    return true;
}

// Lane offers `value` (and, for a shuffle, the lane it reads: -1 for its own value) to the
// collective `op` of the lanes in mask; returns its result once every one of them has arrived.
__attribute__((noinline)) inline uint64_t collective(uint32_t mask, const char* what, int op, uint64_t value,
                                                     int src = -1, int size = 4) {
    Sched& s = sched();
    Fiber* f = s.cur;
    const int wi = f->lid >> 5, lane = f->lid & 31;
    Warp& w = s.warps[wi];
    const uint32_t bit = 1u << lane;
    if (!(mask & bit)) {
        warp_misuse(wi, mask, bit, "lane %d of warp %d calls %s(0x%08x, ...) with a mask that does not "
                    "name itself: each calling lane must set its own bit; compute the mask with "
                    "__ballot_sync/__activemask", lane, wi, what, mask);
        warp_fail(f);
    }
    if (uint32_t ghosts = mask & ~w.exists) {
        warp_misuse(wi, mask, ghosts, "%s(0x%08x, ...) in warp %d (lane %d calls it) names lanes %s, which do "
                    "not exist: the block has %d threads, so this warp has lanes %s; " ANDREA_RULE
                    "; compute the mask with __ballot_sync/__activemask or launch whole warps (a multiple "
                    "of 32 threads)", what, mask, wi, lane, lanes_text(ghosts).c_str(), s.nthreads,
                    lanes_text(w.exists).c_str());
        warp_fail(f);
    }
    if (uint32_t gone = mask & ~w.live) {
        warp_misuse(wi, mask, gone, "%s(0x%08x, ...) in warp %d (lane %d calls it) names lanes %s, which have "
                    "returned: " ANDREA_RULE "; compute the mask with __ballot_sync/__activemask or keep "
                    "those lanes alive until %s", what, mask, wi, lane, lanes_text(gone).c_str(), sync_kind(what));
        warp_fail(f);
    }
    // Lanes that name each other must meet at the same collective with the same mask. Every lane
    // waiting was checked on arrival, so one lane per waiting group stands for its group.
    for (uint32_t m = w.arrived; m; m &= ~w.mask[__builtin_ctz(m)] & (m - 1)) {
        const int l = __builtin_ctz(m);
        const bool named = (mask >> l & 1) || (w.mask[l] & bit);
        if (named && (w.mask[l] != mask || w.op[l] != op || (w.what[l] != what && std::strcmp(w.what[l], what)))) {
            warp_misuse(wi, mask, 1u << l, "lane %d of warp %d calls %s(0x%08x, ...) while lane %d waits at "
                        "%s(0x%08x, ...): lanes whose masks name each other must reach the same warp "
                        "collective with the same mask (on a GPU: undefined)", lane, wi, what, mask, l,
                        w.what[l], w.mask[l]);
            warp_fail(f);
        }
    }
    w.arrived |= bit;
    w.mask[lane] = mask;
    w.what[lane] = what;
    w.op[lane] = op;
    w.value[lane] = value;
    w.src[lane] = src;
    if ((w.arrived & mask) == mask) {
        if (!complete(w, wi, mask, op, size)) warp_fail(f);
        for (uint32_t m = mask & ~bit; m; m &= m - 1) {
            Fiber* g = s.pool[wi * 32 + __builtin_ctz(m)];
            if (g->state == AT_WARP) g->state = READY;
        }
        w.arrived &= ~mask;
        return w.result[lane];
    }
    f->state = AT_WARP;
    yield(f);
    return w.result[lane];
}

inline void warp_sync(uint32_t mask, const char* what) { collective(mask, what, C_SYNC, 0); }

template <class T> inline T shfl(uint32_t mask, T v, int src, const char* what) {
    return from_bits<T>(collective(mask, what, C_SHFL, to_bits(v), src));
}

inline uint32_t vote(uint32_t mask, int pred, const char* what) {
    return (uint32_t)collective(mask, what, C_BALLOT, pred != 0);
}

// __activemask: the live lanes of the warp at the same call site, found once no lane of the
// block can run on (a fiber has no program counter to compare, the call site stands in).
inline uint32_t activemask(const void* site) {
    Sched& s = sched();
    Fiber* f = s.cur;
    f->site = site;
    f->state = AT_ACTIVEMASK;
    s.at_activemask++;
    yield(f);
    return f->active;
}

inline void resolve_activemask() {
    Sched& s = sched();
    for (int i = 0; i < s.nthreads; i++) {
        Fiber* f = s.pool[i];
        if (f->state != AT_ACTIVEMASK) continue;
        f->active = 0;
        const int base = i & ~31;
        for (int l = 0; l < 32 && base + l < s.nthreads; l++) {
            const Fiber* g = s.pool[base + l];
            if (g->state == AT_ACTIVEMASK && g->site == f->site) f->active |= 1u << l;
        }
    }
    for (int i = 0; i < s.nthreads; i++)
        if (s.pool[i]->state == AT_ACTIVEMASK) s.pool[i]->state = READY;
    s.at_activemask = 0;
}

inline int lane_id() { return sched().cur->lid & 31; }

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

// --- shared memory poisoning --------------------------------------------------------------------

struct TlsQuery { const void* probe; char* block; size_t size; };

inline int find_tls(struct dl_phdr_info* info, size_t, void* data) {
    auto* q = static_cast<TlsQuery*>(data);
    bool mine = false;
    const ElfW(Phdr)* tls = nullptr;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr)& p = info->dlpi_phdr[i];
        const uintptr_t lo = info->dlpi_addr + p.p_vaddr, a = (uintptr_t)q->probe;
        if (p.p_type == PT_LOAD && a >= lo && a < lo + p.p_memsz) mine = true;
        if (p.p_type == PT_TLS) tls = &p;
    }
    if (!mine) return 0;
    if (tls) {
        q->block = static_cast<char*>(info->dlpi_tls_data);
        q->size = tls->p_memsz;
    }
    return 1;
}

thread_local volatile char tls_anchor;  // touched (volatile: the store must happen) so this OS thread's TLS block exists before the query

struct SharedLayout {  // this OS thread's shared memory, found once per launch
    struct Range { char* lo; char* hi; };
    std::vector<Range> fill;  // poisoned in full at each block start
};

// Everything thread_local in this library is shared memory: the static __shared__ arrays.
// (`extern __shared__` arrays are not: see dyn_shared_base in "Guard".)
inline void shared_layout(SharedLayout& out) {
    std::vector<SharedLayout::Range> skip;
    tls_anchor = 1;
    TlsQuery q{(const void*)&shared_layout, nullptr, 0};
    dl_iterate_phdr(find_tls, &q);
    if (!q.block) return;
    std::sort(skip.begin(), skip.end(), [](auto& a, auto& b) { return a.lo < b.lo; });
    char* at = q.block;
    char* const end = q.block + q.size;
    for (const auto& r : skip) {
        if (r.lo > at) out.fill.push_back({at, std::min(r.lo, end)});
        at = std::max(at, r.hi);
    }
    if (at < end) out.fill.push_back({at, end});
}

// NaN bytes (0xff: a NaN as float and double) so reads of unwritten shared memory show up.
inline void poison_shared(const SharedLayout& layout) {
    for (const auto& r : layout.fill) std::memset(r.lo, 0xff, r.hi - r.lo);
    const Guard& g = guard();
    if (g.dyn_base) std::memset(g.dyn_base, 0xff, g.dyn_bytes + g.dyn_slack);
}

// --- the launch's report -------------------------------------------------------------------------

inline void tensor_core_block_start(int nthreads);  // the tensor-core section, at the end

struct LaunchInfo {  // filled on failure, read by Python (andrea_info_size() checks the layout)
    int block[3];            // the block that failed (isolated: also the block now running)
    int waiting_barrier, waiting_warp, returned, threads;
    int warp;                // WARP_MISUSE: the warp, its mask and the lanes at fault
    unsigned mask, lanes;
    char message[512];
    int thread[3];           // FAULT: the thread at fault (-1: not known)
    int signal;              // FAULT: SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT (0: a canary); CRASHED: what ended the child
    int access;              // FAULT: 1 write, 0 read, -1 not known
    int running;             // TIMEOUT: threads of the block still running
    unsigned long long address;  // FAULT: the address touched
    double limit_s;          // the running block's time budget
    volatile double block_start;  // the process's CPU seconds when the running block began: the parent watches it
};

inline void describe_deadlock(LaunchInfo* info) {
    Sched& s = sched();
    std::string at_barrier, at_warp;
    auto add = [](std::string& out, int lid) {
        if (out.size() < 200) out += (out.empty() ? "" : ",") + std::to_string(lid);
    };
    for (int i = 0; i < s.nthreads; i++) {
        if (s.pool[i]->state == AT_BARRIER) { info->waiting_barrier++; add(at_barrier, i); }
        else if (s.pool[i]->state == AT_WARP) { info->waiting_warp++; add(at_warp, i); }
        else if (s.pool[i]->state == DONE) info->returned++;
    }
    std::snprintf(info->message, sizeof info->message,
                  "%d of %d threads wait at __syncthreads (linear ids %s), %d at a warp sync (%s), "
                  "%d returned",
                  info->waiting_barrier, s.nthreads, at_barrier.empty() ? "-" : at_barrier.c_str(),
                  info->waiting_warp, at_warp.empty() ? "-" : at_warp.c_str(), info->returned);
}

// =================================================================================================
// Guard: a wrong kernel is reported and never takes the caller down (issue 9).
//  - Signals in a fiber (a fault, an abort, a trap, an integer division by zero) end the launch
//    with the thread, its block and the address, instead of ending the process.
//  - Dynamic shared memory lives in its own mapping whose last byte ends at a guard page, so one
//    element past the launch's bytes faults at that access; the few bytes that 16-byte alignment
//    leaves between the end and the guard page are a canary checked at each block's end. In the
//    AddressSanitizer build it is an exact malloc instead: ASan's redzone starts at the first
//    byte past it. (Device arrays get the same guard pages from Python: cpu_runtime.)
//  - A watchdog: a block that runs past its budget is stopped (an endless loop?). The budget is
//    --timeout, or else max(base, factor x the slowest block of the launch so far), so it grows
//    with honest work and still stops a loop that never ends.
//  - Isolation: with opts->isolate the launch runs in a forked child; the device arrays are
//    MAP_SHARED (Python allocates them so), the report comes back in a shared page, and a stray
//    write into the heap, an abort or a crash ends only the child.

// The watchdog counts CPU seconds, not wall-clock ones: a loaded machine slows honest work down
// but does not make it look endless.
inline double seconds(clockid_t clock) {
    timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}
inline double cpu_now() { return seconds(CLOCK_THREAD_CPUTIME_ID); }

struct SignalState { struct sigaction segv, bus, fpe, ill, abrt, alarm; stack_t alt; timer_t timer; bool timer_ok; };

// From a signal handler in a fiber back to the scheduler, for good: the fiber is restarted
// before its next use.
inline void escape_fiber(int sig) {
    Sched& s = sched();
    Fiber* f = s.cur;
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
    if (g.timed_out || cpu_now() - g.block_start < g.budget) return;
    g.timed_out = 1;
    if (g.in_fiber) escape_fiber(SIGALRM);
}

inline void catch_faults(SignalState& old) {
    Sched& s = sched();
    s.owner = pthread_self();
    s.faulted = 0;
    if (s.alt_stack.empty()) s.alt_stack.resize(64 << 10);
    stack_t alt{};
    alt.ss_sp = s.alt_stack.data();
    alt.ss_size = s.alt_stack.size();
    sigaltstack(&alt, &old.alt);  // the faulting fiber's stack may be the problem
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
    // The tick goes to this thread only (other threads of the caller must not take it).
    sigevent ev{};
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = SIGALRM;
    ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
    old.timer_ok = timer_create(CLOCK_THREAD_CPUTIME_ID, &ev, &old.timer) == 0;
    if (old.timer_ok) {
        const itimerspec tick{{0, 25000000}, {0, 25000000}};
        timer_settime(old.timer, 0, &tick, nullptr);
    }
}

inline void restore_faults(const SignalState& old) {
    if (old.timer_ok) timer_delete(old.timer);  // a tick already sent is delivered before this returns
    sigaction(SIGALRM, &old.alarm, nullptr);
    sigaction(SIGSEGV, &old.segv, nullptr);
    sigaction(SIGBUS, &old.bus, nullptr);
    sigaction(SIGFPE, &old.fpe, nullptr);
    sigaction(SIGILL, &old.ill, nullptr);
    sigaction(SIGABRT, &old.abrt, nullptr);
    sigaltstack(&old.alt, nullptr);
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

// --- the launch ----------------------------------------------------------------------------------

// Run one block to the end: every fiber until it blocks, then release barriers, until all return.
inline int run_block(LaunchInfo* info) {
    Sched& s = sched();
    Guard& g = guard();
    const int n = s.nthreads;
    s.barrier_gen++;
    for (;;) {
        bool ran = false;
        for (int k = 0; k < n; k++) {
            Fiber* f = s.pool[s.reverse ? n - 1 - k : k];
            if (f->state != READY) continue;
            ran = true;
            resume(f);
            if (s.misused) {
                std::snprintf(info->message, sizeof info->message, "%s", s.misuse);
                info->warp = s.misuse_warp;
                info->mask = s.misuse_mask;
                info->lanes = s.misuse_lanes;
                return WARP_MISUSE;
            }
            if (s.aborted) {
                std::snprintf(info->message, sizeof info->message, "%s", s.abort_message);
                return ASSERT;
            }
            if (s.faulted) {
                describe_fault(f, info);
                return FAULT;
            }
            if (g.timed_out) {
                info->running = s.live;
                std::snprintf(info->message, sizeof info->message,
                              "ran past its %.3g s limit with %d of %d threads still running "
                              "(%d at __syncthreads, %d at a warp sync): an endless loop?",
                              g.budget, s.live, n, s.at_barrier, [&] {
                                  int w = 0;
                                  for (int i = 0; i < n; i++) w += s.pool[i]->state == AT_WARP;
                                  return w;
                              }());
                return TIMEOUT;
            }
        }
        if (s.live == 0) {
            const long hit = dyn_canary_hit();
            if (hit < 0) return OK;
            info->thread[0] = info->thread[1] = info->thread[2] = -1;
            info->signal = 0;
            info->access = 1;
            std::snprintf(info->message, sizeof info->message,
                          "a thread wrote byte %zu of dynamic shared memory, which has %zu bytes (the launch's "
                          "shared_mem): an overrun, found at the block's end", g.dyn_bytes + hit, g.dyn_bytes);
            return FAULT;
        }
        if (s.at_barrier == s.live) {
            for (int i = 0; i < n; i++)
                if (s.pool[i]->state == AT_BARRIER) s.pool[i]->state = READY;
            s.at_barrier = 0;
            s.barrier_gen++;
            continue;
        }
        if (!ran && s.at_activemask) {
            resolve_activemask();
            continue;
        }
        if (!ran) {
            describe_deadlock(info);
            return DEADLOCK;
        }
    }
}

// Fibers for n threads: made before a fork, so every child starts with a warm pool.
inline int prepare_pool(int n, LaunchInfo* info) {
    Sched& s = sched();
    while ((int)s.pool.size() < n) {
        Fiber* f = new Fiber();
        if (!fiber_init(f)) {
            delete f;
            std::snprintf(info->message, sizeof info->message, "cannot map a fiber stack");
            return INTERNAL;
        }
        s.pool.push_back(f);
    }
    for (int i = 0; i < n; i++)  // fibers left inside a kernel by a deadlock start over
        if (!s.pool[i]->parked && !fiber_init(s.pool[i])) return INTERNAL;
    return OK;
}

inline int launch_locked(void (*entry)(void**), void** args, const unsigned* grid, const unsigned* block,
                         size_t shared_bytes, int reverse, const LaunchOptions* opts, LaunchInfo* info) {
    Sched& s = sched();
    Guard& g = guard();
    const int n = (int)(block[0] * block[1] * block[2]);
    if (const int rc = prepare_pool(n, info)) return rc;
    s.warps.assign((n + 31) / 32, Warp{});
    for (int i = 0; i < n; i++) {
        Fiber* f = s.pool[i];
        f->lid = i;
        f->tid = uint3{(unsigned)(i % block[0]), (unsigned)(i / block[0] % block[1]),
                       (unsigned)(i / (block[0] * block[1]))};
    }
    s.entry = entry;
    s.args = args;
    s.nthreads = n;
    s.reverse = reverse != 0;
    blockDim = dim3(block[0], block[1], block[2]);
    gridDim = dim3(grid[0], grid[1], grid[2]);
    if (!dyn_map(shared_bytes)) {
        dyn_unmap();
        std::snprintf(info->message, sizeof info->message, "cannot map %zu bytes of dynamic shared memory", shared_bytes);
        return INTERNAL;
    }
    SharedLayout layout;
    shared_layout(layout);
    g.opts = opts;
    g.timed_out = 0;
    g.slowest = 0;
    g.block_start = cpu_now();
    g.budget = 1e30;
    SignalState old;
    catch_faults(old);
    int rc = OK;
    for (unsigned bz = 0; bz < grid[2] && rc == OK; bz++)
        for (unsigned by = 0; by < grid[1] && rc == OK; by++)
            for (unsigned bx = 0; bx < grid[0] && rc == OK; bx++) {
                blockIdx = uint3{bx, by, bz};
                info->block[0] = (int)bx; info->block[1] = (int)by; info->block[2] = (int)bz;
                poison_shared(layout);
                tensor_core_block_start(n);
                for (int i = 0; i < n; i++) s.pool[i]->state = READY;
                for (int w = 0; w < (int)s.warps.size(); w++) {
                    const int lanes = std::min(32, n - 32 * w);
                    s.warps[w].exists = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1;
                    s.warps[w].live = s.warps[w].exists;
                    s.warps[w].arrived = 0;
                }
                s.live = n;
                s.at_barrier = 0;
                s.at_activemask = 0;
                s.misused = false;
                s.aborted = false;
                g.budget = opts->timeout_s > 0 ? opts->timeout_s : std::max(opts->base_s, opts->factor * g.slowest);
                info->limit_s = g.budget;
                g.block_start = cpu_now();
                info->block_start = seconds(CLOCK_PROCESS_CPUTIME_ID);  // the clock the parent can read
                rc = run_block(info);
                g.slowest = std::max(g.slowest, cpu_now() - g.block_start);
            }
    restore_faults(old);
    dyn_unmap();
    if (rc != OK) info->threads = n;
    return rc;
}

// The child's stderr (an assert's message, glibc's "corrupted" line): its last line, for the report.
inline std::string last_line(int fd) {
    std::string text;
    char buf[4096];
    lseek(fd, 0, SEEK_SET);
    for (ssize_t k; (k = read(fd, buf, sizeof buf)) > 0;) text.append(buf, (size_t)k);
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    const size_t at = text.rfind('\n');
    return at == std::string::npos ? text : text.substr(at + 1);
}

inline void copy_out(int fd) {  // what the kernels printed to stderr, passed on
    char buf[4096];
    lseek(fd, 0, SEEK_SET);
    for (ssize_t k; (k = read(fd, buf, sizeof buf)) > 0;)
        if (write(2, buf, (size_t)k) < 0) break;
}

// malloc checks the chunks it touches: a few sizes from the bins and the top of the heap.
__attribute__((noinline)) inline void probe_heap() {
    void* volatile blocks[4] = {malloc(24), malloc(1000), malloc(60000), malloc(120000)};
    for (void* b : blocks) free(b);
}

// The launch in a forked child; this process only waits, and stops a child that outlives its
// own watchdog by more than a grace period.
inline int launch_isolated(void (*entry)(void**), void** args, const unsigned* grid, const unsigned* block,
                           size_t shared_bytes, int reverse, const LaunchOptions* opts, LaunchInfo* info) {
    const int n = (int)(block[0] * block[1] * block[2]);
    if (const int rc = prepare_pool(n, info)) return rc;
    void* page = mmap(nullptr, sizeof(LaunchInfo), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) {
        std::snprintf(info->message, sizeof info->message, "cannot map the launch's report page");
        return INTERNAL;
    }
    LaunchInfo* shared = new (page) LaunchInfo(*info);
    const int err = (int)syscall(SYS_memfd_create, "andrea-kernel-stderr", 1u /* MFD_CLOEXEC */);
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
        signal(SIGINT, SIG_DFL);  // Ctrl-C ends the child too (the caller's handler is Python's)
        signal(SIGTERM, SIG_DFL);
        if (err >= 0) dup2(err, 2);
        const int rc = launch_locked(entry, args, grid, block, shared_bytes, reverse, opts, shared);
        if (rc == OK) probe_heap();  // a stray write into the heap's bookkeeping shows up here, not later
        std::fflush(nullptr);
        _exit(rc);
    }
    int rc = INTERNAL, status = 0;
    bool killed = false;
    if (pid < 0) {
        std::snprintf(shared->message, sizeof shared->message, "cannot fork the launch's process");
    } else {
        const int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        clockid_t child_cpu;
        const bool watch = clock_getcpuclockid(pid, &child_cpu) == 0;
        for (;;) {
            const pid_t r = waitpid(pid, &status, WNOHANG);
            if (r == pid) break;
            if (r < 0 && errno != EINTR) { status = -1; break; }
            if (pidfd >= 0) {
                pollfd p{pidfd, POLLIN, 0};
                poll(&p, 1, 100);
            } else {
                usleep(1000);
            }
            const double start = shared->block_start;
            if (watch && !killed && start > 0 && seconds(child_cpu) - start > shared->limit_s + 5.0) {
                kill(pid, SIGKILL);
                killed = true;
            }
        }
        if (pidfd >= 0) close(pidfd);
        if (killed) {
            rc = TIMEOUT;
            shared->running = -1;
            std::snprintf(shared->message, sizeof shared->message,
                          "ran past its %.3g s limit and did not stop at the watchdog: its process was killed "
                          "(an endless loop?)", shared->limit_s);
        } else if (status != -1 && WIFEXITED(status)) {
            rc = WEXITSTATUS(status);
            if (rc == FAULT && shared->signal == SIGABRT && err >= 0) {  // glibc's or assert's own words
                const std::string why = last_line(err);
                const size_t used = std::strlen(shared->message);
                if (!why.empty())
                    std::snprintf(shared->message + used, sizeof shared->message - used, ": %s", why.c_str());
            } else if (err >= 0) {
                copy_out(err);
            }
        } else {
            rc = CRASHED;
            shared->signal = status == -1 ? 0 : WTERMSIG(status);
            const std::string why = err >= 0 ? last_line(err) : "";
            std::snprintf(shared->message, sizeof shared->message,
                          "the launch's process died of %s%s%s (a stray write that corrupted memory outside the "
                          "arrays?)", signal_text(shared->signal), why.empty() ? "" : ": ", why.c_str());
        }
    }
    if (err >= 0) close(err);
    std::memcpy((void*)info, (const void*)shared, sizeof(LaunchInfo));
    munmap(page, sizeof(LaunchInfo));
    return rc;
}

inline int launch(void (*entry)(void**), void** args, const unsigned* grid, const unsigned* block,
                  size_t shared_bytes, int reverse, const LaunchOptions* opts, LaunchInfo* info) {
    Sched& s = sched();
    std::lock_guard<std::mutex> lock(s.mu);
    const unsigned long long nthreads = (unsigned long long)block[0] * block[1] * block[2];
    if (nthreads == 0 || nthreads > 1024 || grid[0] == 0 || grid[1] == 0 || grid[2] == 0) {
        std::snprintf(info->message, sizeof info->message, "bad launch geometry");
        return BAD_LAUNCH;
    }
    if (shared_bytes > (size_t)1 << 30) {
        std::snprintf(info->message, sizeof info->message, "dynamic shared memory of %zu bytes", shared_bytes);
        return BAD_LAUNCH;
    }
    if (opts->isolate) return launch_isolated(entry, args, grid, block, shared_bytes, reverse, opts, info);
    return launch_locked(entry, args, grid, block, shared_bytes, reverse, opts, info);
}
// ================================================================================= end of Guard

// --- argument unpacking and signatures for the generated wrapper ---------------------------------

template <class T> inline void kind_of(std::string& out) {
    using U = std::remove_cv_t<T>;
    if constexpr (std::is_pointer_v<U>) {
        using P = std::remove_pointer_t<U>;
        out += "p8:";
        if constexpr (std::is_const_v<P>) out += "c";  // the kernel only reads through it
        if constexpr (std::is_void_v<std::remove_cv_t<P>>) out += "v";
        else if constexpr (std::is_pointer_v<P>) out += "p8";
        else kind_of<P>(out);
    } else if constexpr (std::is_same_v<U, bool>) {
        out += "b1";
    } else if constexpr (std::is_integral_v<U>) {
        out += (std::is_signed_v<U> ? "i" : "u") + std::to_string(sizeof(U));
    } else if constexpr (std::is_floating_point_v<U>) {
        out += "f" + std::to_string(sizeof(U));
    } else {
        out += "s" + std::to_string(sizeof(U));  // a struct passed by value
    }
}

template <class... P> const char* signature(void (*)(P...)) {
    static const std::string sig = [] {
        std::string s;
        ((s += (s.empty() ? "" : " "), kind_of<P>(s)), ...);
        return s;
    }();
    return sig.c_str();
}

template <class... P, size_t... I>
inline void call_with(void (*k)(P...), void** a, std::index_sequence<I...>) {
    k(*static_cast<std::remove_cv_t<P>*>(a[I])...);
}
template <class... P> inline void call(void (*k)(P...), void** a) {
    call_with(k, a, std::index_sequence_for<P...>{});
}


}  // namespace
}  // namespace andrea

#define ANDREA_EXPORT extern "C" __attribute__((visibility("default")))

// ---------------------------------------------------------------------------------------------
// Barriers and warp intrinsics

inline void __syncthreads() {
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

// The one C entry point Python calls (ctypes releases the GIL around it).
ANDREA_EXPORT int andrea_launch(void (*entry)(void**), void** args, const unsigned* grid,
                             const unsigned* block, size_t shared_bytes, int reverse,
                             const andrea::LaunchOptions* opts, andrea::LaunchInfo* info) {
    return andrea::launch(entry, args, grid, block, shared_bytes, reverse, opts, info);
}
ANDREA_EXPORT int andrea_info_size() { return (int)sizeof(andrea::LaunchInfo); }
ANDREA_EXPORT int andrea_options_size() { return (int)sizeof(andrea::LaunchOptions); }

// ---------------------------------------------------------------------------------------------
// The rest of CUDA's device surface (math, rounding variants, bit tricks, cache hints, atomics,
// block votes, warp reduce/match, clocks): a section of its own. The half and bfloat16 types
// and cooperative groups come with the headers a kernel file includes (cuda_fp16.h, ...), from
// the include folder the build passes (cpu_include/).
#include "cpu_runtime/intrinsics.h"

// =============================================================================================
// Tensor cores: the PTX instructions behind the kernel file's tensor-core wrappers, emulated.
//
// The kernel file wraps each instruction in a device function whose body is inline PTX under
// __CUDA_ARCH__ and, in the CPU build, a call into namespace ptx_emulated below. The fragment
// layouts are the PTX ISA's ("Matrix Fragments for mma.m16n8k16 with floating point type",
// "... for mma.m16n8k8", "ldmatrix"): groupID g = lane >> 2, threadID_in_group t = lane % 4.
//
// Faithful where a wrong kernel would otherwise pass:
//  - mma.sync and ldmatrix are .aligned: all 32 lanes of the warp must reach the same instruction
//    (same kind, same call site); a partial warp, a returned lane or a divergent lane is reported
//    like any other warp misuse.
//  - ldmatrix reads shared memory only, at 16-byte aligned row addresses.
//  - cp.async: the destination reads as NaN bytes (0xff) until the issuing thread's
//    cp.async.wait_group retires the group; the source is read when the copy is issued.
//  - mma with tf32 operands ignores their low 13 bits, as the hardware does: raw fp32 that skipped
//    cvt.rna.tf32 is truncated, not rounded.
// The products of bf16 or tf32 operands are exact in double; each output is summed in double and
// rounded once (a GPU's summation order inside one mma is unspecified: compare with tolerances).
//
// Speed: a .aligned instruction is one round per warp. Each lane leaves pointers to its operands
// and waits; the last lane to arrive computes the whole warp's result at once and writes every
// lane's registers (the waiting lanes' stacks stay put while they wait), so an emulated mma costs
// one pass over 16x8x16 products, not 32 shuffles per lane.

namespace andrea {
namespace {

inline bool is_shared(const void* p, size_t bytes);

struct AlignedRound {            // one warp at one .aligned instruction
    uint32_t deposited = 0;      // lanes that have left their operands
    const char* what = nullptr;  // the instruction, e.g. "mma.sync.aligned.m16n8k16..."
    const void* site = nullptr;  // where the kernel calls it
    uint64_t completed = 0;      // rounds computed so far: a waiting lane checks its own ran
    void* operand[32][4];
};

struct PendingCopy { void* dst; unsigned char data[16]; int bytes; };

struct CpAsyncQueue {            // one thread's cp.async copies not yet waited for
    std::vector<PendingCopy> open;                    // since the last commit_group
    std::vector<std::vector<PendingCopy>> committed;  // oldest first
};

struct TensorCoreState {
    std::vector<AlignedRound> rounds;  // per warp
    std::vector<CpAsyncQueue> copies;  // per thread of the block
    char* tls_lo = nullptr;            // this OS thread's shared memory (its TLS block)
    char* tls_hi = nullptr;
};

inline TensorCoreState& tensor_cores() {
    static TensorCoreState* t = new TensorCoreState();
    return *t;
}

// Called by launch() at each block start: no copy or round of the previous block carries over.
inline void tensor_core_block_start(int nthreads) {
    TensorCoreState& tc = tensor_cores();
    tc.rounds.resize((nthreads + 31) / 32);
    for (AlignedRound& r : tc.rounds) r.deposited = 0;
    tc.copies.assign(nthreads, CpAsyncQueue{});
    TlsQuery q{(const void*)&tensor_core_block_start, nullptr, 0};
    dl_iterate_phdr(find_tls, &q);
    tc.tls_lo = q.block;
    tc.tls_hi = q.block ? q.block + q.size : nullptr;
}

// Shared memory in the CPU build: the library's thread-local storage of this OS thread (static
// __shared__ arrays), or an `extern __shared__` array.
inline bool is_shared(const void* p, size_t bytes) {
    const char* c = static_cast<const char*>(p);
    const TensorCoreState& tc = tensor_cores();
    if (tc.tls_lo && c >= tc.tls_lo && c + bytes <= tc.tls_hi) return true;
    const Guard& g = guard();  // the launch's dynamic shared bytes (see "Guard")
    return g.dyn_base && c >= g.dyn_base && c + bytes <= g.dyn_base + g.dyn_bytes;
}

// One lane reaches a .aligned instruction. Returns after the warp's round has run `body`, which
// sees every lane's operands; reports misuse (and never returns) if the warp is not converged.
__attribute__((noinline)) inline void aligned_round(const char* what, const void* site, void* o0, void* o1,
                                                    void* o2, void* o3, void (*body)(AlignedRound&)) {
    Sched& s = sched();
    Fiber* f = s.cur;
    const int wi = f->lid >> 5, lane = f->lid & 31;
    const uint32_t bit = 1u << lane;
    Warp& w = s.warps[wi];
    AlignedRound& r = tensor_cores().rounds[wi];
    if (w.arrived == 0) r.deposited = 0;  // the first lane of a new warp sync
    if (r.deposited && (r.site != site || r.what != what)) {
        warp_misuse(wi, 0xffffffffu, bit, "%s in warp %d: lane %d reaches it while lanes %s wait at %s "
                    "elsewhere: a .aligned instruction needs all 32 lanes of the warp at the same "
                    "instruction (on a GPU: undefined); keep the warp converged around it",
                    what, wi, lane, lanes_text(r.deposited).c_str(), r.what);
        warp_fail(f);
    }
    if (const uint32_t other = w.arrived & ~r.deposited) {
        warp_misuse(wi, 0xffffffffu, bit, "%s in warp %d: lane %d reaches it while lanes %s wait at %s: "
                    "a .aligned instruction needs all 32 lanes of the warp at the same instruction "
                    "(on a GPU: undefined); keep the warp converged around it",
                    what, wi, lane, lanes_text(other).c_str(), w.what[__builtin_ctz(other)]);
        warp_fail(f);
    }
    r.what = what;
    r.site = site;
    r.operand[lane][0] = o0; r.operand[lane][1] = o1; r.operand[lane][2] = o2; r.operand[lane][3] = o3;
    r.deposited |= bit;
    const uint64_t mine = r.completed;
    if (r.deposited == 0xffffffffu) {  // the last lane: compute for all, then release them
        body(r);
        r.completed++;
        r.deposited = 0;
    }
    warp_sync(0xffffffffu, what);  // refuses a partial warp or a returned lane
    if (r.completed == mine) {     // released by a lane at some other warp sync
        warp_misuse(wi, 0xffffffffu, bit, "%s in warp %d: lane %d waits there while lanes %s went on "
                    "from another warp collective: a .aligned instruction needs all 32 lanes of the warp at "
                    "the same instruction (on a GPU: undefined); keep the warp converged around it",
                    what, wi, lane, lanes_text(~r.deposited).c_str());
        warp_fail(f);
    }
}

inline float bf16_lo(uint32_t x) { uint32_t b = x << 16; float f; std::memcpy(&f, &b, 4); return f; }
inline float bf16_hi(uint32_t x) { uint32_t b = x & 0xffff0000u; float f; std::memcpy(&f, &b, 4); return f; }
inline float tf32_bits(uint32_t x) { uint32_t b = x & 0xffffe000u; float f; std::memcpy(&f, &b, 4); return f; }

// D(16x8) = A(16xK) B(Kx8) + C, from the warp's fragments; a(l, r, half) unpacks operand A.
template <int K> inline void mma_round(AlignedRound& r, float A[16][K], float B[K][8]) {
    double C[16][8];
    for (int l = 0; l < 32; l++) {
        const int g = l >> 2, t = l & 3;
        const float* c = static_cast<const float*>(r.operand[l][3]);
        C[g][2 * t] = c[0]; C[g][2 * t + 1] = c[1]; C[g + 8][2 * t] = c[2]; C[g + 8][2 * t + 1] = c[3];
    }
    for (int i = 0; i < 16; i++)
        for (int n = 0; n < 8; n++) {
            double acc = C[i][n];
            for (int k = 0; k < K; k++) acc += (double)A[i][k] * (double)B[k][n];
            C[i][n] = acc;
        }
    for (int l = 0; l < 32; l++) {  // every C was read above, so d may alias c
        const int g = l >> 2, t = l & 3;
        float* d = static_cast<float*>(r.operand[l][0]);
        d[0] = (float)C[g][2 * t]; d[1] = (float)C[g][2 * t + 1];
        d[2] = (float)C[g + 8][2 * t]; d[3] = (float)C[g + 8][2 * t + 1];
    }
}

inline void mma_bf16_round(AlignedRound& r) {
    float A[16][16], B[16][8];
    for (int l = 0; l < 32; l++) {
        const int g = l >> 2, t = l & 3;
        const uint32_t* a = static_cast<const uint32_t*>(r.operand[l][1]);
        const uint32_t* b = static_cast<const uint32_t*>(r.operand[l][2]);
        // a0: (g, 2t..2t+1)  a1: (g+8, 2t..)  a2: (g, 2t+8..)  a3: (g+8, 2t+8..); low half first
        A[g][2 * t] = bf16_lo(a[0]);         A[g][2 * t + 1] = bf16_hi(a[0]);
        A[g + 8][2 * t] = bf16_lo(a[1]);     A[g + 8][2 * t + 1] = bf16_hi(a[1]);
        A[g][2 * t + 8] = bf16_lo(a[2]);     A[g][2 * t + 9] = bf16_hi(a[2]);
        A[g + 8][2 * t + 8] = bf16_lo(a[3]); A[g + 8][2 * t + 9] = bf16_hi(a[3]);
        // b0: (k = 2t..2t+1, n = g)  b1: (k = 2t+8.., n = g)
        B[2 * t][g] = bf16_lo(b[0]);     B[2 * t + 1][g] = bf16_hi(b[0]);
        B[2 * t + 8][g] = bf16_lo(b[1]); B[2 * t + 9][g] = bf16_hi(b[1]);
    }
    mma_round<16>(r, A, B);
}

inline void mma_tf32_round(AlignedRound& r) {
    float A[16][8], B[8][8];
    for (int l = 0; l < 32; l++) {
        const int g = l >> 2, t = l & 3;
        const uint32_t* a = static_cast<const uint32_t*>(r.operand[l][1]);
        const uint32_t* b = static_cast<const uint32_t*>(r.operand[l][2]);
        // a0: (g, t)  a1: (g+8, t)  a2: (g, t+4)  a3: (g+8, t+4); b0: (k = t, n = g)  b1: (k = t+4, n = g)
        A[g][t] = tf32_bits(a[0]); A[g + 8][t] = tf32_bits(a[1]);
        A[g][t + 4] = tf32_bits(a[2]); A[g + 8][t + 4] = tf32_bits(a[3]);
        B[t][g] = tf32_bits(b[0]); B[t + 4][g] = tf32_bits(b[1]);
    }
    mma_round<8>(r, A, B);
}

// ldmatrix .xN: lanes 8i..8i+7 give the row addresses of 8x8 matrix i (16 bytes each). Lane L
// receives from matrix i row L/4, elements 2(L%4) and 2(L%4)+1; with .trans, column L/4, rows
// 2(L%4) and 2(L%4)+1. The low half holds the lower-indexed element.
template <int N, bool TRANS> inline void ldmatrix_round(AlignedRound& r) {
    const char* what = r.what;
    for (int l = 0; l < 8 * N; l++) {
        const void* p = r.operand[l][1];
        if ((uintptr_t)p % 16 != 0 || !is_shared(p, 16)) {
            const int wi = sched().cur->lid >> 5;
            warp_misuse(wi, 0xffffffffu, 1u << l, "%s in warp %d: lane %d gives row address %p, which is %s: "
                        "ldmatrix reads 16-byte rows of shared memory at 16-byte aligned addresses",
                        what, wi, l, p, (uintptr_t)p % 16 ? "not 16-byte aligned" : "not in shared memory");
            return;
        }
    }
    uint16_t m[4][8][8];
    for (int i = 0; i < N; i++)
        for (int row = 0; row < 8; row++) std::memcpy(m[i][row], r.operand[8 * i + row][1], 16);
    for (int l = 0; l < 32; l++) {
        uint32_t* out = static_cast<uint32_t*>(r.operand[l][0]);
        const int a = l / 4, b = 2 * (l % 4);
        for (int i = 0; i < N; i++)
            out[i] = TRANS ? (uint32_t)m[i][b][a] | (uint32_t)m[i][b + 1][a] << 16
                           : (uint32_t)m[i][a][b] | (uint32_t)m[i][a][b + 1] << 16;
    }
}

}  // namespace
}  // namespace andrea

namespace ptx_emulated {

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 d, a, b, c
__attribute__((noinline)) inline void mma_m16n8k16_bf16(float* d, const unsigned* a, const unsigned* b,
                                                        const float* c) {
    andrea::aligned_round("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", __builtin_return_address(0),
                          d, const_cast<unsigned*>(a), const_cast<unsigned*>(b), const_cast<float*>(c),
                          andrea::mma_bf16_round);
    andrea::Sched& s = andrea::sched();
    if (s.misused) andrea::warp_fail(s.cur);
}

// mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 d, a, b, c
__attribute__((noinline)) inline void mma_m16n8k8_tf32(float* d, const unsigned* a, const unsigned* b,
                                                       const float* c) {
    andrea::aligned_round("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", __builtin_return_address(0),
                          d, const_cast<unsigned*>(a), const_cast<unsigned*>(b), const_cast<float*>(c),
                          andrea::mma_tf32_round);
}

// ldmatrix.sync.aligned.m8n8.x{N}[.trans].shared.b16 {r}, [row]
template <int N, bool TRANS> __attribute__((noinline)) inline void ldmatrix(unsigned* r, const void* row) {
    static_assert(N == 1 || N == 2 || N == 4, "ldmatrix loads 1, 2 or 4 matrices");
    static const std::string what = std::string("ldmatrix.sync.aligned.m8n8.x") + std::to_string(N) +
                                    (TRANS ? ".trans" : "") + ".shared.b16";
    andrea::aligned_round(what.c_str(), __builtin_return_address(0), r, const_cast<void*>(row), nullptr, nullptr,
                          andrea::ldmatrix_round<N, TRANS>);
    andrea::Sched& s = andrea::sched();
    if (s.misused) andrea::warp_fail(s.cur);  // a bad address found by the round's last lane
}

// cp.async.cg.shared.global [dst], [src], 16, src_bytes: copies src_bytes (0..16) and fills the
// rest of the 16 bytes with zeros; dst holds NaN bytes until cp.async.wait_group retires it.
inline void cp_async_cg_16(void* dst, const void* src, int src_bytes) {
    andrea::Fiber* f = andrea::sched().cur;
    if ((uintptr_t)dst % 16 || (uintptr_t)src % 16 || !andrea::is_shared(dst, 16) || src_bytes < 0 ||
        src_bytes > 16) {
        const int wi = f->lid >> 5;
        andrea::warp_misuse(wi, 0, 1u << (f->lid & 31), "cp.async.cg.shared.global in thread %d: dst %p, src %p, "
                            "%d source bytes: cp.async copies 16 bytes from 16-byte aligned global memory to "
                            "16-byte aligned shared memory, 0 to 16 of them read from src", f->lid, dst, src,
                            src_bytes);
        andrea::warp_fail(f);
    }
    andrea::PendingCopy c{dst, {}, 16};
    if (src_bytes) std::memcpy(c.data, src, src_bytes);
    andrea::tensor_cores().copies[f->lid].open.push_back(c);
    std::memset(dst, 0xff, 16);
}

// cp.async.commit_group: the copies issued since the last commit become one group.
inline void cp_async_commit_group() {
    andrea::CpAsyncQueue& q = andrea::tensor_cores().copies[andrea::sched().cur->lid];
    q.committed.push_back(std::move(q.open));
    q.open.clear();
}

// cp.async.wait_group n: every group of this thread but the newest n has landed.
inline void cp_async_wait_group(int n) {
    andrea::CpAsyncQueue& q = andrea::tensor_cores().copies[andrea::sched().cur->lid];
    const size_t keep = (size_t)std::max(n, 0);
    size_t retire = q.committed.size() > keep ? q.committed.size() - keep : 0;
    for (size_t g = 0; g < retire; g++)
        for (const andrea::PendingCopy& c : q.committed[g]) std::memcpy(c.dst, c.data, c.bytes);
    q.committed.erase(q.committed.begin(), q.committed.begin() + retire);
}

// fp32 -> bf16 bits, round to nearest even (cvt.rn.bf16.f32); a NaN becomes the canonical 0x7fff.
inline unsigned f32_to_bf16_rn(float x) {
    unsigned b;
    std::memcpy(&b, &x, 4);
    if ((b & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
    return (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
}

// cvt.rn.bf16x2.f32 d, hi, lo: two floats into one .b32, the first operand in the UPPER half.
inline unsigned cvt_rn_bf16x2_f32(float hi, float lo) { return f32_to_bf16_rn(hi) << 16 | f32_to_bf16_rn(lo); }

// cvt.rna.tf32.f32: round to nearest, ties away from zero, into a .b32 whose low 13 bits are 0;
// infinities stay, a NaN stays a (quiet) NaN.
inline unsigned cvt_rna_tf32_f32(float x) {
    unsigned b;
    std::memcpy(&b, &x, 4);
    if ((b & 0x7f800000u) == 0x7f800000u) return (b & 0x007fffffu) ? ((b | 0x00400000u) & 0xffffe000u) : b;
    return (b + 0x1000u) & 0xffffe000u;
}

// ex2.approx.ftz.f32: 2^x with subnormal inputs and results flushed to sign-preserving zero. The
// GPU's value may be up to 2 ulp from the correctly rounded one (the PTX manual); exp2f's here is
// closer, so the kernels' tolerances carry the GPU's bound, not this one.
inline float ex2_approx_ftz_f32(float x) {
    if (std::fpclassify(x) == FP_SUBNORMAL) x = std::copysign(0.0f, x);
    const float y = exp2f(x);
    return std::fpclassify(y) == FP_SUBNORMAL ? std::copysign(0.0f, y) : y;
}

}  // namespace ptx_emulated
