// cpu_runtime/racecheck.h — racecheck: CUDA's memory model told to ThreadSanitizer, so the
// ThreadSanitizer build (`-fsanitize=thread`, the racecheck flavour) names every data race a GPU
// could expose. In every other build each hook below is an empty inline function.
//
// ThreadSanitizer is a happens-before detector: every access goes through its shadow memory, and
// two accesses to one byte by different threads, one a write, with no happens-before path between
// them, are a race. Its fiber API makes every CUDA thread a thread to it; what remains is saying
// which CUDA operations make such paths (the CUDA programming guide's memory model):
//  - a CUDA thread is a fresh TSan fiber per block (block 0's thread 5 and block 1's thread 5 are
//    different threads to it: nothing orders blocks of one launch);
//  - __syncthreads (and cg::sync, __syncthreads_count/and/or): when the block's barrier opens, the
//    clocks of every thread waiting there are joined and every one of them acquires the join;
//  - __syncwarp / a cg tile's sync: the same over the lanes of the mask, at the collective's
//    completion; shuffles, votes, reduces, matches and the .aligned tensor-core instructions meet
//    but order no memory;
//  - atomics are atomics (relaxed: they never race with each other and order nothing alone); an
//    atomic that follows a __threadfence() of its thread is a release on its address, and every
//    atomic read-modify-write acquires its address: the last-block pattern of a reduction is
//    ordered, a fence with no atomic after it orders nothing (and is remembered for the report);
//  - cp.async writes its destination when issued and again at the wait that retires it;
//  - a wgmma reads A (SS form) and B through its descriptors when issued and again at the wait that
//    retires it (tensor_cores.h: wgmma_race_read), as its warpgroup's lanes' ASYNC PROXIES: per
//    CUDA thread a second fiber ("block (..) thread (..) async proxy") whose clock is only what
//    fence.proxy.async has published. At a fence the proxy acquires its thread's clock; at every
//    barrier (and warp sync, named barrier, mbarrier) the proxies' clocks are joined as the
//    threads' are; at the wait that retires its reads the thread acquires its proxy's clock. So a
//    generic write (a store, cp.async) reaches a wgmma's read only through a fence TOGETHER with a
//    barrier (the writer's fence before it, or the reader's after it: PTX's proxy-preserved
//    causality order); a barrier alone leaves a race, named as the missing fence. An mbarrier's
//    complete_tx (a TMA copy's) releases to the proxies too: async-proxy writes need no fence;
//  - a launch starts after the host's writes and ends before the host's reads.
// Memory that is new for each block (shared memory, the fibers' stacks) forgets its history at
// each block start. The runtime's own bookkeeping (scheduler, warps, rounds) is never checked:
// runtime code runs inside ThreadSanitizer's ignore region, kernel code outside it.
// Part of cuda_cpu_runtime.h, which includes the parts in order: never included on its own.
#pragma once

#include <string>
#include <vector>

#if defined(__SANITIZE_THREAD__)
#define ANDREA_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ANDREA_TSAN 1
#endif
#endif

#ifdef ANDREA_TSAN
#include <sanitizer/common_interface_defs.h>
#include <sanitizer/tsan_interface.h>
extern "C" {
void __tsan_ignore_thread_begin();
void __tsan_ignore_thread_end();
// From the interface for Java VMs: a range of memory starts a new life (its shadow and its sync
// objects forgotten). Racecheck's use: shared memory at each block start.
void __tsan_java_alloc(unsigned long ptr, unsigned long size);
void __tsan_java_free(unsigned long ptr, unsigned long size);
// The instrumentation's own entry points: an access the compiler would not instrument (a small
// memset or memcpy it turns into plain moves after its ThreadSanitizer pass), said explicitly.
void __tsan_read_range(void* addr, unsigned long size);
void __tsan_write_range(void* addr, unsigned long size);
// A frame on the running fiber's shadow stack (an async proxy's: the kernel's call of its instruction).
void __tsan_func_entry(void* call_pc);
void __tsan_func_exit();
}
// Functions a fiber switch passes through: not instrumented at all, or ThreadSanitizer's
// per-fiber shadow call stack would see a return from a frame another fiber entered.
#define ANDREA_NO_TSAN __attribute__((no_sanitize_thread, noinline))
#else
#define ANDREA_NO_TSAN
#endif

