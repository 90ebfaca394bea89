// CUDA's device surface on the CPU build, one feature per kernel
// (tests/backends/cpu_runtime/test_surface.py): the bugs issue 13 found, 16-bit floats, cooperative groups, atomics, votes, intrinsics.
#include <cassert>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda/std/limits>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace cg = cooperative_groups;

// --- the bugs ---------------------------------------------------------------------------------

// cuda-samples' SharedMemory<T>: `extern __shared__` declared inside a template's member.
template <class T> struct SharedMemory {
    __device__ T* get() {
        extern __shared__ int smem_raw[];
        return reinterpret_cast<T*>(smem_raw);
    }
};
template <class T> __device__ T rotate_through_shared(T v) {
    T* s = SharedMemory<T>().get();
    s[threadIdx.x] = v;
    __syncthreads();
    return s[(threadIdx.x + 1) % blockDim.x];
}
extern "C" __global__ void shared_in_template(float* out) {
    out[threadIdx.x] = rotate_through_shared<float>((float)threadIdx.x);
}

// A template kernel: launched through a name expression ("scale_by<float, 3>").
template <class T, int K> __global__ void scale_by(const T* in, T* out, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * (T)K;
}

// Atomics with the value argument of another type, as real code writes them.
extern "C" __global__ void atomics_convert(unsigned* count, float* sum, double* dsum) {
    atomicAdd(count, 1);
    atomicAdd(sum, 1.0);
    atomicAdd(dsum, 1);
}

// Width-limited butterfly: lanes of a later group of 8 read the earlier group.
extern "C" __global__ void xor_width(int* out, int lane_mask, int width) {
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 100 + (int)threadIdx.x, lane_mask, width);
}

extern "C" __global__ void device_assert(const float* x, float* out) {
    assert(x[threadIdx.x] >= 0.0f);
    out[threadIdx.x] = sqrtf(x[threadIdx.x]);
}

// Lanes 0-15 shuffle among themselves but read lane 16 (alive, at the barrier): undefined.
extern "C" __global__ void reads_live_lane_outside_mask(int* out, int lane_mask) {
    if (threadIdx.x < 16) out[threadIdx.x] = __shfl_xor_sync(0x0000ffffu, (int)threadIdx.x, lane_mask);
    __syncthreads();
}

extern "C" __global__ void fast_exp10(float* out) { out[threadIdx.x] = __exp10f((float)threadIdx.x / 8.0f); }

// An optional pointer: NULL means "no bias".
extern "C" __global__ void optional_bias(float* out, const float* bias) {
    out[threadIdx.x] = 2.0f * threadIdx.x + (bias ? bias[threadIdx.x] : 0.0f);
}

// --- 16-bit floats ----------------------------------------------------------------------------

// Each float32 x[i] to half and bf16 bits, four roundings each; each double to both.
extern "C" __global__ void narrow_conversions(const float* x, const double* d, unsigned short* out, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        unsigned short* o = out + 10 * i;
        o[0] = __half_as_ushort(__float2half_rn(x[i]));
        o[1] = __half_as_ushort(__float2half_rz(x[i]));
        o[2] = __half_as_ushort(__float2half_rd(x[i]));
        o[3] = __half_as_ushort(__float2half_ru(x[i]));
        o[4] = __bfloat16_as_ushort(__float2bfloat16_rn(x[i]));
        o[5] = __bfloat16_as_ushort(__float2bfloat16_rz(x[i]));
        o[6] = __bfloat16_as_ushort(__float2bfloat16_rd(x[i]));
        o[7] = __bfloat16_as_ushort(__float2bfloat16_ru(x[i]));
        o[8] = __half_as_ushort(__double2half(d[i]));
        o[9] = __bfloat16_as_ushort(__double2bfloat16(d[i]));
    }
}

// The bits of a half or bf16 back to float (every pattern).
extern "C" __global__ void widen(const unsigned short* bits, float* half_out, float* bf16_out, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        half_out[i] = __half2float(__ushort_as_half(bits[i]));
        bf16_out[i] = __bfloat162float(__ushort_as_bfloat16(bits[i]));
    }
}

