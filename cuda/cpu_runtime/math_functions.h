// cpu_runtime/math_functions.h — CUDA's C++ overloads of its math functions. In CUDA, exp(x) of
// a float x is expf(x), a float, whether or not the file includes <math.h>; plain C++ gives the C
// function of a double (8 bytes, and a different last bit). The standard set is <cmath>'s float
// overloads brought into the global namespace, function by function as CUDA has them (not
// libstdc++'s whole <math.h>: its C++20 std::lerp would clash with a kernel file's own lerp, as
// llm.c's adamw has); the functions only CUDA has get their float overloads here, with the
// double ones and f-variants the C library lacks. pow(float, int) is a float, as in CUDA.
// Part of cuda_cpu_runtime.h, which includes the parts in order: never included on its own.
#pragma once

using std::abs, std::acos, std::acosh, std::asin, std::asinh, std::atan, std::atan2, std::atanh, std::cbrt,
    std::ceil, std::copysign, std::cos, std::cosh, std::erf, std::erfc, std::exp, std::exp2, std::expm1,
    std::fabs, std::fdim, std::floor, std::fma, std::fmax, std::fmin, std::fmod, std::frexp, std::hypot,
    std::ilogb, std::ldexp, std::lgamma, std::llrint, std::llround, std::log, std::log10, std::log1p,
    std::log2, std::logb, std::lrint, std::lround, std::modf, std::nearbyint, std::nextafter, std::pow,
    std::remainder, std::remquo, std::rint, std::round, std::scalbln, std::scalbn, std::sin, std::sinh,
    std::sqrt, std::tan, std::tanh, std::tgamma, std::trunc, std::isfinite, std::isnan, std::signbit;

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

// CUDA's integer min and max of unsigned and 64-bit values.
inline unsigned umin(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned umax(unsigned a, unsigned b) { return a < b ? b : a; }
inline long long llmin(long long a, long long b) { return a < b ? a : b; }
inline long long llmax(long long a, long long b) { return a < b ? b : a; }
inline unsigned long long ullmin(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long ullmax(unsigned long long a, unsigned long long b) { return a < b ? b : a; }
