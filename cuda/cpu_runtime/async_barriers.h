// cpu_runtime/async_barriers.h — Hopper's barriers, emulated: named barriers (bar.sync / bar.arrive
// id, n), the shared-memory mbarrier (init, arrive, expect_tx, complete_tx, try_wait / test_wait
// .parity) and setmaxnreg, called from a kernel file's wrappers in the CPU build (namespace
// ptx_emulated at the end; each wrapper's GPU body is the inline PTX under __CUDA_ARCH__).
//
// Faithful where a wrong kernel would otherwise pass:
//  - bar.sync id, n: id 0..15, n a multiple of 32 no larger than the block (rounded up to whole
//    warps); the thread waits until n threads have arrived at barrier id (bar.arrive arrives without
//    waiting). Two arrivals with different n in one round are misuse. bar.sync 0 with n the block
//    size (or no n) is __syncthreads itself.
//  - mbarrier: a 64-bit object in shared memory, 8-byte aligned, initialised by mbarrier.init with
//    its arrival count (1 .. 2^20 - 1) before any other use. A phase completes when its pending
//    arrivals and its transaction count (expect_tx adds bytes, complete_tx removes them; the count
//    may go below zero for a while, as PTX allows) are both zero; then the next phase starts with the
//    full arrival count. try_wait.parity(p) succeeds once the phase of parity p has completed (the
//    current phase's parity is not p).
//  - A thread in try_wait blocks (other fibers run) until its phase completes; a block in which no
//    thread can run while some wait at named barriers or mbarriers is a deadlock, named in one line
//    (the thread, the barrier, what it still lacks).
//  - setmaxnreg.{inc,dec}.sync.aligned.u32 N: N a multiple of 8 in 24..256, every thread of the
//    warpgroup (128 threads, the block made of whole warpgroups) reaching it with the same N;
//    otherwise it does nothing here (registers are not modelled).
// Not emulated: try_wait's time limit (it never returns false here: a retry loop is never entered),
// cluster scope (shared::cluster addresses are this block's), mbarrier.arrive.noComplete, drop,
// pending_count, the arrive-on of cp.async, barrier.red, and bar.sync's warp-level arrival counting
// (threads are counted one by one: the same for whole warps, which the n check asks for).
//
// racecheck: arrivals at a named barrier release, its waiters acquire the join when it opens (only
// its participants are ordered); an mbarrier arrive (or complete_tx) is a release on the barrier,
// a successful wait an acquire: a read of memory another thread wrote before its arrive, with no
// wait on that phase between, is a race. The threads' async proxies (racecheck.h) release and
// acquire alongside; a complete_tx also hands the completing thread's clock to the waiters'
// proxies (a TMA copy's writes are the async proxy's own: no fence.proxy.async needed for them).
// Part of cuda_cpu_runtime.h, which includes the parts in order: never included on its own.
#pragma once

