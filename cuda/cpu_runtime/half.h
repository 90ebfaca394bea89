// cpu_runtime/half.h — __half, __half2, __nv_bfloat16 and __nv_bfloat162 for the CPU build, with
// the conversions and arithmetic of cuda_fp16.h and cuda_bf16.h (included by both stubs).
//
// Bit-exact where a GPU is exact: conversions round to nearest even (or as the _rz/_rd/_ru name
// says), NaN becomes the canonical 0x7fff as CUDA's conversions give it. Arithmetic is done in
// float and rounded once: for + - * / and sqrt that equals the correctly rounded 16-bit result
// (float has 24 bits >= 2 * 11 + 2, so rounding twice never differs); fma goes through double.
// The transcendental h* functions (hexp, hlog, ...) are approximate on a GPU: here they are the
// float function rounded to 16 bits.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace andrea {
enum Rounding { RN, RZ, RD, RU };

inline uint32_t f32_bits(float f) { uint32_t b; std::memcpy(&b, &f, 4); return b; }
inline float bits_f32(uint32_t b) { float f; std::memcpy(&f, &b, 4); return f; }

// Round the magnitude r (with rem of `half`*2 discarded, half the tie point) as mode says.
inline uint32_t round_bits(uint32_t r, uint32_t rem, uint32_t half, bool negative, int mode) {
    switch (mode) {
    case RN: return r + (rem > half || (rem == half && (r & 1)));
    case RD: return r + (negative && rem);
    case RU: return r + (!negative && rem);
    default: return r;
    }
}

inline uint16_t float_to_half_bits(float f, int mode = RN) {
    const uint32_t x = f32_bits(f), sign = x >> 16 & 0x8000, a = x & 0x7fffffff;
    if (a > 0x7f800000) return 0x7fff;
    if (a == 0x7f800000) return (uint16_t)(sign | 0x7c00);
    uint32_t r, rem, half;
    if (a >= 0x38800000) {          // a normal half (or beyond): rebias the exponent, drop 13 bits
        const uint32_t shifted = a - (112u << 23);
        r = shifted >> 13, rem = shifted & 0x1fff, half = 0x1000;
        if (r >= 0x7c00) {          // past the largest finite half before any rounding
            const bool to_inf = mode == RN || (mode == RU && !sign) || (mode == RD && sign);
            return (uint16_t)(sign | (to_inf ? 0x7c00 : 0x7bff));
        }
    } else if (a < 0x33000000) {    // below 2^-25: zero, or the smallest subnormal if rounding away
        r = 0, rem = a != 0, half = 2;
    } else {                        // a subnormal half: units of 2^-24
        const int shift = 126 - (int)(a >> 23);  // 14..24
        const uint32_t m = (a & 0x7fffff) | 0x800000;
        r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    }
    return (uint16_t)(sign | round_bits(r, rem, half, sign != 0, mode));  // a carry reaches inf correctly
}

inline float half_bits_to_float(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = h >> 10 & 0x1f, m = h & 0x3ff;
    if (e == 31) return bits_f32(sign | 0x7f800000 | m << 13);
    if (e == 0) {
        const float v = (float)m * 5.9604644775390625e-8f;  // m * 2^-24, exact
        return sign ? -v : v;
    }
    return bits_f32(sign | (e + 112) << 23 | m << 13);
}

inline uint16_t float_to_bf16_bits(float f, int mode = RN) {
    const uint32_t x = f32_bits(f), a = x & 0x7fffffff;
    if (a > 0x7f800000) return 0x7fff;
    return (uint16_t)((x & 0x80000000u) >> 16 | round_bits(a >> 16, a & 0xffff, 0x8000, x >> 31, mode));
}
inline float bf16_bits_to_float(uint16_t b) { return bits_f32((uint32_t)b << 16); }

// double -> float rounded to odd: rounding that again to 16 bits (<= 22 bits) is the correctly
// rounded double -> 16-bit result, which rounding through a nearest float is not.
inline float double_to_float_odd(double d) {
    const float f = (float)d;
    if ((double)f == d || d != d) return f;
    uint32_t b = f32_bits(f);
    if (__builtin_fabs((double)f) > __builtin_fabs(d)) b -= 1;  // truncate toward zero
    return bits_f32(b | 1);
}
}  // namespace andrea