namespace andrea {
namespace {

// Block b runs on fiber set b % kRaceSets (the runtime's fibers and ThreadSanitizer's), so each
// block is compared with the kRaceSets - 1 blocks before it; older blocks are ordered before it
// (see race_block_begin). A fresh ThreadSanitizer fiber per block would cost ~0.5 ms to make and
// widen every vector clock. Each set has stacks of its own: a stack's history is its own fiber's.
// Sets persist across launches.
constexpr int kRaceSets = 2;

#ifdef ANDREA_TSAN

struct RaceState {
    void* host = nullptr;               // the launching thread's own identity
    std::vector<void*> sets[kRaceSets]; // per set: one fiber per linear thread index
    std::vector<void*>* fiber = nullptr;// the running block's set
    std::vector<int> quiet;             // per thread: how deep it is in runtime code (ignore nesting)
    std::vector<const void*> fence;     // per thread: a __threadfence no atomic has followed yet
    bool running = false;               // a kernel fiber runs now
    int cur = -1;                       // its linear index
    std::string fences;                 // fences no atomic followed, for the report (one per line)
    unsigned long long layout[4] = {};  // static shared (TLS) base and size, dynamic shared base and size
    // the async proxies (see above): per set one fiber per thread, made and named in a block only
    // when its first fence.proxy.async or wgmma comes (other blocks pay nothing for them)
    std::vector<void*> proxy_sets[kRaceSets];
    std::vector<void*>* proxy = nullptr;  // the running block's set
    bool proxy_on = false;               // this block's proxies are in use
    int nthreads = 0;
    uint3 block{};
    std::vector<uint3> tids;
};
ANDREA_NO_TSAN inline RaceState& race() {
    static RaceState* r = new RaceState();
    return *r;
}

// Synchronisation objects: addresses ThreadSanitizer keys its clocks by (plain globals: no heap
// block around them, so forgetting one forgets nothing else).
uint64_t race_episode_object[2], race_launch_start[2], race_launch_end_object[2], race_window_object[2];
uint64_t race_proxy_episode[2];           // the proxies' join at a barrier (race_meet)
uint64_t race_proxy_object[1024][2];      // per thread: [0] its fences to its proxy, [1] its proxy to its waits

// The sync object the proxies use beside a thread-side object (4 bytes on: another object to
// ThreadSanitizer, forgotten with it; mbarriers' lie inside the barrier's own 8 bytes).
inline void* race_proxy_side(void* obj) { return (char*)obj + 4; }

// This block's proxies, made (first use in this set) and named at the block's first need; their
// per-thread objects forgotten, so nothing of an earlier block reaches this one through them.
ANDREA_NO_TSAN inline void race_proxy_start() {
    RaceState& r = race();
    if (r.proxy_on) return;
    r.proxy_on = true;
    if ((int)r.proxy->size() < r.nthreads) {
        // made by the host: a fiber starts after its creator, and a kernel thread's clock (the
        // barrier it passed) must not reach them
        void* const me = __tsan_get_current_fiber();
        __tsan_switch_to_fiber(r.host, __tsan_switch_to_fiber_no_sync);
        while ((int)r.proxy->size() < r.nthreads) r.proxy->push_back(__tsan_create_fiber(0));
        __tsan_switch_to_fiber(me, __tsan_switch_to_fiber_no_sync);
    }
    char name[96];
    for (int i = 0; i < r.nthreads; i++) {
        std::snprintf(name, sizeof name, "block (%u, %u, %u) thread (%u, %u, %u) async proxy", r.block.x, r.block.y,
                      r.block.z, r.tids[i].x, r.tids[i].y, r.tids[i].z);
        __tsan_set_fiber_name((*r.proxy)[i], name);
    }
    __tsan_java_free((unsigned long)&race_proxy_object[0][0], sizeof race_proxy_object);
    __tsan_java_alloc((unsigned long)&race_proxy_object[0][0], sizeof race_proxy_object);
}

ANDREA_NO_TSAN inline void race_forget(const void* p, size_t n) {  // shadow and sync objects of [p, p + n)
    const unsigned long lo = (unsigned long)p & ~7ul, hi = ((unsigned long)p + n + 7) & ~7ul;
    if (hi > lo) {
        __tsan_java_free(lo, hi - lo);
        __tsan_java_alloc(lo, hi - lo);
    }
}

// The members' clocks joined; each member acquires the join (the scheduler or the last lane to
// arrive does it in each member's name: they all wait, so this is the moment they all meet).
ANDREA_NO_TSAN inline void race_meet(const int* lids, int count) {
    RaceState& r = race();
    void* const me = __tsan_get_current_fiber();
    for (int i = 0; i < count; i++) {
        __tsan_switch_to_fiber((*r.fiber)[lids[i]], __tsan_switch_to_fiber_no_sync);
        __tsan_release(&race_episode_object[1]);
    }
    for (int i = 0; i < count; i++) {
        __tsan_switch_to_fiber((*r.fiber)[lids[i]], __tsan_switch_to_fiber_no_sync);
        __tsan_acquire(&race_episode_object[1]);
    }
    if (r.proxy_on) {  // the proxies meet too: what one thread fenced, every member's proxy knows
        for (int i = 0; i < count; i++) {
            __tsan_switch_to_fiber((*r.proxy)[lids[i]], __tsan_switch_to_fiber_no_sync);
            __tsan_release(&race_proxy_episode[1]);
        }
        for (int i = 0; i < count; i++) {
            __tsan_switch_to_fiber((*r.proxy)[lids[i]], __tsan_switch_to_fiber_no_sync);
            __tsan_acquire(&race_proxy_episode[1]);
        }
        __tsan_java_free((unsigned long)&race_proxy_episode[0], sizeof race_proxy_episode);
    }
    __tsan_switch_to_fiber(me, __tsan_switch_to_fiber_no_sync);
    __tsan_java_free((unsigned long)&race_episode_object[0], sizeof race_episode_object);  // fresh next time
}

// Runtime code called from a kernel: not checked (the scheduler's and the warps' state is touched
// by every fiber with no CUDA ordering at all).
// (The empty asm: the compiler must not move the kernel's own accesses across the region's edges,
// which it could do to a call it can see through.)
struct RaceQuiet {
    ANDREA_NO_TSAN RaceQuiet() {
        asm volatile("" ::: "memory");
        RaceState& r = race();
        if (r.running) {
            __tsan_ignore_thread_begin();
            r.quiet[r.cur]++;
        }
        asm volatile("" ::: "memory");
    }
    ANDREA_NO_TSAN ~RaceQuiet() {
        asm volatile("" ::: "memory");
        RaceState& r = race();
        if (r.running) {
            r.quiet[r.cur]--;
            __tsan_ignore_thread_end();
        }
        asm volatile("" ::: "memory");
    }
};

ANDREA_NO_TSAN inline void race_launch_begin() {
    RaceState& r = race();
    r.host = __tsan_get_current_fiber();
    r.fences.clear();
    __tsan_release(&race_launch_start[1]);  // every fiber starts after the host's writes
    __tsan_ignore_thread_begin();           // the host's scheduling is not the kernel's
}

// Each block: its memory forgotten; its set's fibers (made when first needed) named by their CUDA
// indices, after the launch's start, each starting inside runtime code.
ANDREA_NO_TSAN inline void race_block_begin(int n, uint3 block, int set, const uint3* tids, char* tls,
                                            size_t tls_size, char* dyn, size_t dyn_bytes) {
    RaceState& r = race();
    r.layout[0] = (unsigned long long)(uintptr_t)tls; r.layout[1] = tls_size;
    r.layout[2] = (unsigned long long)(uintptr_t)dyn; r.layout[3] = dyn_bytes;
    if (tls) race_forget(tls, tls_size);
    if (dyn) race_forget(dyn, dyn_bytes);
    r.fiber = &r.sets[set];
    while ((int)r.fiber->size() < n) r.fiber->push_back(__tsan_create_fiber(0));
    r.proxy = &r.proxy_sets[set];
    r.proxy_on = false;
    r.nthreads = n;
    r.block = block;
    r.tids.assign(tids, tids + n);
    r.quiet.assign(n, 1);
    r.fence.assign(n, nullptr);
    // The set's fibers last ran block b - kRaceSets: what they did then is put before this block
    // and every later one (their clocks into the window object, which each block acquires), so
    // a report never meets an access older than the block before and names its block rightly.
    for (int i = 0; i < n; i++) {
        __tsan_switch_to_fiber((*r.fiber)[i], __tsan_switch_to_fiber_no_sync);
        __tsan_release(&race_window_object[1]);
    }
    __tsan_switch_to_fiber(r.host, __tsan_switch_to_fiber_no_sync);
    char name[80];
    for (int i = 0; i < n; i++) {
        void* const f = (*r.fiber)[i];
        std::snprintf(name, sizeof name, "block (%u, %u, %u) thread (%u, %u, %u)", block.x, block.y, block.z,
                      tids[i].x, tids[i].y, tids[i].z);
        __tsan_set_fiber_name(f, name);
        __tsan_switch_to_fiber(f, __tsan_switch_to_fiber_no_sync);
        __tsan_acquire(&race_window_object[1]);
        __tsan_acquire(&race_launch_start[1]);
        __tsan_ignore_thread_begin();
        __tsan_switch_to_fiber(r.host, __tsan_switch_to_fiber_no_sync);
    }
}

ANDREA_NO_TSAN inline void race_resume(int lid) {
    RaceState& r = race();
    r.cur = lid;
    __tsan_switch_to_fiber((*r.fiber)[lid], __tsan_switch_to_fiber_no_sync);
    r.running = true;
}
ANDREA_NO_TSAN inline void race_yield() {
    RaceState& r = race();
    r.running = false;
    __tsan_switch_to_fiber(r.host, __tsan_switch_to_fiber_no_sync);
}
ANDREA_NO_TSAN inline void race_kernel_enter() {
    RaceState& r = race();
    r.quiet[r.cur]--;
    __tsan_ignore_thread_end();
}
ANDREA_NO_TSAN inline void race_kernel_leave() {
    RaceState& r = race();
    __tsan_ignore_thread_begin();
    r.quiet[r.cur]++;
}

// Every fiber of the block: out of runtime code, its clock into the launch's end; a fence no
// atomic followed is noted for the report.
ANDREA_NO_TSAN inline void race_block_end(int n, uint3 block, const uint3* tids) {
    RaceState& r = race();
    char site[256], line[400];
    for (int i = 0; i < n; i++) {
        if (r.fence[i] && r.fences.size() < 4000) {
            __sanitizer_symbolize_pc(const_cast<void*>(r.fence[i]), "%s:%l", site, sizeof site);
            std::snprintf(line, sizeof line, "%u %u %u %u %u %u %s\n", block.x, block.y, block.z,
                          tids[i].x, tids[i].y, tids[i].z, site);
            r.fences += line;
        }
        __tsan_switch_to_fiber((*r.fiber)[i], __tsan_switch_to_fiber_no_sync);
        for (; r.quiet[i] > 0; r.quiet[i]--) __tsan_ignore_thread_end();
        __tsan_release(&race_launch_end_object[1]);
        __tsan_switch_to_fiber(r.host, __tsan_switch_to_fiber_no_sync);
    }
}

ANDREA_NO_TSAN inline void race_launch_end() {
    __tsan_ignore_thread_end();
    __tsan_acquire(&race_launch_end_object[1]);  // the host reads what every block wrote
}

// __threadfence: remembered until this thread's next atomic, which it makes a release.
ANDREA_NO_TSAN inline void race_fence(const void* site) {
    RaceState& r = race();
    if (r.running) r.fence[r.cur] = site;
}
// After an atomic on p: it acquires p (what fenced atomics released there before it), and after
// a fence it releases p, itself included (the next atomic that reads it is ordered after it).
ANDREA_NO_TSAN inline void race_atomic_done(const void* p) {
    RaceState& r = race();
    if (!r.running) return;
    __tsan_acquire(const_cast<void*>(p));
    if (r.fence[r.cur]) {
        r.fence[r.cur] = nullptr;
        __tsan_release(const_cast<void*>(p));
    }
}
struct RaceAtomic {  // around every atomic operation on p
    const void* p;
    explicit RaceAtomic(const void* q) : p(q) {}
    ~RaceAtomic() { race_atomic_done(p); }
};
// An emulated instruction's access, recorded as the calling thread's.
inline void race_read(const void* p, size_t n) { __tsan_read_range(const_cast<void*>(p), n); }
inline void race_write(void* p, size_t n) { __tsan_write_range(p, n); }

// fence.proxy.async by the running thread: its proxy acquires everything the thread knows now.
ANDREA_NO_TSAN inline void race_proxy_fence() {
    RaceState& r = race();
    if (!r.running) return;
    race_proxy_start();
    void* obj = &race_proxy_object[r.cur][0];
    __tsan_release(obj);
    __tsan_switch_to_fiber((*r.proxy)[r.cur], __tsan_switch_to_fiber_no_sync);
    __tsan_acquire(obj);
    __tsan_switch_to_fiber((*r.fiber)[r.cur], __tsan_switch_to_fiber_no_sync);
}
// Between begin and end, race_read is the running thread's async proxy's read, at `site` (the
// kernel's call of the instruction: the one frame its report shows).
ANDREA_NO_TSAN inline bool race_proxy_begin(const void* site) {
    RaceState& r = race();
    if (!r.running) return false;
    race_proxy_start();
    __tsan_switch_to_fiber((*r.proxy)[r.cur], __tsan_switch_to_fiber_no_sync);
    __tsan_func_entry(const_cast<void*>(site));
    return true;
}
ANDREA_NO_TSAN inline void race_proxy_end(bool begun) {
    if (!begun) return;
    RaceState& r = race();
    __tsan_func_exit();
    __tsan_switch_to_fiber((*r.fiber)[r.cur], __tsan_switch_to_fiber_no_sync);
}
// At the wait that retires the proxy's reads: the thread acquires them (a barrier after the wait
// then orders them before another thread's overwrite).
ANDREA_NO_TSAN inline void race_proxy_retired() {
    RaceState& r = race();
    if (!r.running || !r.proxy_on) return;
    void* obj = &race_proxy_object[r.cur][1];
    __tsan_switch_to_fiber((*r.proxy)[r.cur], __tsan_switch_to_fiber_no_sync);
    __tsan_release(obj);
    __tsan_switch_to_fiber((*r.fiber)[r.cur], __tsan_switch_to_fiber_no_sync);
    __tsan_acquire(obj);
}
// Beside a thread's release or acquire of obj (named barriers, mbarriers): its proxy's, on the
// proxy side of obj. `published`: the thread's own clock goes to the proxies (an mbarrier's
// complete_tx: a TMA copy's writes are the async proxy's, ordered for it by the barrier alone).
ANDREA_NO_TSAN inline void race_proxy_release(int lid, void* obj, bool published) {
    RaceState& r = race();
    if (!r.proxy_on && !published) return;
    if (published) {
        __tsan_release(race_proxy_side(obj));  // as the thread
        if (!r.proxy_on) return;
    }
    void* const me = __tsan_get_current_fiber();
    __tsan_switch_to_fiber((*r.proxy)[lid], __tsan_switch_to_fiber_no_sync);
    __tsan_release(race_proxy_side(obj));
    __tsan_switch_to_fiber(me, __tsan_switch_to_fiber_no_sync);
}
ANDREA_NO_TSAN inline void race_proxy_acquire(int lid, void* obj) {
    RaceState& r = race();
    // An mbarrier or named-barrier wait before the block's first fence or wgmma must still reach
    // the proxies: kernel7's consumers wait for a TMA tile (its complete_tx published to them),
    // then issue their first wgmma; proxies made only at that wgmma had missed the wait, and
    // the TMA's writes read as a race the hardware does not have
    race_proxy_start();
    void* const me = __tsan_get_current_fiber();
    __tsan_switch_to_fiber((*r.proxy)[lid], __tsan_switch_to_fiber_no_sync);
    __tsan_acquire(race_proxy_side(obj));
    __tsan_switch_to_fiber(me, __tsan_switch_to_fiber_no_sync);
}
#else
inline void race_read(const void*, size_t) {}
inline void race_write(void*, size_t) {}
struct RaceQuiet {};
struct RaceAtomic {
    explicit RaceAtomic(const void*) {}
};
inline void race_launch_begin() {}
inline void race_block_begin(int, uint3, int, const uint3*, char*, size_t, char*, size_t) {}
inline void race_resume(int) {}
inline void race_yield() {}
inline void race_kernel_enter() {}
inline void race_kernel_leave() {}
inline void race_meet(const int*, int) {}
inline void race_block_end(int, uint3, const uint3*) {}
inline void race_launch_end() {}
inline void race_fence(const void*) {}
inline void race_proxy_fence() {}
inline bool race_proxy_begin(const void*) { return false; }
inline void race_proxy_end(bool) {}
inline void race_proxy_retired() {}
inline void race_proxy_release(int, void*, bool) {}
inline void race_proxy_acquire(int, void*) {}
#endif

}  // namespace
}  // namespace andrea
