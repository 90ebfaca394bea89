// Kernels written the way public CUDA code writes them, run unchanged on the CPU build
// (tests/backends/cpu_runtime/test_styles.py compares each with NumPy). Our own code, in two
// styles:
//   llm.c dev/cuda: bf16 storage with float math, a warp per row through cooperative groups,
//     Packed128 vector loads with cache hints, online softmax.
//   cuda-samples: SharedMemory<T>, template kernels on block size, shared-memory atomics,
//     padded transpose tiles, a shuffle scan, half2 arithmetic.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace cg = cooperative_groups;
typedef __nv_bfloat16 floatX;  // the storage type, as llm.c picks it

// ---------------------------------------------------------------------------------------------
// llm.c style

// 128 bits of ElementType: one vector load or store.
template <class ElementType> struct alignas(16) Packed128 {
    static constexpr int size = sizeof(int4) / sizeof(ElementType);
    ElementType payload[size];
    __device__ Packed128() = default;
    __device__ explicit Packed128(int4 bits) { memcpy(&payload, &bits, sizeof(bits)); }
    __device__ ElementType& operator[](int i) { return payload[i]; }
    __device__ const ElementType& operator[](int i) const { return payload[i]; }
    __device__ int4 get_bits() const { int4 bits; memcpy(&bits, &payload, sizeof(bits)); return bits; }
};
typedef Packed128<floatX> x128;
__device__ x128 load128cs(const floatX* p) { return x128(__ldcs(reinterpret_cast<const int4*>(p))); }
__device__ void store128(floatX* p, x128 v) { *reinterpret_cast<int4*>(p) = v.get_bits(); }

// LayerNorm, one warp per row: mean and rstd by cg::reduce, bf16 in and out, float math.
extern "C" __global__ void layernorm_forward_kernel3(floatX* __restrict__ out, float* __restrict__ mean,
                                                     float* __restrict__ rstd, const floatX* __restrict__ inp,
                                                     const floatX* __restrict__ weight,
                                                     const floatX* __restrict__ bias, int N, int C) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    const int idx = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();  // the row
    if (idx >= N) return;  // the whole warp leaves together
    const floatX* x = inp + idx * C;  // (C,)
    float sum = 0.0f;
    for (int i = warp.thread_rank(); i < C; i += warp.size()) sum += (float)x[i];
    const float m = cg::reduce(warp, sum, cg::plus<float>{}) / C;
    if (warp.thread_rank() == 0 && mean != nullptr) __stcs(mean + idx, m);
    sum = 0.0f;
    for (int i = warp.thread_rank(); i < C; i += warp.size()) {
        const float diff = (float)x[i] - m;
        sum += diff * diff;
    }
    const float s = rsqrtf(cg::reduce(warp, sum, cg::plus<float>{}) / C + 1e-5f);
    if (warp.thread_rank() == 0 && rstd != nullptr) __stcs(rstd + idx, s);
    floatX* o = out + idx * C;
    for (int c = warp.thread_rank(); c < C; c += warp.size()) {
        const float n = s * ((float)__ldcs(x + c) - m);
        __stcs(o + c, (floatX)(n * (float)weight[c] + (float)bias[c]));
    }
}

// Online softmax, one warp per row: running max and sum per lane, merged across the warp.
extern "C" __global__ void softmax_forward_online_kernel(float* out, const float* inp, int N, int C) {
    auto warp = cg::tiled_partition<32>(cg::this_thread_block());
    const int row = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
    if (row >= N) return;
    const float* x = inp + row * C;  // (C,)
    float maxval = -INFINITY, sumval = 0.0f;
    for (int i = warp.thread_rank(); i < C; i += warp.size()) {
        const float prev = maxval;
        maxval = fmaxf(maxval, x[i]);
        sumval = sumval * expf(prev - maxval) + expf(x[i] - maxval);  // rescale what came before
    }
    const float row_max = cg::reduce(warp, maxval, cg::greater<float>{});
    sumval *= expf(maxval - row_max);
    const float row_sum = cg::reduce(warp, sumval, cg::plus<float>{});
    for (int i = warp.thread_rank(); i < C; i += warp.size()) out[row * C + i] = expf(x[i] - row_max) / row_sum;
}