struct __half_raw { unsigned short x; };
struct __nv_bfloat16_raw { unsigned short x; };

// One shape for both formats: 16 bits of storage, built from any number (rounded to nearest
// even), read back as float. Trivial default constructor, so arrays of it can be __shared__.
#define ANDREA_NARROW_TYPE(T, RAW, TO_BITS, FROM_BITS)                                            \
    struct __align__(2) T {                                                                         \
        unsigned short __x;                                                                         \
        T() = default;                                                                              \
        constexpr T(RAW r) : __x(r.x) {}                                                            \
        T(float f) : __x(andrea::TO_BITS(f)) {}                                                     \
        T(double d) : __x(andrea::TO_BITS(andrea::double_to_float_odd(d))) {}                       \
        template <class I, class = std::enable_if_t<std::is_integral_v<I>>>                        \
        T(I i) : __x(andrea::TO_BITS(andrea::double_to_float_odd((double)i))) {}                    \
        operator float() const { return andrea::FROM_BITS(__x); }                                   \
        operator RAW() const { return RAW{__x}; }                                                   \
        T& operator=(float f) { return *this = T(f); }                                              \
        T& operator=(double d) { return *this = T(d); }                                             \
    };
ANDREA_NARROW_TYPE(__half, __half_raw, float_to_half_bits, half_bits_to_float)
ANDREA_NARROW_TYPE(__nv_bfloat16, __nv_bfloat16_raw, float_to_bf16_bits, bf16_bits_to_float)
#undef ANDREA_NARROW_TYPE

struct __align__(4) __half2 { __half x, y; };
struct __align__(4) __nv_bfloat162 { __nv_bfloat16 x, y; };
struct __half2_raw { unsigned short x, y; };
struct __nv_bfloat162_raw { unsigned short x, y; };
typedef __half half;
typedef __half2 half2;
typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;

namespace andrea {
template <class T> inline constexpr bool is_narrow = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;
template <class T> inline constexpr bool is_narrow2 = std::is_same_v<T, __half2> || std::is_same_v<T, __nv_bfloat162>;
template <class T> using narrow_t = std::enable_if_t<is_narrow<T>, T>;
template <class T> using narrow2_t = std::enable_if_t<is_narrow2<T>, T>;
template <class T, class R> using if_narrow = std::enable_if_t<is_narrow<T>, R>;
template <class T, class R> using if_narrow2 = std::enable_if_t<is_narrow2<T>, R>;
template <class T2> using lane_t = decltype(T2::x);
}  // namespace andrea

// ---------------------------------------------------------------------------------------------
// Conversions

inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline __half __float2half_rz(float f) { return __half_raw{andrea::float_to_half_bits(f, andrea::RZ)}; }
inline __half __float2half_rd(float f) { return __half_raw{andrea::float_to_half_bits(f, andrea::RD)}; }
inline __half __float2half_ru(float f) { return __half_raw{andrea::float_to_half_bits(f, andrea::RU)}; }
inline float __half2float(__half h) { return h; }
inline __half __double2half(double d) { return __half(d); }
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rz(float f) { return __nv_bfloat16_raw{andrea::float_to_bf16_bits(f, andrea::RZ)}; }
inline __nv_bfloat16 __float2bfloat16_rd(float f) { return __nv_bfloat16_raw{andrea::float_to_bf16_bits(f, andrea::RD)}; }
inline __nv_bfloat16 __float2bfloat16_ru(float f) { return __nv_bfloat16_raw{andrea::float_to_bf16_bits(f, andrea::RU)}; }
inline float __bfloat162float(__nv_bfloat16 b) { return b; }
inline __nv_bfloat16 __double2bfloat16(double d) { return __nv_bfloat16(d); }

inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline short __half_as_short(__half h) { return (short)h.__x; }
inline __half __ushort_as_half(unsigned short u) { return __half_raw{u}; }
inline __half __short_as_half(short s) { return __half_raw{(unsigned short)s}; }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
inline short __bfloat16_as_short(__nv_bfloat16 h) { return (short)h.__x; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { return __nv_bfloat16_raw{u}; }
inline __nv_bfloat16 __short_as_bfloat16(short s) { return __nv_bfloat16_raw{(unsigned short)s}; }

// Integers <-> 16-bit floats: from an integer through double (exact), to one with CUDA's
// saturating float->integer conversions (math_functions.h).
#define ANDREA_INT_CONVERSIONS(P, T, I, NAME)                                                       \
    inline I __##P##2##NAME##_rn(T h) { return __float2##NAME##_rn((float)h); }                     \
    inline I __##P##2##NAME##_rz(T h) { return __float2##NAME##_rz((float)h); }                     \
    inline I __##P##2##NAME##_rd(T h) { return __float2##NAME##_rd((float)h); }                     \
    inline I __##P##2##NAME##_ru(T h) { return __float2##NAME##_ru((float)h); }                     \
    inline T __##NAME##2##P##_rn(I i) { return T((double)i); }
#define ANDREA_INT_CONVERSIONS_ALL(P, T)                                                            \
    ANDREA_INT_CONVERSIONS(P, T, int, int) ANDREA_INT_CONVERSIONS(P, T, unsigned, uint)             \
    ANDREA_INT_CONVERSIONS(P, T, long long, ll) ANDREA_INT_CONVERSIONS(P, T, unsigned long long, ull) \
    ANDREA_INT_CONVERSIONS(P, T, short, short) ANDREA_INT_CONVERSIONS(P, T, unsigned short, ushort)
inline short __float2short_rn(float f) { return (short)std::clamp(__float2int_rn(f), -32768, 32767); }
inline short __float2short_rz(float f) { return (short)std::clamp(__float2int_rz(f), -32768, 32767); }
inline short __float2short_rd(float f) { return (short)std::clamp(__float2int_rd(f), -32768, 32767); }
inline short __float2short_ru(float f) { return (short)std::clamp(__float2int_ru(f), -32768, 32767); }
inline unsigned short __float2ushort_rn(float f) { return (unsigned short)std::min(__float2uint_rn(f), 65535u); }
inline unsigned short __float2ushort_rz(float f) { return (unsigned short)std::min(__float2uint_rz(f), 65535u); }
inline unsigned short __float2ushort_rd(float f) { return (unsigned short)std::min(__float2uint_rd(f), 65535u); }
inline unsigned short __float2ushort_ru(float f) { return (unsigned short)std::min(__float2uint_ru(f), 65535u); }
ANDREA_INT_CONVERSIONS_ALL(half, __half)
ANDREA_INT_CONVERSIONS_ALL(bfloat16, __nv_bfloat16)
#undef ANDREA_INT_CONVERSIONS_ALL
#undef ANDREA_INT_CONVERSIONS

// Pairs: x is the low half of the 32-bit word, y the high half.
inline __half2 make_half2(__half x, __half y) { return __half2{x, y}; }
inline __half2 __halves2half2(__half lo, __half hi) { return __half2{lo, hi}; }
inline __half2 __half2half2(__half h) { return __half2{h, h}; }
inline __half2 __float2half2_rn(float f) { return __half2{__half(f), __half(f)}; }
inline __half2 __floats2half2_rn(float lo, float hi) { return __half2{__half(lo), __half(hi)}; }
inline __half2 __float22half2_rn(float2 f) { return __half2{__half(f.x), __half(f.y)}; }
inline float2 __half22float2(__half2 h) { return float2{h.x, h.y}; }
inline __nv_bfloat162 make_bfloat162(__nv_bfloat16 x, __nv_bfloat16 y) { return __nv_bfloat162{x, y}; }
inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 lo, __nv_bfloat16 hi) { return __nv_bfloat162{lo, hi}; }
inline __nv_bfloat162 __bfloat162bfloat162(__nv_bfloat16 h) { return __nv_bfloat162{h, h}; }
inline __nv_bfloat162 __float2bfloat162_rn(float f) { return __nv_bfloat162{__nv_bfloat16(f), __nv_bfloat16(f)}; }
inline __nv_bfloat162 __floats2bfloat162_rn(float lo, float hi) { return __nv_bfloat162{__nv_bfloat16(lo), __nv_bfloat16(hi)}; }
inline __nv_bfloat162 __float22bfloat162_rn(float2 f) { return __nv_bfloat162{__nv_bfloat16(f.x), __nv_bfloat16(f.y)}; }
inline float2 __bfloat1622float2(__nv_bfloat162 h) { return float2{h.x, h.y}; }
inline __half __low2half(__half2 h) { return h.x; }
inline __half __high2half(__half2 h) { return h.y; }
inline float __low2float(__half2 h) { return h.x; }
inline float __high2float(__half2 h) { return h.y; }
inline __half2 __low2half2(__half2 h) { return __half2{h.x, h.x}; }
inline __half2 __high2half2(__half2 h) { return __half2{h.y, h.y}; }
inline __half2 __lows2half2(__half2 a, __half2 b) { return __half2{a.x, b.x}; }
inline __half2 __highs2half2(__half2 a, __half2 b) { return __half2{a.y, b.y}; }
inline __half2 __lowhigh2highlow(__half2 h) { return __half2{h.y, h.x}; }
inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 h) { return h.x; }
inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 h) { return h.y; }
inline float __low2float(__nv_bfloat162 h) { return h.x; }
inline float __high2float(__nv_bfloat162 h) { return h.y; }
inline __nv_bfloat162 __low2bfloat162(__nv_bfloat162 h) { return __nv_bfloat162{h.x, h.x}; }
inline __nv_bfloat162 __high2bfloat162(__nv_bfloat162 h) { return __nv_bfloat162{h.y, h.y}; }
inline __nv_bfloat162 __lows2bfloat162(__nv_bfloat162 a, __nv_bfloat162 b) { return __nv_bfloat162{a.x, b.x}; }
inline __nv_bfloat162 __highs2bfloat162(__nv_bfloat162 a, __nv_bfloat162 b) { return __nv_bfloat162{a.y, b.y}; }
inline __nv_bfloat162 __lowhigh2highlow(__nv_bfloat162 h) { return __nv_bfloat162{h.y, h.x}; }

