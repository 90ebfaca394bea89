// cpu_runtime/launch.h — running a launch in this process: the blocks spread over
// LaunchOptions.threads OS threads (the launching one and a pool), each block run start to end
// by one OS thread's fibers: they run until they block, then barriers and __activemask are
// released; nothing runnable with threads still waiting is a deadlock (DEADLOCK). Blocks are
// taken in order; a failure stops every block after it, and the lowest failed block is the one
// reported, as on one thread. A kernel without races or float atomics gives the same bits on
// any number of threads (atomics are real atomics across them). The watchdog, the faults and
// the canary of guard.h end the block with their report.
// Part of cuda_cpu_runtime.h, which includes the parts in order: never included on its own.
#pragma once

namespace andrea {
namespace {

// --- the launch ----------------------------------------------------------------------------------

inline bool async_deadlock(LaunchInfo* info);  // async_barriers.h
inline void async_block_start(int nthreads);

// Run one block to the end: every fiber until it blocks, then release barriers, until all return.
inline int run_block(LaunchInfo* info) {
    Sched& s = sched();
    Guard& g = guard();
    const int n = s.nthreads;
    s.barrier_gen++;
    for (;;) {
        bool ran = false;
        // One sweep over the threads in schedule order. A fiber that blocks may hand over to the
        // next ready one itself (yield): the sweep goes on from wherever that chain stopped.
        for (s.sweep_pos = 0; s.sweep_pos < n; s.sweep_pos++) {
            Fiber* f = s.pool[s.reverse ? n - 1 - s.sweep_pos : s.sweep_pos];
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
                describe_fault(s.cur, info);  // the fiber that ran last, which the signal left
                return FAULT;
            }
            if (g.timed_out) {
                info->running = s.live;
                const double now = cpu_now();
                char why[96];
                if (now - g.block_start >= g.limit)
                    std::snprintf(why, sizeof why, "ran past its %.3g s limit", g.limit);
                else  // stalled: not one thread blocked or returned for the budget's seconds
                    std::snprintf(why, sizeof why, "made no progress for %.3g s (no thread reached a barrier "
                                  "or its end)", g.budget);
                std::snprintf(info->message, sizeof info->message,
                              "%s with %d of %d threads still running "
                              "(%d at __syncthreads, %d at a warp sync): an endless loop?",
                              why, s.live, n, s.at_barrier, [&] {
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
#ifdef ANDREA_TSAN
            std::vector<int> waiting;
            for (int i = 0; i < n; i++)
                if (s.pool[i]->state == AT_BARRIER) waiting.push_back(i);
            race_meet(waiting.data(), (int)waiting.size());
#endif
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
        if (!ran && async_deadlock(info)) return DEADLOCK;  // threads at named barriers or mbarriers
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
        f->sched = &s;
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

inline TensorCoreState* new_tensor_core_state();  // tensor_cores.h

// What the OS threads of one launch share: the launch, the next block to take, and the failure
// of the lowest block so far (the one a launch on one thread would have stopped at).
struct LaunchShared {
    void (*entry)(void**);
    void** args;
    const unsigned* grid;
    const unsigned* block;
    size_t shared_bytes;
    int reverse;
    const LaunchOptions* opts;
    LaunchInfo* info;  // live: the block running now and its budget, for the parent of a worker
    long nblocks;
    std::atomic<long> next{0};
    std::atomic<long> failed{LONG_MAX};
    std::atomic<double> slowest{0};  // the slowest block so far (the watchdog's adaptive budget)
    std::mutex mu;  // guards result and result_info
    int result = OK;
    LaunchInfo result_info{};
};

inline void record_failure(LaunchShared& L, long b, int rc, const LaunchInfo& mine) {
    std::lock_guard<std::mutex> lock(L.mu);
    if (b >= L.failed.load()) return;
    L.failed = b;
    L.result = rc;
    std::memcpy((void*)&L.result_info, (const void*)&mine, sizeof mine);
}

// One OS thread's part of a launch: blocks taken in order from the shared counter, each run to
// its end by this thread's fibers; after a failure no block past the failed one is started.
inline void run_share(LaunchShared& L) {
    Sched& s = sched();
    Guard& g = guard();
    const unsigned* grid = L.grid;
    const unsigned* block = L.block;
    const LaunchOptions* opts = L.opts;
    LaunchInfo mine{};
    s.thread_idx = &threadIdx;
    const int n = (int)(block[0] * block[1] * block[2]);
    if (const int rc = prepare_pool(n, &mine)) return record_failure(L, -1, rc, mine);
    s.warps.assign((n + 31) / 32, Warp{});
    for (int i = 0; i < n; i++) {
        Fiber* f = s.pool[i];
        f->lid = i;
        f->tid = uint3{(unsigned)(i % block[0]), (unsigned)(i / block[0] % block[1]),
                       (unsigned)(i / (block[0] * block[1]))};
    }
    std::vector<uint3> race_tids(n);
    for (int i = 0; i < n; i++) race_tids[i] = s.pool[i]->tid;
#ifdef ANDREA_TSAN
    // racecheck: the other fiber sets (racecheck.h), made ready as the pool is; s.pool is set 0.
    // (One OS thread runs every block of racecheck's build: these and racecheck's state are its.)
    static std::vector<Fiber*> race_pools[kRaceSets];
    int race_set = 0;
    for (int k = 1; k < kRaceSets; k++) {
        std::swap(s.pool, race_pools[k]);
        const int ready = prepare_pool(n, &mine);
        for (int i = 0; i < (int)s.pool.size() && i < n; i++) { s.pool[i]->lid = i; s.pool[i]->tid = race_tids[i]; }
        std::swap(s.pool, race_pools[k]);
        if (ready) return record_failure(L, -1, ready, mine);  // nothing to undo yet
    }
#endif
    s.entry = L.entry;
    s.args = L.args;
    s.nthreads = n;
    s.reverse = L.reverse != 0;
    if (!dyn_map(L.shared_bytes)) {
        dyn_unmap();
        std::snprintf(mine.message, sizeof mine.message, "cannot map %zu bytes of dynamic shared memory",
                      L.shared_bytes);
        return record_failure(L, -1, INTERNAL, mine);
    }
    SharedLayout layout;
    shared_layout(layout);
    g.opts = opts;
    g.timed_out = 0;
    g.block_start = g.last_progress = cpu_now();
    g.budget = g.limit = 1e30;  // between blocks: no limit (each block sets its own)
    ThreadWatch watch;
    watch_thread(watch);
    for (long b; (b = L.next.fetch_add(1)) < L.nblocks && b < L.failed.load();) {
        const unsigned bx = (unsigned)(b % grid[0]), by = (unsigned)(b / grid[0] % grid[1]),
                       bz = (unsigned)(b / ((long)grid[0] * grid[1]));
        blockIdx = uint3{bx, by, bz};
        mine.block[0] = L.info->block[0] = (int)bx;
        mine.block[1] = L.info->block[1] = (int)by;
        mine.block[2] = L.info->block[2] = (int)bz;
#ifdef ANDREA_TSAN
        const int set = (int)(b % kRaceSets);
        if (set != race_set) {
            std::swap(s.pool, race_pools[race_set]);
            std::swap(s.pool, race_pools[set]);
            race_set = set;
        }
#else
        const int set = 0;
#endif
        race_block_begin(n, blockIdx, set, race_tids.data(),
                         layout.fill.empty() ? nullptr : layout.fill[0].lo,
                         layout.fill.empty() ? 0 : (size_t)(layout.fill.back().hi - layout.fill[0].lo),
                         g.dyn_base, g.dyn_bytes);
        poison_shared(layout);
        tensor_core_block_start(n);
        async_block_start(n);
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
        watch_block(opts, L.slowest.load());
        mine.limit_s = L.info->limit_s = g.limit;  // what the parent of a worker or child waits for
        mine.block_start = L.info->block_start = seconds(CLOCK_PROCESS_CPUTIME_ID);  // the clock the parent can read
        const int rc = run_block(&mine);
        race_block_end(n, blockIdx, race_tids.data());
        const double took = cpu_now() - g.block_start;
        for (double was = L.slowest.load(); took > was && !L.slowest.compare_exchange_weak(was, took);) {}
        if (rc != OK) {
            mine.threads = n;
            record_failure(L, b, rc, mine);
            break;
        }
    }
#ifdef ANDREA_TSAN
    if (race_set != 0) {  // s.pool is set 0 between launches
        std::swap(s.pool, race_pools[race_set]);
        std::swap(s.pool, race_pools[0]);
    }
#endif
    unwatch_thread(watch);
    dyn_unmap();
}

// The extra OS threads of a launch: started when a launch first asks for them, then parked
// between launches (their fibers and shared memory stay warm). Never in a forked child.
struct ThreadPool {
    std::mutex mu;
    std::condition_variable wake, done;
    std::vector<pthread_t> threads;
    uint64_t generation = 0;
    int wanted = 0, finished = 0;  // wanted: the launch's OS threads, the launching one included
    LaunchShared* job = nullptr;
};

inline ThreadPool& thread_pool() {
    static ThreadPool* p = new ThreadPool();  // never destroyed: its threads never end
    return *p;
}

inline void* pool_thread(void* arg) {
    const int index = (int)(intptr_t)arg;  // 1, 2, ...: the launching thread is 0
    sigset_t mask;  // the caller's signals (Ctrl-C, a timer) are not this thread's to take
    sigfillset(&mask);
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGALRM}) sigdelset(&mask, sig);
    pthread_sigmask(SIG_SETMASK, &mask, nullptr);
    per_thread.sched = new Sched();
    per_thread.tensor_cores = new_tensor_core_state();
    ThreadPool& p = thread_pool();
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(p.mu);
    for (;;) {
        p.wake.wait(lock, [&] { return p.generation != seen; });
        seen = p.generation;
        if (index >= p.wanted) continue;
        LaunchShared* job = p.job;
        lock.unlock();
        run_share(*job);
        lock.lock();
        if (++p.finished == p.wanted - 1) p.done.notify_all();
    }
}

// Run L on `threads` OS threads: this one and threads - 1 of the pool (fewer if they cannot start).
inline void run_on_threads(LaunchShared& L, int threads) {
    ThreadPool& p = thread_pool();
    std::unique_lock<std::mutex> lock(p.mu);
    while ((int)p.threads.size() < threads - 1) {
        pthread_t t;
        if (pthread_create(&t, nullptr, pool_thread, (void*)(intptr_t)(p.threads.size() + 1))) break;
        pthread_detach(t);
        p.threads.push_back(t);
    }
    p.wanted = std::min(threads, (int)p.threads.size() + 1);
    p.finished = 0;
    p.job = &L;
    p.generation++;
    p.wake.notify_all();
    lock.unlock();
    run_share(L);
    lock.lock();
    p.done.wait(lock, [&] { return p.finished == p.wanted - 1; });
    p.job = nullptr;
}

inline int launch_locked(void (*entry)(void**), void** args, const unsigned* grid, const unsigned* block,
                         size_t shared_bytes, int reverse, const LaunchOptions* opts, LaunchInfo* info) {
    LaunchShared L;
    L.entry = entry;
    L.args = args;
    L.grid = grid;
    L.block = block;
    L.shared_bytes = shared_bytes;
    L.reverse = reverse;
    L.opts = opts;
    L.info = info;
    L.nblocks = (long)grid[0] * grid[1] * grid[2];
    blockDim = dim3(block[0], block[1], block[2]);
    gridDim = dim3(grid[0], grid[1], grid[2]);
#if defined(ANDREA_ASAN) || defined(ANDREA_TSAN)
    // AddressSanitizer's build: __shared__ is a plain static there; racecheck's: its fiber sets
    // and its ThreadSanitizer state are one thread's. One OS thread runs every block.
    const int threads = 1;
#else
    const int threads = (int)std::max(1L, std::min<long>(opts->threads, L.nblocks));
#endif
    SignalState old;
    catch_faults(old);
    race_launch_begin();
    if (threads > 1) run_on_threads(L, threads);
    else run_share(L);
    race_launch_end();
    restore_faults(old);
    if (L.result != OK) std::memcpy((void*)info, (const void*)&L.result_info, sizeof(LaunchInfo));
    return L.result;
}

}  // namespace
}  // namespace andrea
