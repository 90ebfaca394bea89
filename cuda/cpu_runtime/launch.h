// cpu_runtime/launch.h — running a launch in this process: blocks one after another on one OS
// thread, each block's fibers run until they block, then barriers and __activemask are released;
// nothing runnable with threads still waiting is a deadlock (DEADLOCK). The watchdog, the faults
// and the canary of guard.h end the block with their report.
// Part of cuda_cpu_runtime.h, which includes the parts in order: never included on its own.
#pragma once

namespace andrea {
namespace {

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
    std::vector<uint3> race_tids(n);
    for (int i = 0; i < n; i++) race_tids[i] = s.pool[i]->tid;
#ifdef ANDREA_TSAN
    // racecheck: the other fiber sets (racecheck.h), made ready as the pool is; s.pool is set 0.
    static std::vector<Fiber*> race_pools[kRaceSets];
    int race_set = 0;
    for (int k = 1; k < kRaceSets; k++) {
        std::swap(s.pool, race_pools[k]);
        const int ready = prepare_pool(n, info);
        for (int i = 0; i < (int)s.pool.size() && i < n; i++) { s.pool[i]->lid = i; s.pool[i]->tid = race_tids[i]; }
        std::swap(s.pool, race_pools[k]);
        if (ready) return ready;  // nothing to undo yet
    }
#endif
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
    race_launch_begin();
    int rc = OK;
    for (unsigned bz = 0; bz < grid[2] && rc == OK; bz++)
        for (unsigned by = 0; by < grid[1] && rc == OK; by++)
            for (unsigned bx = 0; bx < grid[0] && rc == OK; bx++) {
                blockIdx = uint3{bx, by, bz};
                info->block[0] = (int)bx; info->block[1] = (int)by; info->block[2] = (int)bz;
#ifdef ANDREA_TSAN
                const int set = (int)((((unsigned long long)bz * grid[1] + by) * grid[0] + bx) % kRaceSets);
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
                race_block_end(n, blockIdx, race_tids.data());
                g.slowest = std::max(g.slowest, cpu_now() - g.block_start);
            }
    race_launch_end();
#ifdef ANDREA_TSAN
    if (race_set != 0) {  // s.pool is set 0 between launches
        std::swap(s.pool, race_pools[race_set]);
        std::swap(s.pool, race_pools[0]);
    }
#endif
    restore_faults(old);
    dyn_unmap();
    if (rc != OK) info->threads = n;
    return rc;
}

}  // namespace
}  // namespace andrea
