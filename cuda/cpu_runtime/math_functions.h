// cpu_runtime/math_functions.h — CUDA's math for the CPU build: the intrinsics (the fast __expf
// family as their libm functions, the _rn/_rz/_rd/_ru arithmetic and conversions under that
// rounding mode, the bit casts, the integer intrinsics), the functions only CUDA has (sinpif,
// erfinv, normcdf, ...), CUDA's min and max, and its C++ overloads of the math functions. Not
// bit-exact with a GPU's fast intrinsics or FMA contraction (the last bits may differ: compare
// with tolerances). The 16-bit float math is half.h's.
// Part of cuda_cpu_runtime.h, which includes the parts in order: never included on its own.
#pragma once

#include <cfenv>
#include <climits>
#include <limits>

// ---------------------------------------------------------------------------------------------
// Intrinsics: the fast ones as their libm functions (a GPU's __expf and its FMA contraction differ
// in the last bits), the _rn ones as C's operators

inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanhf(float x) { return tanhf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
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

// ---------------------------------------------------------------------------------------------
// Functions only CUDA has

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
inline float __int2float_rn(int i) { return (float)i; }
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
// float -> int to nearest and toward zero: plain conversions, not saturated like the rest.
inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
inline int __float2int_rz(float x) { return (int)x; }
inline int __float2int_rd(float x) { return andrea::to_int<int, float>(x, [](float v) { return floorf(v); }); }
inline int __float2int_ru(float x) { return andrea::to_int<int, float>(x, [](float v) { return ceilf(v); }); }

// ---------------------------------------------------------------------------------------------
// Bit casts

inline int __float_as_int(float x) { int i; std::memcpy(&i, &x, 4); return i; }
inline float __int_as_float(int i) { float x; std::memcpy(&x, &i, 4); return x; }
inline unsigned __float_as_uint(float x) { unsigned i; std::memcpy(&i, &x, 4); return i; }
inline float __uint_as_float(unsigned i) { float x; std::memcpy(&x, &i, 4); return x; }
inline long long __double_as_longlong(double x) { long long i; std::memcpy(&i, &x, 8); return i; }
inline double __longlong_as_double(long long i) { double x; std::memcpy(&x, &i, 8); return x; }
inline int __double2hiint(double x) { return (int)(__double_as_longlong(x) >> 32); }
inline int __double2loint(double x) { return (int)__double_as_longlong(x); }
inline double __hiloint2double(int hi, int lo) {
    return __longlong_as_double((long long)(((unsigned long long)(unsigned)hi << 32) | (unsigned)lo));
}

// ---------------------------------------------------------------------------------------------
// Integer intrinsics

inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
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
// min and max

// CUDA's min/max are overloaded for every arithmetic type; mixed types take the common type.
template <class A, class B, class = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
inline std::common_type_t<A, B> min(A a, B b) { return b < a ? b : a; }
template <class A, class B, class = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
inline std::common_type_t<A, B> max(A a, B b) { return a < b ? b : a; }
// CUDA's integer min and max of unsigned and 64-bit values.
inline unsigned umin(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned umax(unsigned a, unsigned b) { return a < b ? b : a; }
inline long long llmin(long long a, long long b) { return a < b ? a : b; }
inline long long llmax(long long a, long long b) { return a < b ? b : a; }
inline unsigned long long ullmin(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long ullmax(unsigned long long a, unsigned long long b) { return a < b ? b : a; }

// ---------------------------------------------------------------------------------------------
// CUDA's C++ overloads of the math functions. In CUDA, exp(x) of a float x is expf(x), a float,
// whether or not the file includes <math.h>; plain C++ gives the C function of a double (8 bytes,
// and a different last bit). The standard set is <cmath>'s float overloads brought into the global
// namespace, function by function as CUDA has them (not libstdc++'s whole <math.h>: its C++20
// std::lerp would clash with a kernel file's own lerp, as llm.c's adamw has); the functions only
// CUDA has get their float overloads here, with the double ones and f-variants the C library
// lacks. pow(float, int) is a float, as in CUDA.

using std::abs, std::acos, std::acosh, std::asin, std::asinh, std::atan, std::atan2, std::atanh, std::cbrt,
    std::ceil, std::copysign, std::cos, std::cosh, std::erf, std::erfc, std::exp, std::exp2, std::expm1,
    std::fabs, std::fdim, std::floor, std::fma, std::fmax, std::fmin, std::fmod, std::frexp, std::hypot,
    std::ilogb, std::ldexp, std::lgamma, std::llrint, std::llround, std::log, std::log10, std::log1p,
    std::log2, std::logb, std::lrint, std::lround, std::modf, std::nearbyint, std::nextafter, std::pow,
    std::remainder, std::remquo, std::rint, std::round, std::scalbln, std::scalbn, std::sin, std::sinh,
    std::sqrt, std::tan, std::tanh, std::tgamma, std::trunc, std::isfinite, std::isinf, std::isnan, std::signbit;

inline float pow(float base, int exponent) { return powf(base, (float)exponent); }
inline float rsqrt(float x) { return rsqrtf(x); }
inline double rcbrt(double x) { return 1.0 / cbrt(x); }
inline float rcbrt(float x) { return rcbrtf(x); }
inline float sinpi(float x) { return sinpif(x); }
inline float cospi(float x) { return cospif(x); }
inline void sincos(float x, float* s, float* c) { sincosf(x, s, c); }
inline void sincospi(double x, double* s, double* c) { *s = sinpi(x); *c = cospi(x); }
inline void sincospi(float x, float* s, float* c) { sincospif(x, s, c); }
inline float exp10(float x) { return exp10f(x); }
inline float erfinv(float y) { return erfinvf(y); }
inline float erfcinv(float y) { return erfcinvf(y); }
inline float normcdf(float x) { return normcdff(x); }
inline double normcdfinv(double p) { return -M_SQRT2 * erfcinv(2.0 * p); }
inline float normcdfinvf(float p) { return (float)normcdfinv((double)p); }
inline float normcdfinv(float p) { return normcdfinvf(p); }
// erfcx(x) = exp(x^2) erfc(x): directly while exp(x^2) stays finite, then its asymptotic series
// (relative error below 1e-17 past x = 26).
inline double erfcx(double x) {
    if (x < 26.0) return exp(x * x) * erfc(x);
    const double r = 1.0 / (x * x);
    return (1.0 - 0.5 * r * (1.0 - 1.5 * r * (1.0 - 2.5 * r))) / (x * 1.7724538509055160273);
}
inline float erfcxf(float x) { return (float)erfcx((double)x); }
inline float erfcx(float x) { return erfcxf(x); }
inline double rhypot(double x, double y) { return 1.0 / hypot(x, y); }
inline float rhypot(float x, float y) { return rhypotf(x, y); }
inline double norm3d(double a, double b, double c) { return hypot(hypot(a, b), c); }
inline float norm3d(float a, float b, float c) { return norm3df(a, b, c); }
inline double rnorm3d(double a, double b, double c) { return 1.0 / norm3d(a, b, c); }
inline float rnorm3d(float a, float b, float c) { return rnorm3df(a, b, c); }
inline double norm4d(double a, double b, double c, double d) { return hypot(hypot(a, b), hypot(c, d)); }
inline float norm4df(float a, float b, float c, float d) { return (float)norm4d(a, b, c, d); }
inline float norm4d(float a, float b, float c, float d) { return norm4df(a, b, c, d); }
inline double rnorm4d(double a, double b, double c, double d) { return 1.0 / norm4d(a, b, c, d); }
inline float rnorm4df(float a, float b, float c, float d) { return 1.0f / norm4df(a, b, c, d); }
inline float rnorm4d(float a, float b, float c, float d) { return rnorm4df(a, b, c, d); }
