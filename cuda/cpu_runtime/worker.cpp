// cpu_runtime/worker.cpp — the launch worker: a small program (not part of any kernel library)
// that loads one kernel library once and runs the launches its parent sends it, in this
// process, so that a wrong kernel ends this worker and never the caller. The parent
// (andrea_cli/backends/cpu_runtime/worker.py) starts a fresh one after any launch that failed.
//
// Device arrays: the parent's arena (guarded_memory.py) is one memfd and one fixed address
// range; this worker reserves the same range before anything else is mapped, and maps each
// array's pages from the same file at the same address, so argument pointers and pointers
// stored inside device memory mean the same here. The launch's report (LaunchInfo) is written
// into a page of that arena, where the parent watches its block_start while it waits.
//
// Refused: a range that is not free here (the worker exits with status 3 and says so; the
// parent falls back to a forked child per launch).
//
//   andrea-worker LIBRARY SOCKET_FD ARENA_FD ARENA_BASE ARENA_SIZE PARENT_PID
//
// One message per launch on a SOCK_SEQPACKET socket, all little-endian:
//   u32 n_ops, n_ops x {u8 op ('M' map, 'U' unmap), u64 address, u64 length},
//   u64 info address, u32 grid[3], u32 block[3], u64 shared bytes, i32 reverse,
//   u32 options size, options bytes, u16 name size, name (the export's prefix),
//   u32 n_args, n_args x {u32 size, bytes}.
// The message carries the parent's standard output as a file descriptor (SCM_RIGHTS): what the
// kernels print goes where the caller's own output goes now, however it was redirected since.
// The reply: the launch's i32 return code. Any other state of the socket (closed) ends the worker.
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

namespace {

using LaunchFn = int (*)(void (*)(void**), void**, const unsigned*, const unsigned*, size_t, int, const void*,
                         void*);

struct Reader {  // a message, read front to back; a short one sets `bad`
    const char* at;
    const char* end;
    bool bad = false;
    template <class T> T get() {
        T v{};
        if ((size_t)(end - at) < sizeof(T)) { bad = true; return v; }
        std::memcpy(&v, at, sizeof(T));
        at += sizeof(T);
        return v;
    }
    const char* take(size_t n) {
        if ((size_t)(end - at) < n) { bad = true; return nullptr; }
        const char* p = at;
        at += n;
        return p;
    }
};

[[noreturn]] void fail(int status, const char* what) {
    std::fprintf(stderr, "andrea-worker: %s\n", what);
    _exit(status);
}

// malloc checks the chunks it touches: a few sizes from the bins and the top of the heap, so a
// stray write into the heap's bookkeeping ends this launch's worker, not a later launch.
__attribute__((noinline)) void probe_heap() {
    void* volatile blocks[4] = {malloc(24), malloc(1000), malloc(60000), malloc(120000)};
    for (void* b : blocks) free(b);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 7) fail(2, "usage: andrea-worker LIBRARY SOCKET_FD ARENA_FD ARENA_BASE ARENA_SIZE PARENT_PID");
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the caller
    signal(SIGINT, SIG_DFL);  // Ctrl-C ends the worker too, even where the caller's shell ignored it
    signal(SIGTERM, SIG_DFL);
    if (getppid() != (pid_t)std::strtol(argv[6], nullptr, 10)) _exit(0);  // it is gone already
    const int sock = (int)std::strtol(argv[2], nullptr, 10), arena_fd = (int)std::strtol(argv[3], nullptr, 10);
    const uintptr_t base = (uintptr_t)std::strtoull(argv[4], nullptr, 0);
    const size_t size = (size_t)std::strtoull(argv[5], nullptr, 0);
    void* got = mmap((void*)base, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE,
                     -1, 0);
    if (got != (void*)base) fail(3, "the device-array address range is not free in the worker");