// a op b for T = __half or __nv_bfloat16, through the intrinsics, the operators and the pairs.
template <class T, class T2> __global__ void narrow_arith(const T* a, const T* b, const T* c, T* out, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        T* o = out + 8 * i;
        o[0] = __hadd(a[i], b[i]);
        o[1] = a[i] - b[i];
        o[2] = __hmul(a[i], b[i]);
        o[3] = a[i] / b[i];
        o[4] = __hfma(a[i], b[i], c[i]);
        o[5] = hsqrt(__habs(a[i]));
        const T2 p = __hfma2(T2{a[i], b[i]}, T2{b[i], a[i]}, T2{c[i], c[i]});  // both lanes: a*b + c
        o[6] = __heq(p.x, p.y) || (__hisnan(p.x) && __hisnan(p.y)) ? p.x : __hneg(p.x);
        o[7] = __hmax(a[i], b[i]);
    }
}

// --- cooperative groups -----------------------------------------------------------------------

// Sum of each tile of N threads, through cg::reduce; then each tile's inclusive scan.
template <int N> __global__ void tile_reduce(const float* in, float* sums, float* scans) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<N> tile = cg::tiled_partition<N>(block);
    const float v = in[block.thread_rank()];
    const float total = cg::reduce(tile, v, cg::plus<float>());
    tile.sync();
    if (tile.thread_rank() == 0) sums[block.thread_rank() / N] = total;
    scans[block.thread_rank()] = cg::inclusive_scan(tile, v);
}

// Tile shuffles, votes and sizes, written into out[8 * t ...].
extern "C" __global__ void tile_collectives(int* out) {
    cg::thread_block block = cg::this_thread_block();
    auto tile = cg::tiled_partition<4>(block);
    const int t = block.thread_rank();
    int* o = out + 8 * t;
    o[0] = tile.shfl(t, 3);
    o[1] = tile.shfl_down(t, 1);
    o[2] = tile.shfl_up(t, 1);
    o[3] = tile.shfl_xor(t, 2);
    o[4] = (int)tile.ballot(t % 2);
    o[5] = tile.any(t == 5) + 2 * tile.all(t < 1000);
    o[6] = cg::reduce(tile, t, cg::greater<int>());
    o[7] = (int)(tile.meta_group_rank() * 100 + tile.meta_group_size());
}

// Warp-aggregated atomic increment (one atomic per group of converged lanes): the odd threads.
extern "C" __global__ void aggregated_increment(int* counter, int* slots) {
    if (threadIdx.x % 2 == 0) return;
    cg::coalesced_group active = cg::coalesced_threads();
    int base = 0;
    if (active.thread_rank() == 0) base = atomicAdd(counter, (int)active.size());
    base = active.shfl(base, 0);
    slots[base + active.thread_rank()] = threadIdx.x;
}

// Deliberately wrong: the last lane of each tile returns before the tile's reduction.
extern "C" __global__ void tile_lane_returns(float* out) {
    auto tile = cg::tiled_partition<8>(cg::this_thread_block());
    if (tile.thread_rank() == 7) return;
    out[threadIdx.x] = cg::reduce(tile, 1.0f, cg::plus<float>());
}

extern "C" __global__ void grid_sync(float* out) {
    cg::this_grid().sync();
    out[threadIdx.x] = 1.0f;
}

// --- atomics, votes, warp reduce and match ----------------------------------------------------

// Every thread of every block applies each atomic once; out holds the final values.
extern "C" __global__ void atomic_family(int* i, unsigned* u, unsigned long long* ull, float* f, double* d,
                                         __half* h, __nv_bfloat16* b) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    atomicAnd(&u[0], ~(1u << (t % 32)));
    atomicOr(&u[1], 1u << (t % 32));
    atomicXor(&u[2], (unsigned)t);
    atomicInc(&u[3], 9u);
    atomicDec(&u[4], 9u);
    atomicMin(&i[0], -t);
    atomicMax_block(&i[1], t);
    atomicSub(&i[2], 2);
    // a chain: only thread k finds k there. One block's threads only: blocks run on several OS
    // threads at once, so block 1's thread 64 may try before block 0's chain reached 64 and
    // never try again (the test failed about one run in three)
    if (blockIdx.x == 0) atomicCAS(&i[3], t, t + 1);
    atomicExch_system(&i[4], 42);
    atomicAdd(&ull[0], (unsigned long long)t);
    atomicMax(&ull[1], (unsigned long long)t << 33);
    atomicAdd_block(&f[0], 0.25f);
    atomicExch(&f[1], 1.5f);
    atomicAdd(&d[0], 0.5);
    atomicAdd(&h[0], __float2half(1.0f));
    atomicAdd(reinterpret_cast<__half2*>(&h[2]), __floats2half2_rn(1.0f, 2.0f));
    atomicAdd(&b[0], __float2bfloat16(1.0f));
    atomicAdd(reinterpret_cast<__nv_bfloat162*>(&b[2]), __floats2bfloat162_rn(1.0f, 2.0f));
}