// GELU (tanh approximation) on 8 bf16 values per thread, 128-bit loads and stores.
#define GELU_SCALING_FACTOR sqrtf(2.0f / M_PI)
extern "C" __global__ void gelu_forward_kernel2(floatX* out, const floatX* inp, int N) {
    const int i = (blockIdx.x * blockDim.x + threadIdx.x) * x128::size;
    if (i >= N) return;
    x128 packed_out;
    const x128 packed_inp = load128cs(inp + i);
    for (int k = 0; k < x128::size; ++k) {
        const float xi = (float)packed_inp[k];
        const float cube = 0.044715f * xi * xi * xi;
        packed_out[k] = (floatX)(0.5f * xi * (1.0f + tanhf(GELU_SCALING_FACTOR * (xi + cube))));
    }
    store128(out + i, packed_out);
}

// out = inp1 + inp2 in bf16 pairs (__hadd2 rounds once per element).
extern "C" __global__ void residual_forward_kernel(__nv_bfloat162* out, const __nv_bfloat162* inp1,
                                                   const __nv_bfloat162* inp2, int N2) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N2) out[i] = __hadd2(inp1[i], inp2[i]);
}

// ---------------------------------------------------------------------------------------------
// cuda-samples style

// Dynamic shared memory typed per T, the way the samples' reductions get it.
template <class T> struct SharedMemory {
    __device__ inline operator T*() {
        extern __shared__ int __smem[];
        return (T*)__smem;
    }
    __device__ inline operator const T*() const {
        extern __shared__ int __smem[];
        return (T*)__smem;
    }
};
template <> struct SharedMemory<double> {
    __device__ inline operator double*() {
        extern __shared__ double __smem_d[];
        return (double*)__smem_d;
    }
};

// Each thread sums many elements (two per loop step when n is a power of two), the block
// reduces in shared memory down to one warp, the warp finishes with shuffles.
template <class T, unsigned int blockSize, bool nIsPow2>
__global__ void reduce6(const T* g_idata, T* g_odata, unsigned int n) {
    T* sdata = SharedMemory<T>();
    cg::thread_block cta = cg::this_thread_block();
    const unsigned int tid = threadIdx.x, gridSize = blockSize * 2 * gridDim.x;
    unsigned int i = blockIdx.x * blockSize * 2 + threadIdx.x;
    T mySum = 0;
    while (i < n) {
        mySum += g_idata[i];
        if (nIsPow2 || i + blockSize < n) mySum += g_idata[i + blockSize];
        i += gridSize;
    }
    sdata[tid] = mySum;
    cg::sync(cta);
    if (blockSize >= 512 && tid < 256) sdata[tid] = mySum = mySum + sdata[tid + 256];
    cg::sync(cta);
    if (blockSize >= 256 && tid < 128) sdata[tid] = mySum = mySum + sdata[tid + 128];
    cg::sync(cta);
    if (blockSize >= 128 && tid < 64) sdata[tid] = mySum = mySum + sdata[tid + 64];
    cg::sync(cta);
    cg::thread_block_tile<32> tile32 = cg::tiled_partition<32>(cta);
    if (cta.thread_rank() < 32) {
        if (blockSize >= 64) mySum += sdata[tid + 32];
        for (int offset = tile32.size() / 2; offset > 0; offset /= 2) mySum += tile32.shfl_down(mySum, offset);
    }
    if (cta.thread_rank() == 0) g_odata[blockIdx.x] = mySum;
}

// 256-bin histogram: per-block counts in shared memory, then one global atomic per bin.
extern "C" __global__ void histogram256(unsigned int* d_Histogram, const unsigned char* d_Data, unsigned int n) {
    __shared__ unsigned int s_Hist[256];
    for (unsigned int b = threadIdx.x; b < 256; b += blockDim.x) s_Hist[b] = 0;
    __syncthreads();
    for (unsigned int pos = blockIdx.x * blockDim.x + threadIdx.x; pos < n; pos += blockDim.x * gridDim.x)
        atomicAdd(&s_Hist[d_Data[pos]], 1);
    __syncthreads();
    for (unsigned int b = threadIdx.x; b < 256; b += blockDim.x)
        if (s_Hist[b]) atomicAdd(&d_Histogram[b], s_Hist[b]);
}

