// cpu_runtime/isolation.h — a launch in a forked child process (LaunchOptions.isolate): the device
// arrays are MAP_SHARED (Python allocates them so), the report comes back in a shared page, and a
// crash, a heap corruption or a child that outlives its own watchdog ends only the child (CRASHED,
// TIMEOUT). The usual isolation is no longer this but the launch worker (worker.cpp, driven by
// andrea_cli/backends/cpu_runtime/worker.py), which runs launches in-process in a long-lived
// process of its own; a fork per launch remains where the worker cannot run, and for comparison
// (ANDREA_CPU_ISOLATION=fork): it costs a copy of the caller's page tables per launch.
// Part of cuda_cpu_runtime.h, which includes the parts in order: never included on its own.
#pragma once

namespace andrea {
namespace {

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
        LaunchOptions one = *opts;  // the pool's threads do not exist in a forked child
        one.threads = 1;
        const int rc = launch_locked(entry, args, grid, block, shared_bytes, reverse, &one, shared);
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

}  // namespace
}  // namespace andrea
