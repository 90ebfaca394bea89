// cpu_runtime/intrinsics.h — the rest of CUDA's device intrinsics for the CPU build: math the
// C library lacks, directed-rounding variants, bit tricks, cache-hinted loads and stores, clocks
// and sleeps. Included by cuda_cpu_runtime.h after barriers.h (it uses the scheduler of fibers.h);
// the half and bfloat16 types live in half.h (reached through include/cuda_fp16.h and
// include/cuda_bf16.h), cooperative groups in cooperative_groups.h. Refused: nothing a GPU
// accepts here.
#pragma once

#include <cfenv>
#include <ctime>
#include <climits>
#include <limits>

// ---------------------------------------------------------------------------------------------
// Math: the fast intrinsics as their libm functions, and CUDA functions glibc does not have

inline float __exp10f(float x) { return exp10f(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __log10f(float x) { return log10f(x); }
inline float __tanf(float x) { return tanf(x); }
inline void __sincosf(float x, float* s, float* c) { sincosf(x, s, c); }
inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __drcp_rn(double x) { return 1.0 / x; }
inline double __dsqrt_rn(double x) { return sqrt(x); }
inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
inline float fdividef(float a, float b) { return a / b; }
inline float sinpif(float x) { return (float)sin(M_PI * (double)x); }
inline float cospif(float x) { return (float)cos(M_PI * (double)x); }
inline void sincospif(float x, float* s, float* c) { *s = sinpif(x); *c = cospif(x); }
inline double sinpi(double x) { return sin(M_PI * x); }
inline double cospi(double x) { return cos(M_PI * x); }
inline float rcbrtf(float x) { return 1.0f / cbrtf(x); }
inline float rhypotf(float x, float y) { return 1.0f / hypotf(x, y); }
inline float norm3df(float a, float b, float c) { return (float)sqrt((double)a * a + (double)b * b + (double)c * c); }
inline float rnorm3df(float a, float b, float c) { return 1.0f / norm3df(a, b, c); }
inline float normcdff(float x) { return 0.5f * erfcf(-x * (float)M_SQRT1_2); }
inline double normcdf(double x) { return 0.5 * erfc(-x * M_SQRT1_2); }
// erfinv: Giles' single-precision approximation refined by two Newton steps on erf in double.
inline double erfinv(double y) {
    if (y <= -1.0) return y == -1.0 ? -INFINITY : NAN;
    if (y >= 1.0) return y == 1.0 ? INFINITY : NAN;
    double w = -log((1.0 - y) * (1.0 + y)), x;
    if (w < 5.0) {
        w -= 2.5;
        x = 2.81022636e-08;
        for (double c : {3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
                         -0.00417768164, 0.246640727, 1.50140941})
            x = c + x * w;
    } else {
        w = sqrt(w) - 3.0;
        x = -0.000200214257;
        for (double c : {0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
                         0.00943887047, 1.00167406, 2.83297682})
            x = c + x * w;
    }
    x *= y;
    for (int i = 0; i < 2; i++) x -= (erf(x) - y) / (2.0 / sqrt(M_PI) * exp(-x * x));
    return x;
}
inline float erfinvf(float y) { return (float)erfinv(y); }
inline double erfcinv(double y) { return erfinv(1.0 - y); }
inline float erfcinvf(float y) { return (float)erfinv(1.0 - (double)y); }

// ---------------------------------------------------------------------------------------------
// Directed rounding (_rz toward zero, _rd down, _ru up): the operation runs under that rounding
// mode, the result passes through a volatile so the compiler cannot move it across the switch.

namespace andrea {
template <class T> inline T opaque(T x) {  // read after the mode switch, not hoisted above it
    volatile T v = x;
    return v;
}
template <class F> inline auto rounded(int mode, F op) {
    const int old = std::fegetround();
    std::fesetround(mode);
    volatile auto r = op();
    std::fesetround(old);
    return r;
}
}  // namespace andrea

#define ANDREA_ROUNDED_ALL(name, T, params, expr)                                                   \
    inline T name##_rz params { return andrea::rounded(FE_TOWARDZERO, [&]() -> T { return expr; }); } \
    inline T name##_rd params { return andrea::rounded(FE_DOWNWARD, [&]() -> T { return expr; }); }   \
    inline T name##_ru params { return andrea::rounded(FE_UPWARD, [&]() -> T { return expr; }); }
ANDREA_ROUNDED_ALL(__fadd, float, (float a, float b), andrea::opaque(a) + b)
ANDREA_ROUNDED_ALL(__fsub, float, (float a, float b), andrea::opaque(a) - b)
ANDREA_ROUNDED_ALL(__fmul, float, (float a, float b), andrea::opaque(a) * b)
ANDREA_ROUNDED_ALL(__fdiv, float, (float a, float b), andrea::opaque(a) / b)
ANDREA_ROUNDED_ALL(__fmaf, float, (float a, float b, float c), fmaf(andrea::opaque(a), b, c))
ANDREA_ROUNDED_ALL(__frcp, float, (float a), 1.0f / andrea::opaque(a))
ANDREA_ROUNDED_ALL(__fsqrt, float, (float a), sqrtf(andrea::opaque(a)))
ANDREA_ROUNDED_ALL(__dadd, double, (double a, double b), andrea::opaque(a) + b)
ANDREA_ROUNDED_ALL(__dsub, double, (double a, double b), andrea::opaque(a) - b)
ANDREA_ROUNDED_ALL(__dmul, double, (double a, double b), andrea::opaque(a) * b)
ANDREA_ROUNDED_ALL(__ddiv, double, (double a, double b), andrea::opaque(a) / b)
ANDREA_ROUNDED_ALL(__fma, double, (double a, double b, double c), fma(andrea::opaque(a), b, c))
ANDREA_ROUNDED_ALL(__drcp, double, (double a), 1.0 / andrea::opaque(a))
ANDREA_ROUNDED_ALL(__dsqrt, double, (double a), sqrt(andrea::opaque(a)))
ANDREA_ROUNDED_ALL(__double2float, float, (double a), (float)andrea::opaque(a))
ANDREA_ROUNDED_ALL(__int2float, float, (int a), (float)andrea::opaque(a))
ANDREA_ROUNDED_ALL(__uint2float, float, (unsigned a), (float)andrea::opaque(a))
ANDREA_ROUNDED_ALL(__ll2float, float, (long long a), (float)andrea::opaque(a))
ANDREA_ROUNDED_ALL(__ull2float, float, (unsigned long long a), (float)andrea::opaque(a))
ANDREA_ROUNDED_ALL(__ll2double, double, (long long a), (double)andrea::opaque(a))
ANDREA_ROUNDED_ALL(__ull2double, double, (unsigned long long a), (double)andrea::opaque(a))
#undef ANDREA_ROUNDED_ALL
inline float __double2float_rn(double a) { return (float)a; }
inline float __uint2float_rn(unsigned a) { return (float)a; }
inline float __ll2float_rn(long long a) { return (float)a; }
inline float __ull2float_rn(unsigned long long a) { return (float)a; }
inline double __ll2double_rn(long long a) { return (double)a; }
inline double __ull2double_rn(unsigned long long a) { return (double)a; }
inline double __int2double_rn(int a) { return a; }
inline double __uint2double_rn(unsigned a) { return a; }

// Float to integer: round as named, then saturate (NaN gives 0), as the cvt instructions do.
namespace andrea {
template <class I, class F> inline I to_int(F x, F (*round)(F)) {
    if (x != x) return 0;
    const F r = round(x);
    if (r <= (F)std::numeric_limits<I>::min()) return std::numeric_limits<I>::min();
    if (r >= (F)std::numeric_limits<I>::max()) return std::numeric_limits<I>::max();
    return (I)r;
}
}  // namespace andrea
#define ANDREA_TO_INT(prefix, F, suffix, I)                                                          \
    inline I prefix##2##suffix##_rn(F x) { return andrea::to_int<I, F>(x, [](F v) -> F { return nearbyint(v); }); } \
    inline I prefix##2##suffix##_rz(F x) { return andrea::to_int<I, F>(x, [](F v) -> F { return trunc(v); }); }     \
    inline I prefix##2##suffix##_rd(F x) { return andrea::to_int<I, F>(x, [](F v) -> F { return floor(v); }); }     \
    inline I prefix##2##suffix##_ru(F x) { return andrea::to_int<I, F>(x, [](F v) -> F { return ceil(v); }); }
ANDREA_TO_INT(__float, float, uint, unsigned)
ANDREA_TO_INT(__float, float, ll, long long)
ANDREA_TO_INT(__float, float, ull, unsigned long long)
ANDREA_TO_INT(__double, double, int, int)
ANDREA_TO_INT(__double, double, uint, unsigned)
ANDREA_TO_INT(__double, double, ll, long long)
ANDREA_TO_INT(__double, double, ull, unsigned long long)
#undef ANDREA_TO_INT
inline int __float2int_rd(float x) { return andrea::to_int<int, float>(x, [](float v) { return floorf(v); }); }
inline int __float2int_ru(float x) { return andrea::to_int<int, float>(x, [](float v) { return ceilf(v); }); }

inline long long __double_as_longlong(double x) { long long i; std::memcpy(&i, &x, 8); return i; }
inline double __longlong_as_double(long long i) { double x; std::memcpy(&x, &i, 8); return x; }
inline int __double2hiint(double x) { return (int)(__double_as_longlong(x) >> 32); }
inline int __double2loint(double x) { return (int)__double_as_longlong(x); }
inline double __hiloint2double(int hi, int lo) {
    return __longlong_as_double((long long)(((unsigned long long)(unsigned)hi << 32) | (unsigned)lo));
}

// ---------------------------------------------------------------------------------------------
// Integer intrinsics

inline unsigned __brev(unsigned x) {
    x = (x >> 1 & 0x55555555u) | (x & 0x55555555u) << 1;
    x = (x >> 2 & 0x33333333u) | (x & 0x33333333u) << 2;
    x = (x >> 4 & 0x0f0f0f0fu) | (x & 0x0f0f0f0fu) << 4;
    return __builtin_bswap32(x);
}
inline unsigned long long __brevll(unsigned long long x) {
    return (unsigned long long)__brev((unsigned)x) << 32 | __brev((unsigned)(x >> 32));
}
// Byte i of the result is byte s[i] of the 8-byte value (y:x), s the low 3 bits of each selector nibble.
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
    const unsigned long long v = (unsigned long long)y << 32 | x;
    unsigned r = 0;
    for (int i = 0; i < 4; i++) r |= (unsigned)(v >> (8 * (s >> (4 * i) & 7)) & 0xff) << (8 * i);
    return r;
}
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)((unsigned long long)a * b >> 32); }
inline int __mulhi(int a, int b) { return (int)((long long)a * b >> 32); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)((unsigned __int128)a * b >> 64);
}
inline long long __mul64hi(long long a, long long b) { return (long long)((__int128)a * b >> 64); }
inline int __mul24(int a, int b) { return (a << 8 >> 8) * (b << 8 >> 8); }
inline unsigned __umul24(unsigned a, unsigned b) { return (a & 0xffffff) * (b & 0xffffff); }
inline unsigned __sad(int a, int b, unsigned c) { return c + (unsigned)(a > b ? (long long)a - b : (long long)b - a); }
inline unsigned __usad(unsigned a, unsigned b, unsigned c) { return c + (a > b ? a - b : b - a); }
inline int __hadd(int a, int b) { return (int)(((long long)a + b) >> 1); }
inline int __rhadd(int a, int b) { return (int)(((long long)a + b + 1) >> 1); }
inline unsigned __uhadd(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a + b) >> 1); }
inline unsigned __urhadd(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a + b + 1) >> 1); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned shift) {
    return (unsigned)((((unsigned long long)hi << 32 | lo) << (shift & 31)) >> 32);
}
inline unsigned __funnelshift_lc(unsigned lo, unsigned hi, unsigned shift) {
    return (unsigned)((((unsigned long long)hi << 32 | lo) << (shift > 32 ? 32 : shift)) >> 32);
}
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift) {
    return (unsigned)(((unsigned long long)hi << 32 | lo) >> (shift & 31));
}
inline unsigned __funnelshift_rc(unsigned lo, unsigned hi, unsigned shift) {
    return (unsigned)(((unsigned long long)hi << 32 | lo) >> (shift > 32 ? 32 : shift));
}

