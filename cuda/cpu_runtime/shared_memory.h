// cpu_runtime/shared_memory.h — poisoning shared memory: every static __shared__ array (this library's
// thread-local storage) and the launch's dynamic shared bytes are filled with 0xff (NaN as float
// and double) at each block start, so a read of shared memory no thread wrote shows up as NaN
// instead of the previous block's values.
// Part of cuda_cpu_runtime.h, which includes the parts in order: never included on its own.
#pragma once

namespace andrea {
namespace {

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
// (`extern __shared__` arrays are not: see dyn_shared_base in fibers.h, mapped by guard.h.)
inline void shared_layout(SharedLayout& out) {
    // the runtime's own thread-local state (fibers.h) is not shared memory: never poisoned
    const auto range = [](auto& v) { return SharedLayout::Range{(char*)&v, (char*)&v + sizeof v}; };
    std::vector<SharedLayout::Range> skip = {range(threadIdx), range(blockIdx), range(per_thread),
                                             range(dyn_shared_base)};
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

}  // namespace
}  // namespace andrea
