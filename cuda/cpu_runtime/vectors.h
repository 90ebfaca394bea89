// cpu_runtime/vectors.h — CUDA's vector types (char1 .. double4, every element type and width, and
// dim3) with their GPU alignments and make_* constructors. Only the members and alignments CUDA defines: no
// arithmetic operators (CUDA has none either).
// Part of cuda_cpu_runtime.h, which includes the parts in order: never included on its own.
#pragma once

// ---------------------------------------------------------------------------------------------
// Vector types (CUDA's alignments: float4/int4 are 16-byte aligned, float2/int2 8)

struct __attribute__((aligned(8))) float2 { float x, y; };
struct float3 { float x, y, z; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
struct __attribute__((aligned(8))) int2 { int x, y; };
struct int3 { int x, y, z; };
struct __attribute__((aligned(16))) int4 { int x, y, z, w; };
struct __attribute__((aligned(16))) double2 { double x, y; };
struct uint3 { unsigned int x, y, z; };
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};

inline float2 make_float2(float x, float y) { return float2{x, y}; }
inline float3 make_float3(float x, float y, float z) { return float3{x, y, z}; }
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
inline int2 make_int2(int x, int y) { return int2{x, y}; }
inline int3 make_int3(int x, int y, int z) { return int3{x, y, z}; }
inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }
inline double2 make_double2(double x, double y) { return double2{x, y}; }
inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return uint3{x, y, z}; }

// The rest of vector_types.h, declared by one macro per element type: name, element, and the
// alignments of the 2- and 4-wide forms (the 1- and 3-wide ones take the element's own).
#define ANDREA_VECTOR_1(N, T)                                                                  \
    struct N##1 { T x; };                                                                         \
    inline N##1 make_##N##1(T x) { return N##1{x}; }
#define ANDREA_VECTOR_3(N, T)                                                                    \
    struct N##3 { T x, y, z; };                                                                   \
    inline N##3 make_##N##3(T x, T y, T z) { return N##3{x, y, z}; }
#define ANDREA_VECTOR_2(N, T, A2)                                                                \
    struct __attribute__((aligned(A2))) N##2 { T x, y; };                                         \
    inline N##2 make_##N##2(T x, T y) { return N##2{x, y}; }
#define ANDREA_VECTOR_4(N, T, A4)                                                                \
    struct __attribute__((aligned(A4))) N##4 { T x, y, z, w; };                                   \
    inline N##4 make_##N##4(T x, T y, T z, T w) { return N##4{x, y, z, w}; }
#define ANDREA_VECTORS(N, T, A2, A4) ANDREA_VECTOR_1(N, T) ANDREA_VECTOR_2(N, T, A2) ANDREA_VECTOR_3(N, T) \
    ANDREA_VECTOR_4(N, T, A4)
ANDREA_VECTORS(char, signed char, 2, 4)
ANDREA_VECTORS(uchar, unsigned char, 2, 4)
ANDREA_VECTORS(short, short, 4, 8)
ANDREA_VECTORS(ushort, unsigned short, 4, 8)
ANDREA_VECTORS(long, long, 16, 16)
ANDREA_VECTORS(ulong, unsigned long, 16, 16)
ANDREA_VECTORS(longlong, long long, 16, 16)
ANDREA_VECTORS(ulonglong, unsigned long long, 16, 16)
ANDREA_VECTOR_1(int, int)
ANDREA_VECTOR_1(uint, unsigned int)
ANDREA_VECTOR_2(uint, unsigned int, 8)
ANDREA_VECTOR_4(uint, unsigned int, 16)
ANDREA_VECTOR_1(float, float)
ANDREA_VECTOR_1(double, double)
ANDREA_VECTOR_3(double, double)
ANDREA_VECTOR_4(double, double, 16)
#undef ANDREA_VECTORS
#undef ANDREA_VECTOR_1
#undef ANDREA_VECTOR_2
#undef ANDREA_VECTOR_3
#undef ANDREA_VECTOR_4
