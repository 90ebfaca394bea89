// Kernels for racecheck (tests/backends/cpu_runtime/test_racecheck.py): each racy one has exactly
// one race, marked "RACE:" on the two lines that make it; each correct one is a common pattern that must stay
// silent (a GPU orders it, so racecheck must too).

#include <cooperative_groups.h>
namespace cg = cooperative_groups;

// --- racy -----------------------------------------------------------------------------------

// The llm.c attention pattern: lane 0 of each warp computes a row's value into global memory,
// then every lane of the warp reads it. Without a __syncwarp between, a lane may read before
// lane 0 has written (lanes are not in lock-step since Volta). One warp per row.
__global__ void lane0_writes_lanes_read(const float* x, float* row_max, float* out, int cols) {
    const int lane = threadIdx.x % 32, row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (lane == 0) {
        float m = x[row * cols];
        for (int c = 1; c < cols; c++) m = fmaxf(m, x[row * cols + c]);
        row_max[row] = m;  // RACE: lane 0 writes
    }
    for (int c = lane; c < cols; c += 32) out[row * cols + c] = x[row * cols + c] - row_max[row];  // RACE: lanes read
}

// The same with the __syncwarp the memory model asks for: silent.
__global__ void lane0_writes_lanes_read_synced(const float* x, float* row_max, float* out, int cols) {
    const int lane = threadIdx.x % 32, row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (lane == 0) {
        float m = x[row * cols];
        for (int c = 1; c < cols; c++) m = fmaxf(m, x[row * cols + c]);
        row_max[row] = m;
    }
    __syncwarp();
    for (int c = lane; c < cols; c += 32) out[row * cols + c] = x[row * cols + c] - row_max[row];
}

// PolyBench-GPU's MVT shape: a (32, 8) block where the 8 threads of a column all add into the
// same x1[i] with a plain +=.
__global__ void mvt_shared_sum(const float* a, const float* y, float* x1, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    for (int j = threadIdx.y; j < n; j += blockDim.y) x1[i] += a[i * n + j] * y[j];  // RACE: 8 threads, one element
}

// Pre-Volta warp-synchronous reduction: the last warp sums shared memory with no __syncwarp,
// trusting lock-step execution (volatile only stops the compiler caching the values).
__global__ void warp_synchronous_sum(const float* x, float* out) {
    __shared__ float s[64];
    const int t = threadIdx.x;
    s[t] = x[blockIdx.x * 64 + t];
    __syncthreads();
    if (t < 32) {
        volatile float* v = s;
        v[t] += v[t + 32];  // RACE: lane t writes v[t] here, while lanes below t read it
        v[t] += v[t + 16];  // RACE: on this line or the four after
        v[t] += v[t + 8];
        v[t] += v[t + 4];
        v[t] += v[t + 2];
        v[t] += v[t + 1];
    }
    if (t == 0) out[blockIdx.x] = s[0];
}

// Every block adds its slice into the same output: nothing orders blocks of a launch.
__global__ void blocks_add_into_one(const float* x, float* out) {
    out[threadIdx.x] += x[blockIdx.x * blockDim.x + threadIdx.x];  // RACE: every block, out[threadIdx.x]
}

// A fence with no atomic after it: the last block reads the others' partial sums, trusting the
// fence alone (it orders this thread's writes, but nothing tells the last block they are done).
__global__ void fence_without_atomic(const float* x, float* partial, float* total) {
    if (threadIdx.x != 0) return;
    partial[blockIdx.x] = x[blockIdx.x];  // RACE: each block writes its partial
    __threadfence();
    if (blockIdx.x == gridDim.x - 1) {
        float sum = 0.0f;
        for (unsigned b = 0; b < gridDim.x; b++) sum += partial[b];  // RACE: the last block reads them all
        *total = sum;
    }
}

// --- correct: silent ------------------------------------------------------------------------