// ---------------------------------------------------------------------------------------------
// Cache-hinted loads and stores: the hint is about the GPU's caches, the value is the same.

template <class T> inline T __ldca(const T* p) { return *p; }
template <class T> inline T __ldcg(const T* p) { return *p; }
template <class T> inline T __ldcs(const T* p) { return *p; }
template <class T> inline T __ldlu(const T* p) { return *p; }
template <class T> inline T __ldcv(const T* p) { return *p; }
template <class T> inline void __stwb(T* p, T v) { *p = v; }
template <class T> inline void __stcg(T* p, T v) { *p = v; }
template <class T> inline void __stcs(T* p, T v) { *p = v; }
template <class T> inline void __stwt(T* p, T v) { *p = v; }
// ---------------------------------------------------------------------------------------------
// Clocks and sleeping. A thread that sleeps gives the others a turn, so a spin-wait with
// __nanosleep (waiting for another thread's flag) makes progress instead of hanging.

inline long long clock64() {  // nanoseconds of a monotonic clock: counts up, as the SM's cycle counter does
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}
inline unsigned long long __globaltimer() { return (unsigned long long)clock64(); }
inline void __nanosleep(unsigned) {
    andrea::RaceQuiet quiet;
    andrea::Sched& s = andrea::sched();
    if (andrea::in_kernel()) andrea::yield(s.cur);
}