extern "C" __global__ void votes(const int* pred, int* out) {
    const int t = threadIdx.x, p = pred[t];
    const unsigned lane = t % 32;
    int* o = out + 12 * t;
    o[0] = __syncthreads_count(p);
    o[1] = __syncthreads_and(p);
    o[2] = __syncthreads_or(p);
    o[3] = __syncthreads_count(t < 7);  // a second vote straight after the first
    o[4] = (int)__reduce_add_sync(0xffffffffu, (unsigned)p);
    o[5] = __reduce_min_sync(0xffffffffu, p - 5);
    o[6] = __reduce_max_sync(0xffffffffu, p - 5);
    o[7] = (int)__reduce_and_sync(0xffffffffu, (unsigned)p | 0xf0u);
    o[8] = (int)__reduce_or_sync(0xffffffffu, (unsigned)p << (lane % 8));
    o[9] = (int)__reduce_xor_sync(0xffffffffu, lane);
    o[10] = (int)__match_any_sync(0xffffffffu, p);
    int all = 0;
    o[11] = (int)__match_all_sync(0xffffffffu, lane / 32, &all) + all;
}

// --- intrinsics -------------------------------------------------------------------------------

extern "C" __global__ void bit_intrinsics(const unsigned* x, const unsigned* y, unsigned* out, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        unsigned* o = out + 8 * i;
        o[0] = __brev(x[i]);
        o[1] = __byte_perm(x[i], y[i], 0x3715);
        o[2] = __umulhi(x[i], y[i]);
        o[3] = (unsigned)__mulhi((int)x[i], (int)y[i]);
        o[4] = __funnelshift_l(x[i], y[i], y[i] & 63);
        o[5] = __funnelshift_r(x[i], y[i], y[i] & 63);
        o[6] = (unsigned)__popc(x[i]) + 100u * (unsigned)__clz((int)x[i]) + 10000u * (unsigned)__ffs((int)x[i]);
        o[7] = __usad(x[i], y[i], 7u) + __uhadd(x[i], y[i]);
    }
}

// a op b rounded toward zero, down and up (add, mul, div, fma with c = b).
extern "C" __global__ void directed(const float* a, const float* b, float* out, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float* o = out + 12 * i;
        o[0] = __fadd_rz(a[i], b[i]); o[1] = __fadd_rd(a[i], b[i]); o[2] = __fadd_ru(a[i], b[i]);
        o[3] = __fmul_rz(a[i], b[i]); o[4] = __fmul_rd(a[i], b[i]); o[5] = __fmul_ru(a[i], b[i]);
        o[6] = __fdiv_rz(a[i], b[i]); o[7] = __fdiv_rd(a[i], b[i]); o[8] = __fdiv_ru(a[i], b[i]);
        o[9] = __fmaf_rz(a[i], b[i], b[i]); o[10] = __fmaf_rd(a[i], b[i], b[i]); o[11] = __fmaf_ru(a[i], b[i], b[i]);
    }
}

// Cache-hinted copies, clock64, and a spin-wait that needs __nanosleep to let the writer run.
extern "C" __global__ void hints_and_clocks(const float4* in, float4* out, long long* clocks, volatile int* flag) {
    const int t = threadIdx.x;
    const long long start = clock64();
    __stcs(&out[t], __ldcs(&in[t]));
    __stcg(&out[blockDim.x + t], __ldcg(&in[t]));
    __stwt(&out[2 * blockDim.x + t], __ldlu(&in[t]));
    if (t == 0)
        while (*flag == 0) __nanosleep(100);  // the last thread, in another warp, sets it
    if (t == (int)blockDim.x - 1) *flag = 1;
    clocks[t] = clock64() - start;
}

extern "C" __global__ void trap_on_negative(const float* x) {
    if (x[threadIdx.x] < 0.0f) __trap();
}

// Compiles, runs, and says what the CPU build defines.
extern "C" __global__ void build_macros(int* out) {
#ifdef __CUDACC__
    out[0] = 1;
#endif
#ifdef __CUDA_ARCH__
    out[1] = 1;
#endif
#ifdef ANDREA_CPU_BUILD
    out[2] = 1;
#endif
    out[3] = CUDART_VERSION / 1000;
    out[4] = cuda::std::numeric_limits<int>::max() == 2147483647;
}
