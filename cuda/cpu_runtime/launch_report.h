// cpu_runtime/launch_report.h — LaunchInfo, the report a failed launch fills for Python (native.py
// mirrors the layout; andrea_info_size() checks it), and the words for a deadlock: which threads
// wait at __syncthreads, which at a warp sync, which returned.
// Part of cuda_cpu_runtime.h, which includes the parts in order: never included on its own.
#pragma once

namespace andrea {
namespace {

// --- the launch's report -------------------------------------------------------------------------

inline void tensor_core_block_start(int nthreads);  // tensor_cores.h, included last

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

}  // namespace
}  // namespace andrea