// ---------------------------------------------------------------------------------------------
// Arithmetic, for both formats (T is __half or __nv_bfloat16, T2 the pair)

template <class T> inline andrea::narrow_t<T> __hadd(T a, T b) { return T((float)a + (float)b); }
template <class T> inline andrea::narrow_t<T> __hsub(T a, T b) { return T((float)a - (float)b); }
template <class T> inline andrea::narrow_t<T> __hmul(T a, T b) { return T((float)a * (float)b); }
template <class T> inline andrea::narrow_t<T> __hdiv(T a, T b) { return T((float)a / (float)b); }
template <class T> inline andrea::narrow_t<T> __hfma(T a, T b, T c) { return T((double)(float)a * (float)b + (float)c); }
template <class T> inline andrea::narrow_t<T> __hneg(T a) { T r = a; r.__x ^= 0x8000; return r; }
template <class T> inline andrea::narrow_t<T> __habs(T a) { T r = a; r.__x &= 0x7fff; return r; }
template <class T> inline andrea::narrow_t<T> __hadd_rn(T a, T b) { return __hadd(a, b); }
template <class T> inline andrea::narrow_t<T> __hsub_rn(T a, T b) { return __hsub(a, b); }
template <class T> inline andrea::narrow_t<T> __hmul_rn(T a, T b) { return __hmul(a, b); }
template <class T> inline andrea::narrow_t<T> __hfma_relu(T a, T b, T c) {
    const T r = __hfma(a, b, c);
    return (float)r < 0.0f ? T(0.0f) : r;
}
// _sat: clamped to [0, 1], NaN to 0
template <class T> inline andrea::narrow_t<T> andrea_sat(T r) {
    const float f = r;
    return !(f > 0.0f) ? T(0.0f) : (f > 1.0f ? T(1.0f) : r);
}
template <class T> inline andrea::narrow_t<T> __hadd_sat(T a, T b) { return andrea_sat(__hadd(a, b)); }
template <class T> inline andrea::narrow_t<T> __hsub_sat(T a, T b) { return andrea_sat(__hsub(a, b)); }
template <class T> inline andrea::narrow_t<T> __hmul_sat(T a, T b) { return andrea_sat(__hmul(a, b)); }
template <class T> inline andrea::narrow_t<T> __hfma_sat(T a, T b, T c) { return andrea_sat(__hfma(a, b, c)); }
// max/min: one NaN operand gives the other; the _nan variants give NaN; +0 counts above -0.
template <class T> inline andrea::narrow_t<T> __hmax(T a, T b) {
    const float x = a, y = b;
    if (x != x) return b;
    if (y != y || x > y || (x == y && !(a.__x & 0x8000))) return a;
    return b;
}
template <class T> inline andrea::narrow_t<T> __hmin(T a, T b) {
    const float x = a, y = b;
    if (x != x) return b;
    if (y != y || x < y || (x == y && (a.__x & 0x8000))) return a;
    return b;
}
template <class T> inline andrea::narrow_t<T> __hmax_nan(T a, T b) {
    return ((float)a != (float)a || (float)b != (float)b) ? T(NAN) : __hmax(a, b);
}
template <class T> inline andrea::narrow_t<T> __hmin_nan(T a, T b) {
    return ((float)a != (float)a || (float)b != (float)b) ? T(NAN) : __hmin(a, b);
}

