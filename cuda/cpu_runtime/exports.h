// cpu_runtime/exports.h — what the generated wrapper and Python call: launch() checks the
// geometry (at most 1024 threads a block, no empty grid, at most 1 GiB of dynamic shared memory:
// BAD_LAUNCH otherwise) and runs the launch in-process or isolated; the wrapper's argument
// unpacking and kernel signatures; the C entry points (andrea_launch, the names of its return
// codes, the layout checks).
// Part of cuda_cpu_runtime.h, which includes the parts in order: never included on its own.
#pragma once

namespace andrea {
namespace {

inline int launch(void (*entry)(void**), void** args, const unsigned* grid, const unsigned* block,
                  size_t shared_bytes, int reverse, const LaunchOptions* opts, LaunchInfo* info) {
    static std::mutex one_at_a_time;  // one launch at a time: the scheduler state is the library's
    std::lock_guard<std::mutex> lock(one_at_a_time);
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

// The one C entry point Python calls (ctypes releases the GIL around it).
ANDREA_EXPORT int andrea_launch(void (*entry)(void**), void** args, const unsigned* grid,
                             const unsigned* block, size_t shared_bytes, int reverse,
                             const andrea::LaunchOptions* opts, andrea::LaunchInfo* info) {
    return andrea::launch(entry, args, grid, block, shared_bytes, reverse, opts, info);
}
ANDREA_EXPORT int andrea_info_size() { return (int)sizeof(andrea::LaunchInfo); }
// What andrea_launch returns, by name: "OK=0 DEADLOCK=1 ..." (native.py reads its codes here).
ANDREA_EXPORT const char* andrea_results() {
#define ANDREA_RESULT_TEXT(name, code) #name "=" #code " "
    return ANDREA_RESULTS(ANDREA_RESULT_TEXT);
#undef ANDREA_RESULT_TEXT
}
// Racecheck: where the last launch's shared memory was (static base and size, dynamic base and
// size), and the fences no atomic followed ("bx by bz tx ty tz file:line" lines); 0 elsewhere.
ANDREA_EXPORT int andrea_racecheck(unsigned long long* layout, char* fences, int size) {
#ifdef ANDREA_TSAN
    const andrea::RaceState& r = andrea::race();
    for (int i = 0; i < 4; i++) layout[i] = r.layout[i];
    std::snprintf(fences, (size_t)size, "%s", r.fences.c_str());
    return 1;
#else
    (void)layout; (void)fences; (void)size;
    return 0;
#endif
}
ANDREA_EXPORT int andrea_options_size() { return (int)sizeof(andrea::LaunchOptions); }