namespace andrea {
namespace {

constexpr int kNamedBarriers = 16;
constexpr int kMbarriers = 64;  // per block: more than any kernel needs (a ring of stages, twice)

struct NamedBarrier {
    int expected = 0;     // n of this round (0: no round open)
    int arrived = 0;
    const char* what = nullptr;  // the instruction, for messages
};

struct Mbar {
    const void* addr = nullptr;
    uint32_t count = 0;    // arrivals per phase (init)
    uint32_t pending = 0;  // arrivals the current phase still needs
    int64_t tx = 0;        // transaction bytes the current phase still needs
    uint32_t phase = 0;    // completed phases so far
    bool touched = false;  // the current phase has had an arrival, expect_tx or complete_tx
};

struct AsyncState {
    NamedBarrier named[kNamedBarriers];
    std::vector<NamedBarrier> warpgroups;  // setmaxnreg's meeting, per warpgroup
    std::vector<int> setmaxnreg_n;         // per warpgroup: N of its open meeting
    Mbar mbars[kMbarriers];
    int nmbars = 0;
    std::vector<int> waits;   // per thread: the named barrier (or warpgroup + 16) or mbarrier index
    std::vector<uint32_t> wait_parity;  // per thread: the parity it waits for at an mbarrier
};

ANDREA_NO_TSAN inline AsyncState& async_state() {
    AsyncState*& a = per_thread.async;
    if (!a) a = new AsyncState();  // never thread_local: the library's TLS is shared memory
    return *a;
}

inline void async_block_start(int nthreads) {
    AsyncState& a = async_state();
    for (NamedBarrier& b : a.named) b = NamedBarrier{};
    const int groups = (nthreads + 127) / 128;
    a.warpgroups.assign(groups, NamedBarrier{});
    a.setmaxnreg_n.assign(groups, 0);
    a.nmbars = 0;
    a.waits.assign(nthreads, -1);
    a.wait_parity.assign(nthreads, 0);
}

// "shared+OFF" (static __shared__, from the start of this OS thread's shared block) or
// "dynamic shared+OFF" (extern __shared__): where a barrier is, for messages.
inline std::string shared_place(const void* p) {
    const char* c = static_cast<const char*>(p);
    const Guard& g = guard();
    const TensorCoreState& tc = tensor_cores();
    char out[64];
    if (g.dyn_base && c >= g.dyn_base && c < g.dyn_base + g.dyn_bytes)
        std::snprintf(out, sizeof out, "dynamic shared+%zu", (size_t)(c - g.dyn_base));
    else if (tc.tls_lo && c >= tc.tls_lo && c < tc.tls_hi)
        std::snprintf(out, sizeof out, "shared+%zu", (size_t)(c - tc.tls_lo));
    else
        std::snprintf(out, sizeof out, "%p (not shared memory)", p);
    return out;
}

inline std::string thread_text(const Fiber* f) {
    char out[48];
    std::snprintf(out, sizeof out, "thread (%u, %u, %u)", f->tid.x, f->tid.y, f->tid.z);
    return out;
}

// A misuse found in a fiber: the launch ends with it (WARP_MISUSE), named by the thread's warp.
#define ANDREA_ASYNC_MISUSE(...)                                                        \
    do {                                                                                \
        Fiber* f_ = sched().cur;                                                        \
        warp_misuse(f_->lid >> 5, 0, 1u << (f_->lid & 31), __VA_ARGS__);                \
        warp_fail(f_);                                                                  \
    } while (0)

// --- racecheck's part ------------------------------------------------------------------------------

#ifdef ANDREA_TSAN
uint64_t race_named_object[kNamedBarriers][2];
// The waiting threads acquire obj in their own names (the arriving thread does it for them: they
// all wait, so this is the moment they are released).
ANDREA_NO_TSAN inline void race_acquire_for(const std::vector<int>& lids, void* obj) {
    RaceState& r = race();
    void* const me = __tsan_get_current_fiber();
    for (int lid : lids) {
        __tsan_switch_to_fiber((*r.fiber)[lid], __tsan_switch_to_fiber_no_sync);
        __tsan_acquire(obj);
    }
    __tsan_switch_to_fiber(me, __tsan_switch_to_fiber_no_sync);
    for (int lid : lids) race_proxy_acquire(lid, obj);  // and their async proxies (racecheck.h)
}
// published: the thread's clock reaches the waiters' async proxies too (a TMA copy's complete_tx)
ANDREA_NO_TSAN inline void race_release_here(void* obj, bool published = false) {
    RaceState& r = race();
    if (!r.running) return;
    __tsan_release(obj);
    race_proxy_release(r.cur, obj, published);
}
ANDREA_NO_TSAN inline void race_acquire_here(void* obj) {
    RaceState& r = race();
    if (!r.running) return;
    __tsan_acquire(obj);
    race_proxy_acquire(r.cur, obj);
}
ANDREA_NO_TSAN inline void race_named_forget(int id) {
    __tsan_java_free((unsigned long)&race_named_object[id][0], sizeof race_named_object[id]);
}
inline void* race_named_sync(int id) { return &race_named_object[id][1]; }
// Inside runtime code (RaceQuiet), an emulated instruction's own accesses checked as the thread's.
struct RaceLoud {
    bool on;
    ANDREA_NO_TSAN RaceLoud() : on(race().running) { if (on) __tsan_ignore_thread_end(); }
    ANDREA_NO_TSAN ~RaceLoud() { if (on) __tsan_ignore_thread_begin(); }
};
#else
struct RaceLoud {};
inline void race_acquire_for(const std::vector<int>&, void*) {}
inline void race_release_here(void*, bool = false) {}
inline void race_acquire_here(void*) {}
inline void race_named_forget(int) {}
inline void* race_named_sync(int) { return nullptr; }
#endif
// An mbarrier's sync object for the phases of one parity (two bytes inside the barrier itself:
// forgotten with shared memory at each block start).
inline void* mbar_sync(const Mbar& m, uint32_t parity) { return (char*)m.addr + 1 + parity; }

// --- named barriers ----------------------------------------------------------------------------

// Thread arrives at barrier `slot` (0..15 named, 16 + w: warpgroup w's setmaxnreg) of n threads;
// waits for the round to complete if `wait`.
inline void named_arrive(int slot, int n, bool wait, const char* what) {
    Sched& s = sched();
    AsyncState& a = async_state();
    Fiber* f = s.cur;
    NamedBarrier& b = slot < kNamedBarriers ? a.named[slot] : a.warpgroups[slot - kNamedBarriers];
    if (b.expected && b.expected != n)
        ANDREA_ASYNC_MISUSE("%s calls %s with %d threads while barrier %d's round waits for %d (%d arrived): "
                            "every arrival of a round must name the same count (on a GPU: undefined)",
                            thread_text(f).c_str(), what, n, slot, b.expected, b.arrived);
    b.expected = n;
    b.what = what;
    if (slot < kNamedBarriers) race_release_here(race_named_sync(slot));
    if (++b.arrived < n) {
        if (!wait) return;
        a.waits[f->lid] = slot;
        f->state = AT_NAMED;
        yield(f);
        return;
    }
    // the round is complete: its waiting threads go on
    std::vector<int> woken;
    for (int i = 0; i < s.nthreads; i++) {
        Fiber* g = s.pool[i];
        if (g->state == AT_NAMED && a.waits[g->lid] == slot) woken.push_back(g->lid);
    }
    if (wait) woken.push_back(f->lid);
    if (slot < kNamedBarriers) {
        race_acquire_for(woken, race_named_sync(slot));
        race_named_forget(slot);
    }
    for (int lid : woken) {
        Fiber* g = s.pool[lid];
        if (g != f) g->state = READY;
        a.waits[lid] = -1;
    }
    b = NamedBarrier{};
}

inline void named_barrier(int id, int n, bool wait, const char* what) {
    RaceQuiet quiet;
    Sched& s = sched();
    Fiber* f = s.cur;
    const int whole = (s.nthreads + 31) / 32 * 32;
    if (id < 0 || id >= kNamedBarriers)
        ANDREA_ASYNC_MISUSE("%s calls %s with barrier id %d: ids are 0..15", thread_text(f).c_str(), what, id);
    if (n <= 0 || n % 32 || n > whole)
        ANDREA_ASYNC_MISUSE("%s calls %s(%d, %d): the thread count must be a multiple of 32 (whole warps) "
                            "from 32 to the block's %d threads", thread_text(f).c_str(), what, id, n, whole);
    named_arrive(id, n, wait, what);
}

// --- mbarrier ----------------------------------------------------------------------------------

inline Mbar* find_mbar(const void* p) {
    AsyncState& a = async_state();
    for (int i = 0; i < a.nmbars; i++)
        if (a.mbars[i].addr == p) return &a.mbars[i];
    return nullptr;
}

inline void check_mbar_address(const void* p, const char* what) {
    Fiber* f = sched().cur;
    if (!is_shared(p, 8))
        ANDREA_ASYNC_MISUSE("%s calls %s on %p, which is not shared memory: an mbarrier is a 64-bit object "
                            "in shared memory", thread_text(f).c_str(), what, p);
    if ((uintptr_t)p % 8)
        ANDREA_ASYNC_MISUSE("%s calls %s on the mbarrier at %s, which is not 8-byte aligned",
                            thread_text(f).c_str(), what, shared_place(p).c_str());
}

// The mbarrier at p, initialised (misuse otherwise).
inline Mbar& mbar_at(const void* p, const char* what) {
    check_mbar_address(p, what);
    Mbar* m = find_mbar(p);
    if (!m)
        ANDREA_ASYNC_MISUSE("%s calls %s on the mbarrier at %s, which no mbarrier.init initialised in "
                            "this block", thread_text(sched().cur).c_str(), what, shared_place(p).c_str());
    {   // every use reads the barrier's first byte, which its init wrote: racecheck names a use
        // that nothing orders after the init (one schedule runs the init first; a GPU need not)
        RaceLoud loud;
        race_read(p, 1);
    }
    return *m;
}

// The current phase is complete if nothing is pending: the next one starts, its waiters go on.
inline void mbar_settle(Mbar& m) {
    if (m.pending || m.tx) return;
    Sched& s = sched();
    AsyncState& a = async_state();
    const uint32_t parity = m.phase & 1;
    const int index = (int)(&m - a.mbars);
    std::vector<int> woken;
    for (int i = 0; i < s.nthreads; i++) {
        Fiber* g = s.pool[i];
        if (g->state == AT_MBARRIER && a.waits[g->lid] == index && a.wait_parity[g->lid] == parity)
            woken.push_back(g->lid);
    }
    race_acquire_for(woken, mbar_sync(m, parity));
    for (int lid : woken) {
        s.pool[lid]->state = READY;
        a.waits[lid] = -1;
    }
    m.phase++;
    m.pending = m.count;
    m.tx = 0;
    m.touched = false;
}

inline void mbar_init(void* p, uint32_t count) {
    RaceQuiet quiet;
    const char* what = "mbarrier.init.shared::cta.b64";
    check_mbar_address(p, what);
    {
        RaceLoud loud;
        race_write(p, 1);  // the init, as the thread's write (mbar_at reads it at every use)
    }
    AsyncState& a = async_state();
    Fiber* f = sched().cur;
    if (count < 1 || count >= (1u << 20))
        ANDREA_ASYNC_MISUSE("%s calls %s on the mbarrier at %s with count %u: the count is 1 .. 2^20 - 1",
                            thread_text(f).c_str(), what, shared_place(p).c_str(), count);
    Mbar* m = find_mbar(p);
    if (!m) {
        if (a.nmbars == kMbarriers)
            ANDREA_ASYNC_MISUSE("%s initialises a %dth mbarrier: the CPU build holds %d per block",
                                thread_text(f).c_str(), kMbarriers + 1, kMbarriers);
        m = &a.mbars[a.nmbars++];
    }
    *m = Mbar{};
    m->addr = p;
    m->count = m->pending = count;
    std::memset(p, 0, 8);  // the object itself: opaque, but no longer poisoned
}

// Token of an arrive: the phase it arrived in (try_wait with a token waits for that phase).
inline uint64_t mbar_arrive(void* p, uint32_t tx_bytes, const char* what) {
    RaceQuiet quiet;
    Mbar& m = mbar_at(p, what);
    if (m.pending == 0)  // only the transaction count holds the phase open
        ANDREA_ASYNC_MISUSE("%s calls %s on the mbarrier at %s in phase %u, which has had its %u arrivals "
                            "already (pending tx bytes %lld): more arrivals than its count (on a GPU: undefined)",
                            thread_text(sched().cur).c_str(), what, shared_place(p).c_str(), m.phase, m.count,
                            (long long)m.tx);
    const uint64_t token = m.phase;
    m.tx += tx_bytes;
    m.touched = true;
    race_release_here(mbar_sync(m, m.phase & 1));
    m.pending--;
    mbar_settle(m);
    return token;
}

inline void mbar_expect_tx(void* p, uint32_t bytes) {
    RaceQuiet quiet;
    Mbar& m = mbar_at(p, "mbarrier.expect_tx.shared::cta.b64");
    m.tx += bytes;
    m.touched = true;
}

inline void mbar_complete_tx(void* p, uint32_t bytes, const char* what) {
    RaceQuiet quiet;
    Mbar& m = mbar_at(p, what);
    m.tx -= bytes;
    m.touched = true;
    race_release_here(mbar_sync(m, m.phase & 1), true);  // the copy's writes: the async proxy's
    mbar_settle(m);
}

// Has the phase of this parity completed? block: wait until it has (try_wait); else only look
// (test_wait), letting the other threads run before a false.
inline bool mbar_wait(void* p, uint32_t parity, bool block, const char* what) {
    RaceQuiet quiet;
    Mbar& m = mbar_at(p, what);
    parity &= 1;
    Sched& s = sched();
    Fiber* f = s.cur;
    AsyncState& a = async_state();
    while ((m.phase & 1) == parity) {
        if (!block) {
            yield(f);  // a spin on test_wait lets the others run
            if ((m.phase & 1) == parity) return false;
            break;
        }
        a.waits[f->lid] = (int)(&m - a.mbars);
        a.wait_parity[f->lid] = parity;
        f->state = AT_MBARRIER;
        yield(f);
    }
    race_acquire_here(mbar_sync(m, parity));
    return true;
}

// --- setmaxnreg ----------------------------------------------------------------------------------

inline void setmaxnreg(uint32_t n, const char* what) {
    RaceQuiet quiet;
    Sched& s = sched();
    Fiber* f = s.cur;
    AsyncState& a = async_state();
    if (n % 8 || n < 24 || n > 256)
        ANDREA_ASYNC_MISUSE("%s calls %s %u: the register count must be a multiple of 8 in 24..256",
                            thread_text(f).c_str(), what, n);
    if (s.nthreads % 128)
        ANDREA_ASYNC_MISUSE("%s calls %s in a block of %d threads: setmaxnreg is for whole warpgroups "
                            "(a multiple of 128 threads)", thread_text(f).c_str(), what, s.nthreads);
    const int w = f->lid / 128;
    if (a.setmaxnreg_n[w] && a.setmaxnreg_n[w] != (int)n)
        ANDREA_ASYNC_MISUSE("%s calls %s %u while warpgroup %d's other threads wait at setmaxnreg %d: "
                            "the warpgroup must agree on N", thread_text(f).c_str(), what, n, w,
                            a.setmaxnreg_n[w]);
    a.setmaxnreg_n[w] = (int)n;
    NamedBarrier& b = a.warpgroups[w];
    if (b.arrived + 1 == 128) a.setmaxnreg_n[w] = 0;
    named_arrive(kNamedBarriers + w, 128, true, what);
}

// --- TMA: cp.async.bulk.tensor with a tensor map -------------------------------------------------

// What the CPU build's tensor map holds: cuTensorMapEncodeTiled's fields, 128 bytes like a
// CUtensorMap, written on the host by andrea_cli/backends/cpu_runtime/tensor_map.py (which checks
// them the way the driver does) and read here. Element strides, interleave, L2 promotion and the
// out-of-bounds fill are not kept: every element stride is 1, and a box must lie inside the tensor.
struct TensorMapFields {
    uint32_t magic;       // kTensorMapMagic: the host encoded it
    uint32_t rank;        // 1..5
    uint32_t elem_bytes;  // 1, 2, 4 or 8
    uint32_t swizzle;     // bytes of the swizzle span: 0 (none), 32, 64, 128
    uint64_t base;        // the global address of element 0
    uint64_t dims[5];     // elements, innermost first
    uint64_t strides[4];  // bytes between consecutive indices of dims 1..rank-1
    uint32_t box[5];      // elements the copy moves along each dim
    uint32_t pad[3];
};
static_assert(sizeof(TensorMapFields) == 128, "the host's layout (tensor_map.py) is 128 bytes");
constexpr uint32_t kTensorMapMagic = 0x50414d54;  // "TMAP"

// The byte offset a swizzled box puts logical byte offset `off` at: CUTLASS's Swizzle<B, 4, 3>
// (the 16-byte chunk index within each 128-byte row XORed with the row index mod 2^B), B = 1, 2, 3
// for the 32, 64 and 128-byte modes.
inline size_t tma_swizzle(size_t off, uint32_t swizzle) {
    const int b = swizzle == 32 ? 1 : swizzle == 64 ? 2 : swizzle == 128 ? 3 : 0;
    return off ^ ((off >> 7) & ((1u << b) - 1)) << 4;
}

// cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [dst], [map, {c0, c1}], [bar]
// The copy is done when issued (the source read then, as the issuing thread's), then completes its
// bytes on the barrier. racecheck: the destination is written in the issuing thread's name before
// its complete_tx releases the barrier, so a reader that did not wait on that phase races with it.
inline void tma_load_2d(void* dst, const void* map, int c0, int c1, void* bar) {
    RaceQuiet quiet;
    const char* what = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes";
    Fiber* f = sched().cur;
    TensorMapFields m;
    std::memcpy(&m, map, sizeof m);
    if (m.magic != kTensorMapMagic)
        ANDREA_ASYNC_MISUSE("%s calls %s with a tensor map the host did not encode (build it with "
                            "tensor_map.encode_tiled)", thread_text(f).c_str(), what);
    if (m.rank != 2)
        ANDREA_ASYNC_MISUSE("%s calls %s (2d) with a tensor map of rank %u", thread_text(f).c_str(), what, m.rank);
    Mbar& b = mbar_at(bar, what);
    const size_t row = (size_t)m.box[0] * m.elem_bytes, bytes = row * m.box[1];
    const size_t align = m.swizzle ? 1024 : 128;
    if (row % 16 || (m.swizzle && row > m.swizzle))
        ANDREA_ASYNC_MISUSE("%s calls %s with a box row of %zu bytes: it must be a multiple of 16 and at most "
                            "the swizzle span (%u)", thread_text(f).c_str(), what, row, m.swizzle);
    if (!is_shared(dst, bytes) || (uintptr_t)dst % align)
        ANDREA_ASYNC_MISUSE("%s calls %s with a destination at %s of %zu bytes: it must be shared memory, "
                            "%zu-byte aligned (swizzle %u)", thread_text(f).c_str(), what,
                            shared_place(dst).c_str(), bytes, align, m.swizzle);
    if (c0 < 0 || c1 < 0 || (uint64_t)c0 + m.box[0] > m.dims[0] || (uint64_t)c1 + m.box[1] > m.dims[1])
        ANDREA_ASYNC_MISUSE("%s calls %s for box (%d..%d, %d..%d) of a (%llu, %llu) tensor, whose mbarrier "
                            "is at %s: the box leaves the tensor (a GPU fills the outside with zeros; the "
                            "CPU build asks for boxes inside)", thread_text(f).c_str(), what, c0,
                            c0 + (int)m.box[0] - 1, c1, c1 + (int)m.box[1] - 1, (unsigned long long)m.dims[0],
                            (unsigned long long)m.dims[1], shared_place(bar).c_str());
    char* out = static_cast<char*>(dst);
    for (uint32_t r = 0; r < m.box[1]; r++) {
        const char* src = (const char*)(uintptr_t)m.base + (uint64_t)(c1 + r) * m.strides[0] +
                          (uint64_t)c0 * m.elem_bytes;
        {
            // the source as the issuing thread reads it, the destination as it writes it (kernel code)
            RaceLoud loud;
            race_read(src, row);
            for (size_t k = 0; k < row; k += 16) race_write(out + tma_swizzle(r * row + k, m.swizzle), 16);
        }
        for (size_t k = 0; k < row; k += 16)  // 16-byte chunks: the unit the swizzle moves
            std::memcpy(out + tma_swizzle(r * row + k, m.swizzle), src + k, 16);
    }
    (void)b;
    mbar_complete_tx(bar, (uint32_t)bytes, what);
}

// --- deadlocks ------------------------------------------------------------------------------------

// One waiting thread's barrier and what it still lacks.
inline std::string describe_wait(const AsyncState& a, const Fiber* f) {
    char text[240];
    const int slot = a.waits[f->lid];
    if (f->state == AT_NAMED) {
        const NamedBarrier& b = slot < kNamedBarriers ? a.named[slot] : a.warpgroups[slot - kNamedBarriers];
        if (slot < kNamedBarriers)
            std::snprintf(text, sizeof text, "%s waits at named barrier %d (%s, %d threads): %d of %d arrived",
                          thread_text(f).c_str(), slot, b.what, b.expected, b.arrived, b.expected);
        else
            std::snprintf(text, sizeof text, "%s waits at %s for warpgroup %d: %d of its 128 threads arrived",
                          thread_text(f).c_str(), b.what, slot - kNamedBarriers, b.arrived);
    } else {
        const Mbar& m = a.mbars[slot];
        const uint32_t p = a.wait_parity[f->lid];
        if (!m.touched)
            std::snprintf(text, sizeof text, "%s waits on mbarrier at %s phase %u (parity %u), never armed",
                          thread_text(f).c_str(), shared_place(m.addr).c_str(), m.phase, p);
        else
            std::snprintf(text, sizeof text, "%s waits on mbarrier at %s phase %u (parity %u), pending "
                          "arrivals %u, pending tx bytes %lld", thread_text(f).c_str(),
                          shared_place(m.addr).c_str(), m.phase, p, m.pending, (long long)m.tx);
    }
    return text;
}

// Nothing can run: if some thread waits at a named barrier or an mbarrier, the block's report names
// the first waiting thread (in schedule order) of each such barrier, up to three, with what that
// barrier still lacks ("never armed": no arrival, expect_tx or copy in the phase waited for).
inline bool async_deadlock(LaunchInfo* info) {
    Sched& s = sched();
    AsyncState& a = async_state();
    int named = 0, mbar = 0, sync = 0, done = 0, shown = 0, more = 0;
    std::vector<std::pair<int, int>> seen;  // (state, barrier) already described
    std::string text;
    for (int k = 0; k < s.nthreads; k++) {
        Fiber* f = s.pool[s.reverse ? s.nthreads - 1 - k : k];
        named += f->state == AT_NAMED;
        mbar += f->state == AT_MBARRIER;
        sync += f->state == AT_BARRIER;
        done += f->state == DONE;
        if (f->state != AT_NAMED && f->state != AT_MBARRIER) continue;
        const std::pair<int, int> key{f->state, a.waits[f->lid]};
        if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
        seen.push_back(key);
        if (shown == 3) { more++; continue; }
        text += (shown++ ? "; " : "") + describe_wait(a, f);
    }
    if (!shown) return false;
    if (more) text += "; " + std::to_string(more) + " more barriers";
    info->waiting_barrier = sync;
    info->returned = done;
    std::snprintf(info->message, sizeof info->message,
                  "%s (%d of %d threads wait at named barriers or setmaxnreg, %d at mbarriers, %d at "
                  "__syncthreads, %d returned)", text.c_str(), named, s.nthreads, mbar, sync, done);
    return true;
}

#undef ANDREA_ASYNC_MISUSE

}  // namespace
}  // namespace andrea