template <class T> inline andrea::if_narrow<T, bool> __heq(T a, T b) { return (float)a == (float)b; }
template <class T> inline andrea::if_narrow<T, bool> __hne(T a, T b) { return (float)a < (float)b || (float)a > (float)b; }
template <class T> inline andrea::if_narrow<T, bool> __hlt(T a, T b) { return (float)a < (float)b; }
template <class T> inline andrea::if_narrow<T, bool> __hle(T a, T b) { return (float)a <= (float)b; }
template <class T> inline andrea::if_narrow<T, bool> __hgt(T a, T b) { return (float)a > (float)b; }
template <class T> inline andrea::if_narrow<T, bool> __hge(T a, T b) { return (float)a >= (float)b; }
template <class T> inline andrea::if_narrow<T, bool> __hequ(T a, T b) { return !((float)a < (float)b || (float)a > (float)b); }
template <class T> inline andrea::if_narrow<T, bool> __hneu(T a, T b) { return (float)a != (float)b; }
template <class T> inline andrea::if_narrow<T, bool> __hltu(T a, T b) { return !((float)a >= (float)b); }
template <class T> inline andrea::if_narrow<T, bool> __hleu(T a, T b) { return !((float)a > (float)b); }
template <class T> inline andrea::if_narrow<T, bool> __hgtu(T a, T b) { return !((float)a <= (float)b); }
template <class T> inline andrea::if_narrow<T, bool> __hgeu(T a, T b) { return !((float)a < (float)b); }
template <class T> inline andrea::if_narrow<T, bool> __hisnan(T a) { return (a.__x & 0x7fff) > (std::is_same_v<T, __half> ? 0x7c00 : 0x7f80); }
template <class T> inline andrea::if_narrow<T, int> __hisinf(T a) {
    const unsigned short inf = std::is_same_v<T, __half> ? 0x7c00 : 0x7f80;
    return (a.__x & 0x7fff) == inf ? (a.__x & 0x8000 ? -1 : 1) : 0;
}

// Functions: the float function of the value, rounded once.
#define ANDREA_NARROW_FN2(name, name2, expr)                                                        \
    template <class T> inline andrea::narrow_t<T> name(T a) { const float x = a; return T(expr); }  \
    template <class T2> inline andrea::narrow2_t<T2> name2(T2 a) { return T2{name(a.x), name(a.y)}; }
ANDREA_NARROW_FN2(hexp, h2exp, expf(x))
ANDREA_NARROW_FN2(hexp2, h2exp2, exp2f(x))
ANDREA_NARROW_FN2(hexp10, h2exp10, exp10f(x))
ANDREA_NARROW_FN2(hlog, h2log, logf(x))
ANDREA_NARROW_FN2(hlog2, h2log2, log2f(x))
ANDREA_NARROW_FN2(hlog10, h2log10, log10f(x))
ANDREA_NARROW_FN2(hsqrt, h2sqrt, sqrtf(x))
ANDREA_NARROW_FN2(hrsqrt, h2rsqrt, 1.0f / sqrtf(x))
ANDREA_NARROW_FN2(hrcp, h2rcp, 1.0f / x)
ANDREA_NARROW_FN2(hsin, h2sin, sinf(x))
ANDREA_NARROW_FN2(hcos, h2cos, cosf(x))
ANDREA_NARROW_FN2(htanh, h2tanh, tanhf(x))
ANDREA_NARROW_FN2(hceil, h2ceil, ceilf(x))
ANDREA_NARROW_FN2(hfloor, h2floor, floorf(x))
ANDREA_NARROW_FN2(htrunc, h2trunc, truncf(x))
ANDREA_NARROW_FN2(hrint, h2rint, nearbyintf(x))
#undef ANDREA_NARROW_FN2