// Transpose through a shared tile padded by one column (no bank conflicts on a GPU).
#define TILE_DIM 32
#define BLOCK_ROWS 8
extern "C" __global__ void transposeCoalesced(float* odata, const float* idata, int width, int height) {
    __shared__ float tile[TILE_DIM][TILE_DIM + 1];
    int x = blockIdx.x * TILE_DIM + threadIdx.x, y = blockIdx.y * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        if (x < width && y + j < height) tile[threadIdx.y + j][threadIdx.x] = idata[(y + j) * width + x];
    __syncthreads();
    x = blockIdx.y * TILE_DIM + threadIdx.x;
    y = blockIdx.x * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        if (x < height && y + j < width) odata[(y + j) * height + x] = tile[threadIdx.x][threadIdx.y + j];
}

// C = A B with BLOCK_SIZE x BLOCK_SIZE tiles of both in shared memory (wA, wB multiples of it).
template <int BLOCK_SIZE> __global__ void MatrixMulCUDA(float* C, const float* A, const float* B, int wA, int wB) {
    const int bx = blockIdx.x, by = blockIdx.y, tx = threadIdx.x, ty = threadIdx.y;
    const int aBegin = wA * BLOCK_SIZE * by, aEnd = aBegin + wA - 1, aStep = BLOCK_SIZE;
    const int bBegin = BLOCK_SIZE * bx, bStep = BLOCK_SIZE * wB;
    float Csub = 0;
    for (int a = aBegin, b = bBegin; a <= aEnd; a += aStep, b += bStep) {
        __shared__ float As[BLOCK_SIZE][BLOCK_SIZE];
        __shared__ float Bs[BLOCK_SIZE][BLOCK_SIZE];
        As[ty][tx] = A[a + wA * ty + tx];
        Bs[ty][tx] = B[b + wB * ty + tx];
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BLOCK_SIZE; ++k) Csub += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    C[wB * BLOCK_SIZE * by + BLOCK_SIZE * bx + wB * ty + tx] = Csub;
}

// Inclusive block scan: a shuffle scan per warp, the warps' totals scanned by warp 0.
extern "C" __global__ void shfl_scan_test(int* data, int width, int* partial_sums) {
    extern __shared__ int sums[];
    const int id = blockIdx.x * blockDim.x + threadIdx.x;
    const int lane_id = id % warpSize, warp_id = threadIdx.x / warpSize;
    int value = data[id];
    for (int i = 1; i <= width; i *= 2) {
        const unsigned int mask = 0xffffffff;
        const int n = __shfl_up_sync(mask, value, i, width);
        if (lane_id >= i) value += n;
    }
    if (threadIdx.x % warpSize == warpSize - 1) sums[warp_id] = value;
    __syncthreads();
    if (warp_id == 0 && lane_id < (blockDim.x / warpSize)) {
        int warp_sum = sums[lane_id];
        const unsigned int mask = (1 << (blockDim.x / warpSize)) - 1;
        for (int i = 1; i <= (blockDim.x / warpSize); i *= 2) {
            const int n = __shfl_up_sync(mask, warp_sum, i, (blockDim.x / warpSize));
            if (lane_id >= i) warp_sum += n;
        }
        sums[lane_id] = warp_sum;
    }
    __syncthreads();
    int blockSum = 0;
    if (warp_id > 0) blockSum = sums[warp_id - 1];
    value += blockSum;
    data[id] = value;
    if (partial_sums != NULL && threadIdx.x == blockDim.x - 1) partial_sums[blockIdx.x] = value;
}

// Dot products of half2 vectors: __hmul2 per pair, summed in float, one result per block.
extern "C" __global__ void scalarProductKernel_intrinsics(const half2* a, const half2* b, float* results, int size) {
    __shared__ float shArray[128];
    float2 value = make_float2(0.0f, 0.0f);
    for (int i = threadIdx.x; i < size; i += blockDim.x) {
        const float2 p = __half22float2(__hmul2(a[blockIdx.x * size + i], b[blockIdx.x * size + i]));
        value.x += p.x;
        value.y += p.y;
    }
    shArray[threadIdx.x] = value.x + value.y;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) shArray[threadIdx.x] += shArray[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) results[blockIdx.x] = shArray[0];
}