    void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) fail(4, dlerror());
    const auto launch = reinterpret_cast<LaunchFn>(dlsym(lib, "andrea_launch"));
    if (!launch) fail(4, "the library has no andrea_launch");
    std::unordered_map<std::string, void (*)(void**)> entries;

    std::vector<char> message(1 << 20);
    std::vector<void*> args;
    for (;;) {
        iovec iov{message.data(), message.size()};
        alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
        msghdr header{};
        header.msg_iov = &iov;
        header.msg_iovlen = 1;
        header.msg_control = control;
        header.msg_controllen = sizeof control;
        const ssize_t n = recvmsg(sock, &header, MSG_CMSG_CLOEXEC);
        if (n <= 0) _exit(0);  // the parent closed the socket: done
        for (cmsghdr* c = CMSG_FIRSTHDR(&header); c; c = CMSG_NXTHDR(&header, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
            int out;
            std::memcpy(&out, CMSG_DATA(c), sizeof out);
            dup2(out, 1);
            close(out);
        }
        Reader r{message.data(), message.data() + n};
        for (uint32_t ops = r.get<uint32_t>(); ops-- && !r.bad;) {
            const char op = r.get<char>();
            const uintptr_t address = r.get<uint64_t>();
            const size_t length = r.get<uint64_t>();
            if (r.bad || address < base || address + length > base + size) fail(5, "a mapping outside the arena");
            void* at = op == 'M'
                ? mmap((void*)address, length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, arena_fd,
                       (off_t)(address - base))
                : mmap((void*)address, length, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
                       -1, 0);
            if (at != (void*)address) fail(5, "cannot map a device array");
        }
        void* info = (void*)(uintptr_t)r.get<uint64_t>();
        unsigned grid[3], block[3];
        for (unsigned& g : grid) g = r.get<uint32_t>();
        for (unsigned& b : block) b = r.get<uint32_t>();
        const size_t shared = r.get<uint64_t>();
        const int reverse = r.get<int32_t>();
        const uint32_t options_size = r.get<uint32_t>();
        alignas(16) char options[64];
        const char* options_bytes = r.take(options_size);
        if (options_size > sizeof options) r.bad = true;
        if (!r.bad) std::memcpy(options, options_bytes, options_size);
        const uint16_t name_size = r.get<uint16_t>();
        const char* name_bytes = r.take(name_size);
        const uint32_t nargs = r.get<uint32_t>();
        // each argument's bytes copied to 16-byte aligned storage (the wrapper reads them typed)
        std::vector<std::max_align_t> storage((size_t)n / sizeof(std::max_align_t) + nargs + 1);
        char* store = reinterpret_cast<char*>(storage.data());
        args.assign(nargs ? nargs : 1, nullptr);
        for (uint32_t i = 0; i < nargs && !r.bad; i++) {
            const uint32_t bytes = r.get<uint32_t>();
            const char* value = r.take(bytes);
            if (r.bad) break;
            std::memcpy(store, value, bytes);
            args[i] = store;
            store += (bytes + alignof(std::max_align_t) - 1) / alignof(std::max_align_t) * alignof(std::max_align_t);
        }
        if (r.bad || !info) fail(5, "a malformed launch message");
        const std::string name(name_bytes, name_size);
        auto found = entries.find(name);
        if (found == entries.end()) {
            auto entry = reinterpret_cast<void (*)(void**)>(dlsym(lib, (name + "__launch").c_str()));
            if (!entry) fail(5, "a launch of a kernel the library does not export");
            found = entries.emplace(name, entry).first;
        }
        int32_t rc = launch(found->second, args.data(), grid, block, shared, reverse, options, info);
        if (rc == 0) probe_heap();  // 0: OK (ANDREA_RESULTS in fibers.h)
        std::fflush(nullptr);  // what the kernels printed, before the parent goes on
        if (send(sock, &rc, sizeof rc, MSG_NOSIGNAL) != (ssize_t)sizeof rc) _exit(0);
    }
}