// Pairs, lane by lane.
#define ANDREA_PAIR2(name, one)                                                                     \
    template <class T2> inline andrea::narrow2_t<T2> name(T2 a, T2 b) { return T2{one(a.x, b.x), one(a.y, b.y)}; }
ANDREA_PAIR2(__hadd2, __hadd)
ANDREA_PAIR2(__hsub2, __hsub)
ANDREA_PAIR2(__hmul2, __hmul)
ANDREA_PAIR2(__h2div, __hdiv)
ANDREA_PAIR2(__hadd2_sat, __hadd_sat)
ANDREA_PAIR2(__hsub2_sat, __hsub_sat)
ANDREA_PAIR2(__hmul2_sat, __hmul_sat)
ANDREA_PAIR2(__hmax2, __hmax)
ANDREA_PAIR2(__hmin2, __hmin)
ANDREA_PAIR2(__hmax2_nan, __hmax_nan)
ANDREA_PAIR2(__hmin2_nan, __hmin_nan)
#undef ANDREA_PAIR2
template <class T2> inline andrea::narrow2_t<T2> __hfma2(T2 a, T2 b, T2 c) { return T2{__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)}; }
template <class T2> inline andrea::narrow2_t<T2> __hfma2_sat(T2 a, T2 b, T2 c) { return T2{__hfma_sat(a.x, b.x, c.x), __hfma_sat(a.y, b.y, c.y)}; }
template <class T2> inline andrea::narrow2_t<T2> __hfma2_relu(T2 a, T2 b, T2 c) { return T2{__hfma_relu(a.x, b.x, c.x), __hfma_relu(a.y, b.y, c.y)}; }
template <class T2> inline andrea::narrow2_t<T2> __hneg2(T2 a) { return T2{__hneg(a.x), __hneg(a.y)}; }
template <class T2> inline andrea::narrow2_t<T2> __habs2(T2 a) { return T2{__habs(a.x), __habs(a.y)}; }
// Comparisons of pairs: 1.0 or 0.0 per lane (__heq2 ...), or true when both lanes hold (__hbeq2 ...).
#define ANDREA_CMP2(name, bname, one)                                                               \
    template <class T2> inline andrea::narrow2_t<T2> name(T2 a, T2 b) {                             \
        using T = andrea::lane_t<T2>;                                                                \
        return T2{T(one(a.x, b.x) ? 1.0f : 0.0f), T(one(a.y, b.y) ? 1.0f : 0.0f)};                  \
    }                                                                                               \
    template <class T2> inline andrea::if_narrow2<T2, bool> bname(T2 a, T2 b) { return one(a.x, b.x) && one(a.y, b.y); }
ANDREA_CMP2(__heq2, __hbeq2, __heq)
ANDREA_CMP2(__hne2, __hbne2, __hne)
ANDREA_CMP2(__hlt2, __hblt2, __hlt)
ANDREA_CMP2(__hle2, __hble2, __hle)
ANDREA_CMP2(__hgt2, __hbgt2, __hgt)
ANDREA_CMP2(__hge2, __hbge2, __hge)
#undef ANDREA_CMP2
template <class T2> inline andrea::narrow2_t<T2> __hisnan2(T2 a) {
    using T = andrea::lane_t<T2>;
    return T2{T(__hisnan(a.x) ? 1.0f : 0.0f), T(__hisnan(a.y) ? 1.0f : 0.0f)};
}