namespace ptx_emulated {

// bar.sync id, n / bar.arrive id, n (barrier.sync.aligned and barrier.arrive.aligned alike)
inline void bar_sync(int id, int n) {
    if (id == 0 && n == (int)(blockDim.x * blockDim.y * blockDim.z)) return __syncthreads();
    andrea::named_barrier(id, n, true, "bar.sync");
}
inline void bar_arrive(int id, int n) { andrea::named_barrier(id, n, false, "bar.arrive"); }

// mbarrier.init.shared::cta.b64 [addr], count
inline void mbarrier_init(unsigned long long* bar, uint32_t count) { andrea::mbar_init(bar, count); }
// mbarrier.arrive.shared::cta.b64 state, [addr]
inline unsigned long long mbarrier_arrive(unsigned long long* bar) {
    return andrea::mbar_arrive(bar, 0, "mbarrier.arrive.shared::cta.b64");
}
// mbarrier.arrive.expect_tx.shared::cta.b64 state, [addr], tx_count
inline unsigned long long mbarrier_arrive_expect_tx(unsigned long long* bar, uint32_t bytes) {
    return andrea::mbar_arrive(bar, bytes, "mbarrier.arrive.expect_tx.shared::cta.b64");
}
// mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [addr], tx_count
inline void mbarrier_expect_tx(unsigned long long* bar, uint32_t bytes) { andrea::mbar_expect_tx(bar, bytes); }
// mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [addr], tx_count (what a TMA copy does at its end)
inline void mbarrier_complete_tx(unsigned long long* bar, uint32_t bytes) {
    andrea::mbar_complete_tx(bar, bytes, "mbarrier.complete_tx.shared::cta.b64");
}
// mbarrier.try_wait.parity.shared::cta.b64 done, [addr], parity (blocks here until done)
inline bool mbarrier_try_wait_parity(unsigned long long* bar, uint32_t parity) {
    return andrea::mbar_wait(bar, parity, true, "mbarrier.try_wait.parity.shared::cta.b64");
}
// mbarrier.test_wait.parity.shared::cta.b64 done, [addr], parity (never blocks)
inline bool mbarrier_test_wait_parity(unsigned long long* bar, uint32_t parity) {
    return andrea::mbar_wait(bar, parity, false, "mbarrier.test_wait.parity.shared::cta.b64");
}
// mbarrier.try_wait.shared::cta.b64 done, [addr], state (the token of an arrive in that phase)
inline bool mbarrier_try_wait(unsigned long long* bar, unsigned long long token) {
    return andrea::mbar_wait(bar, (uint32_t)(token & 1), true, "mbarrier.try_wait.shared::cta.b64");
}

// cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [dst], [map, {c0, c1}], [bar]
inline void cp_async_bulk_tensor_2d(void* dst, const void* map, int c0, int c1, unsigned long long* bar) {
    andrea::tma_load_2d(dst, map, c0, c1, bar);
}

// tensormap.replace.tile.global_address.global.b1024.b64 [map], addr: the map's global address set on
// the device (a host-encoded map holds the host's address of the tensor, which a launch in another
// process, racecheck's worker, does not see; the kernel's own pointer argument is the launch's).
inline void tensormap_replace_global_address(void* map, const void* addr) {
    andrea::RaceQuiet quiet;
    andrea::TensorMapFields m;
    std::memcpy(&m, map, sizeof m);
    m.base = (uint64_t)(uintptr_t)addr;
    std::memcpy(map, &m, sizeof m);
}

// setmaxnreg.inc.sync.aligned.u32 N / setmaxnreg.dec.sync.aligned.u32 N
inline void setmaxnreg_inc(uint32_t n) { andrea::setmaxnreg(n, "setmaxnreg.inc.sync.aligned.u32"); }
inline void setmaxnreg_dec(uint32_t n) { andrea::setmaxnreg(n, "setmaxnreg.dec.sync.aligned.u32"); }

}  // namespace ptx_emulated
