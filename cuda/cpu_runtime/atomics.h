// cpu_runtime/atomics.h — CUDA's atomic functions and memory fences: atomicAdd, Sub, Exch, CAS, Min,
// Max, And, Or, Xor, Inc and Dec on the built-in types, with their _block and _system forms,
// through std::atomic_ref; atomicAdd, Max and Min on __half and __nv_bfloat16 (atomicAdd on their
// pairs too), a compare-and-swap loop on the storage; __threadfence, _block and _system. Float
// atomics are as exact as the order the blocks run in.
// Read twice: cuda_cpu_runtime.h includes it for the built-in types (never include it on its own);
// half.h includes it again once the 16-bit float types exist (a kernel file included cuda_fp16.h
// or cuda_bf16.h), for the part on those types.

#ifndef ANDREA_ATOMICS_BUILTIN
#define ANDREA_ATOMICS_BUILTIN

// ---------------------------------------------------------------------------------------------
// Fences

// Never inlined under racecheck: its return address names the fence in a report.
ANDREA_NO_TSAN inline void __threadfence() {
    andrea::race_fence(__builtin_return_address(0));
    std::atomic_thread_fence(std::memory_order_seq_cst);
}
ANDREA_NO_TSAN inline void __threadfence_block() {
    andrea::race_fence(__builtin_return_address(0));
    std::atomic_thread_fence(std::memory_order_seq_cst);
}
ANDREA_NO_TSAN inline void __threadfence_system() {
    andrea::race_fence(__builtin_return_address(0));
    std::atomic_thread_fence(std::memory_order_seq_cst);
}

// ---------------------------------------------------------------------------------------------
// Atomics: std::atomic_ref, real atomics across the OS threads a launch's blocks run on.
// Racecheck's build makes them relaxed, as CUDA's are: an atomic alone orders no other memory,
// so ThreadSanitizer sees no ordering CUDA does not give (racecheck.h adds the fences' own).
// Every other build keeps them sequentially consistent (on x86 the same instructions for a
// read-modify-write), so the blocks on several OS threads need nothing more of the C++ model.

namespace andrea {
#ifdef ANDREA_TSAN
constexpr auto atomic_order = std::memory_order_relaxed;
#else
constexpr auto atomic_order = std::memory_order_seq_cst;
#endif
}  // namespace andrea
template <class T> inline T atomicAdd(T* p, std::type_identity_t<T> v) {
    andrea::RaceAtomic a(p);
    return std::atomic_ref<T>(*p).fetch_add(v, andrea::atomic_order);
}
template <class T> inline T atomicSub(T* p, std::type_identity_t<T> v) {
    andrea::RaceAtomic a(p);
    return std::atomic_ref<T>(*p).fetch_sub(v, andrea::atomic_order);
}
template <class T> inline T atomicExch(T* p, std::type_identity_t<T> v) {
    andrea::RaceAtomic a(p);
    return std::atomic_ref<T>(*p).exchange(v, andrea::atomic_order);
}
template <class T> inline T atomicCAS(T* p, std::type_identity_t<T> expected, std::type_identity_t<T> desired) {
    andrea::RaceAtomic a(p);
    std::atomic_ref<T>(*p).compare_exchange_strong(expected, desired, andrea::atomic_order);
    return expected;  // the old value, whether or not the swap happened
}
template <class T> inline T atomicMax(T* p, std::type_identity_t<T> v) {
    andrea::RaceAtomic a(p);
    std::atomic_ref<T> r(*p);
    T old = r.load(andrea::atomic_order);
    while (old < v && !r.compare_exchange_weak(old, v, andrea::atomic_order)) {}
    return old;
}
template <class T> inline T atomicMin(T* p, std::type_identity_t<T> v) {
    andrea::RaceAtomic a(p);
    std::atomic_ref<T> r(*p);
    T old = r.load(andrea::atomic_order);
    while (v < old && !r.compare_exchange_weak(old, v, andrea::atomic_order)) {}
    return old;
}

// ---------------------------------------------------------------------------------------------
// Bitwise, wrapping inc/dec, and the _block/_system scopes (one scope here: every atomic is a
// real atomic across OS threads).