// Operators, as cuda_fp16.hpp / cuda_bf16.hpp define them (both operands the same type).
template <class T> inline andrea::narrow_t<T> operator+(T a, T b) { return __hadd(a, b); }
template <class T> inline andrea::narrow_t<T> operator-(T a, T b) { return __hsub(a, b); }
template <class T> inline andrea::narrow_t<T> operator*(T a, T b) { return __hmul(a, b); }
template <class T> inline andrea::narrow_t<T> operator/(T a, T b) { return __hdiv(a, b); }
template <class T> inline andrea::narrow_t<T> operator-(T a) { return __hneg(a); }
template <class T> inline andrea::narrow_t<T> operator+(T a) { return a; }
template <class T> inline andrea::narrow_t<T>& operator+=(T& a, T b) { return a = __hadd(a, b); }
template <class T> inline andrea::narrow_t<T>& operator-=(T& a, T b) { return a = __hsub(a, b); }
template <class T> inline andrea::narrow_t<T>& operator*=(T& a, T b) { return a = __hmul(a, b); }
template <class T> inline andrea::narrow_t<T>& operator/=(T& a, T b) { return a = __hdiv(a, b); }
template <class T> inline andrea::narrow_t<T>& operator++(T& a) { return a = __hadd(a, T(1.0f)); }
template <class T> inline andrea::narrow_t<T>& operator--(T& a) { return a = __hsub(a, T(1.0f)); }
template <class T> inline andrea::if_narrow<T, bool> operator==(T a, T b) { return __heq(a, b); }
template <class T> inline andrea::if_narrow<T, bool> operator!=(T a, T b) { return __hneu(a, b); }
template <class T> inline andrea::if_narrow<T, bool> operator<(T a, T b) { return __hlt(a, b); }
template <class T> inline andrea::if_narrow<T, bool> operator<=(T a, T b) { return __hle(a, b); }
template <class T> inline andrea::if_narrow<T, bool> operator>(T a, T b) { return __hgt(a, b); }
template <class T> inline andrea::if_narrow<T, bool> operator>=(T a, T b) { return __hge(a, b); }
template <class T2> inline andrea::narrow2_t<T2> operator+(T2 a, T2 b) { return __hadd2(a, b); }
template <class T2> inline andrea::narrow2_t<T2> operator-(T2 a, T2 b) { return __hsub2(a, b); }
template <class T2> inline andrea::narrow2_t<T2> operator*(T2 a, T2 b) { return __hmul2(a, b); }
template <class T2> inline andrea::narrow2_t<T2> operator/(T2 a, T2 b) { return __h2div(a, b); }
template <class T2> inline andrea::narrow2_t<T2> operator-(T2 a) { return __hneg2(a); }
template <class T2> inline andrea::narrow2_t<T2>& operator+=(T2& a, T2 b) { return a = __hadd2(a, b); }
template <class T2> inline andrea::narrow2_t<T2>& operator-=(T2& a, T2 b) { return a = __hsub2(a, b); }
template <class T2> inline andrea::narrow2_t<T2>& operator*=(T2& a, T2 b) { return a = __hmul2(a, b); }
template <class T2> inline andrea::narrow2_t<T2>& operator/=(T2& a, T2 b) { return a = __h2div(a, b); }
template <class T2> inline andrea::if_narrow2<T2, bool> operator==(T2 a, T2 b) { return __hbeq2(a, b); }
template <class T2> inline andrea::if_narrow2<T2, bool> operator!=(T2 a, T2 b) { return !__hbeq2(a, b); }

#define CUDART_INF_FP16 __ushort_as_half((unsigned short)0x7C00U)
#define CUDART_NAN_FP16 __ushort_as_half((unsigned short)0x7FFFU)
#define CUDART_MIN_DENORM_FP16 __ushort_as_half((unsigned short)0x0001U)
#define CUDART_MAX_NORMAL_FP16 __ushort_as_half((unsigned short)0x7BFFU)
#define CUDART_NEG_ZERO_FP16 __ushort_as_half((unsigned short)0x8000U)
#define CUDART_ZERO_FP16 __ushort_as_half((unsigned short)0x0000U)
#define CUDART_ONE_FP16 __ushort_as_half((unsigned short)0x3C00U)
#define CUDART_INF_BF16 __ushort_as_bfloat16((unsigned short)0x7F80U)
#define CUDART_NAN_BF16 __ushort_as_bfloat16((unsigned short)0x7FFFU)
#define CUDART_MIN_DENORM_BF16 __ushort_as_bfloat16((unsigned short)0x0001U)
#define CUDART_MAX_NORMAL_BF16 __ushort_as_bfloat16((unsigned short)0x7F7FU)
#define CUDART_NEG_ZERO_BF16 __ushort_as_bfloat16((unsigned short)0x8000U)
#define CUDART_ZERO_BF16 __ushort_as_bfloat16((unsigned short)0x0000U)
#define CUDART_ONE_BF16 __ushort_as_bfloat16((unsigned short)0x3F80U)

// The atomics on these types are atomics.h's, whose second part needs them.
#define ANDREA_HALF_TYPES 1
#include "atomics.h"
