// cpu_runtime/barriers.h — the block's barrier: __syncthreads, which the scheduler releases once
// every live thread of the block waits there (launch.h; a returned thread counts as arrived), and
// the votes it takes on the way (__syncthreads_count, _and, _or). Threads waiting there while
// another waits elsewhere, with nothing left to run, are a deadlock (DEADLOCK): a GPU would hang.
// Part of cuda_cpu_runtime.h, which includes the parts in order: never included on its own.
#pragma once

inline void __syncthreads() {
    andrea::RaceQuiet quiet;
    andrea::Sched& s = andrea::sched();
    s.cur->state = andrea::AT_BARRIER;
    s.at_barrier++;
    andrea::yield(s.cur);
}

// Block votes: __syncthreads that also counts a predicate over the threads that reach it.

namespace andrea {
namespace {
// (threads whose predicate holds, threads that arrived); the state is the scheduler's (Sched)
inline std::pair<int, int> block_vote(int pred) {
    RaceQuiet quiet;  // the count is the runtime's; the barrier inside orders the threads
    Sched& v = sched();
    const uint64_t g = v.barrier_gen;
    const int b = (int)(g & 1);
    if (v.vote_tag[b] != g) { v.vote_tag[b] = g; v.vote_count[b] = 0; v.vote_arrived[b] = 0; }
    v.vote_count[b] += pred != 0;
    v.vote_arrived[b]++;
    __syncthreads();
    return {v.vote_count[b], v.vote_arrived[b]};
}
}  // namespace
}  // namespace andrea

inline int __syncthreads_count(int pred) { return andrea::block_vote(pred).first; }
inline int __syncthreads_and(int pred) { auto [c, n] = andrea::block_vote(pred); return c == n; }
inline int __syncthreads_or(int pred) { return andrea::block_vote(pred).first != 0; }