template <class T> inline T atomicAnd(T* p, std::type_identity_t<T> v) {
    andrea::RaceAtomic a(p);
    return std::atomic_ref<T>(*p).fetch_and(v, andrea::atomic_order);
}
template <class T> inline T atomicOr(T* p, std::type_identity_t<T> v) {
    andrea::RaceAtomic a(p);
    return std::atomic_ref<T>(*p).fetch_or(v, andrea::atomic_order);
}
template <class T> inline T atomicXor(T* p, std::type_identity_t<T> v) {
    andrea::RaceAtomic a(p);
    return std::atomic_ref<T>(*p).fetch_xor(v, andrea::atomic_order);
}
// ((old >= limit) ? 0 : old + 1), and ((old == 0 || old > limit) ? limit : old - 1)
inline unsigned atomicInc(unsigned* p, unsigned limit) {
    andrea::RaceAtomic a(p);
    std::atomic_ref<unsigned> r(*p);
    unsigned old = r.load(andrea::atomic_order);
    while (!r.compare_exchange_weak(old, old >= limit ? 0 : old + 1, andrea::atomic_order)) {}
    return old;
}
inline unsigned atomicDec(unsigned* p, unsigned limit) {
    andrea::RaceAtomic a(p);
    std::atomic_ref<unsigned> r(*p);
    unsigned old = r.load(andrea::atomic_order);
    while (!r.compare_exchange_weak(old, (old == 0 || old > limit) ? limit : old - 1, andrea::atomic_order)) {}
    return old;
}
#define ANDREA_SCOPED(op)                                                                          \
    template <class T, class... V> inline auto op##_block(T* p, V... v) { return op(p, v...); }  \
    template <class T, class... V> inline auto op##_system(T* p, V... v) { return op(p, v...); }
ANDREA_SCOPED(atomicAdd)
ANDREA_SCOPED(atomicSub)
ANDREA_SCOPED(atomicExch)
ANDREA_SCOPED(atomicCAS)
ANDREA_SCOPED(atomicMin)
ANDREA_SCOPED(atomicMax)
ANDREA_SCOPED(atomicAnd)
ANDREA_SCOPED(atomicOr)
ANDREA_SCOPED(atomicXor)
ANDREA_SCOPED(atomicInc)
ANDREA_SCOPED(atomicDec)
#undef ANDREA_SCOPED

#endif  // ANDREA_ATOMICS_BUILTIN

#if defined(ANDREA_HALF_TYPES) && !defined(ANDREA_ATOMICS_HALF)
#define ANDREA_ATOMICS_HALF

// ---------------------------------------------------------------------------------------------
// Atomics on 16-bit floats and pairs: a compare-and-swap loop on the storage, one rounding.

namespace andrea {
template <class T> inline T narrow_atomic(T* p, T v, T (*op)(T, T)) {
    using Bits = std::conditional_t<sizeof(T) == 2, unsigned short, unsigned>;
    std::atomic_ref<Bits> r(*reinterpret_cast<Bits*>(p));
    Bits old = r.load(), want;
    T o, n;
    do {
        std::memcpy(&o, &old, sizeof(T));
        n = op(o, v);
        std::memcpy(&want, &n, sizeof(T));
    } while (!r.compare_exchange_weak(old, want));
    return o;
}
}  // namespace andrea
inline __half atomicAdd(__half* p, __half v) { return andrea::narrow_atomic<__half>(p, v, __hadd); }
inline __half2 atomicAdd(__half2* p, __half2 v) { return andrea::narrow_atomic<__half2>(p, v, __hadd2); }
inline __nv_bfloat16 atomicAdd(__nv_bfloat16* p, __nv_bfloat16 v) { return andrea::narrow_atomic<__nv_bfloat16>(p, v, __hadd); }
inline __nv_bfloat162 atomicAdd(__nv_bfloat162* p, __nv_bfloat162 v) { return andrea::narrow_atomic<__nv_bfloat162>(p, v, __hadd2); }
inline __half atomicMax(__half* p, __half v) { return andrea::narrow_atomic<__half>(p, v, __hmax); }
inline __half atomicMin(__half* p, __half v) { return andrea::narrow_atomic<__half>(p, v, __hmin); }
inline __nv_bfloat16 atomicMax(__nv_bfloat16* p, __nv_bfloat16 v) { return andrea::narrow_atomic<__nv_bfloat16>(p, v, __hmax); }
inline __nv_bfloat16 atomicMin(__nv_bfloat16* p, __nv_bfloat16 v) { return andrea::narrow_atomic<__nv_bfloat16>(p, v, __hmin); }

#endif  // ANDREA_ATOMICS_HALF