// cuda-samples' threadFenceReduction: each block's sum to partial[], a fence, an atomic ticket;
// the block that draws the last ticket adds the partials. The fence + atomic order them.
__global__ void last_block_sum(const float* x, float* partial, unsigned* ticket, float* total, int n) {
    __shared__ float s[128];
    __shared__ bool last;
    const int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    s[t] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (t < stride) s[t] += s[t + stride];
        __syncthreads();
    }
    if (t == 0) {
        partial[blockIdx.x] = s[0];
        __threadfence();
        last = atomicInc(ticket, gridDim.x) == gridDim.x - 1;
    }
    __syncthreads();
    if (last && t == 0) {
        float sum = 0.0f;
        for (unsigned b = 0; b < gridDim.x; b++) sum += partial[b];
        *total = sum;
        *ticket = 0;
    }
}

// Shuffle reduction per warp, the warps' sums through shared memory behind a barrier.
__global__ void shuffle_block_sum(const float* x, float* out) {
    __shared__ float warp_sums[32];
    const int t = threadIdx.x, lane = t % 32, warp = t / 32;
    float v = x[blockIdx.x * blockDim.x + t];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (int)blockDim.x / 32 ? warp_sums[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
        if (lane == 0) out[blockIdx.x] = v;
    }
}

// Cooperative groups: 16-thread tiles exchange values through shared memory behind tile.sync(),
// then cg::reduce; the block's result behind cg::sync(block).
__global__ void tile_exchange(const float* x, float* out) {
    __shared__ float s[256];
    __shared__ float tile_sums[16];
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<16> tile = cg::tiled_partition<16>(block);
    const int t = block.thread_rank();
    s[t] = x[blockIdx.x * blockDim.x + t];
    tile.sync();
    const float neighbour = s[(t & ~15) + ((t + 1) & 15)];  // another lane of the same tile
    const float sum = cg::reduce(tile, neighbour, cg::plus<float>());
    if (tile.thread_rank() == 0) tile_sums[t / 16] = sum;
    cg::sync(block);
    if (t == 0) {
        float total = 0.0f;
        for (int i = 0; i < (int)blockDim.x / 16; i++) total += tile_sums[i];
        out[blockIdx.x] = total;
    }
}

// An atomics histogram: per-block counts in shared memory, merged into global memory.
__global__ void histogram(const unsigned* values, unsigned* bins, int n) {
    __shared__ unsigned local[16];
    const int t = threadIdx.x;
    if (t < 16) local[t] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + t; i < n; i += gridDim.x * blockDim.x) atomicAdd(&local[values[i] % 16], 1u);
    __syncthreads();
    if (t < 16) atomicAdd(&bins[t], local[t]);
}

// A tiled GEMM (C = A B, 16x16 tiles), both barriers in place.
__global__ void tiled_gemm(const float* a, const float* b, float* c, int n) {
    __shared__ float as[16][17], bs[16][17];
    const int tx = threadIdx.x, ty = threadIdx.y, row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < n; k0 += 16) {
        as[ty][tx] = a[row * n + k0 + tx];
        bs[ty][tx] = b[(k0 + ty) * n + col];
        __syncthreads();
        for (int k = 0; k < 16; k++) acc += as[ty][k] * bs[k][tx];
        __syncthreads();
    }
    c[row * n + col] = acc;
}

// A 64-thread tile (two warps) exchanging through shared memory behind tile.sync(): the tile's
// sync orders both warps, its shuffles do not need to.
__global__ void wide_tile_exchange(const float* x, float* out) {
    __shared__ float s[128];
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<64> tile = cg::tiled_partition<64>(block);
    const int t = block.thread_rank();
    s[t] = x[blockIdx.x * blockDim.x + t];
    tile.sync();
    const float other = s[(t & ~63) + ((t + 32) & 63)];  // the other warp of the same tile
    const float first = tile.shfl(other, 0);
    out[blockIdx.x * blockDim.x + t] = other + first;
}
