// Small kernels that exercise one feature of the CPU runtime each
// (tests/backends/cpu_runtime/test_module.py).

// out[i] = in[i] * s, grid-stride; threads past n return at once.
extern "C" __global__ void scale(const float* __restrict__ in, float* __restrict__ out, int n, float s) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = in[i] * s;
}

// Reverses each block's slice through shared memory; threads past n return before the barrier,
// which must count them as arrived.
extern "C" __global__ void reverse_block(const int* in, int* out, int n) {
    __shared__ int buf[256];
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int live = min((int)blockDim.x, n - (int)(blockIdx.x * blockDim.x));
    if (i >= n) return;
    buf[threadIdx.x] = in[i];
    __syncthreads();
    out[i] = buf[live - 1 - threadIdx.x];
}

// Block sum: each warp shuffles, lane 0 writes shared memory, then only warp 0 shuffles again
// (the case HIP-CPU gets wrong).
extern "C" __global__ void block_sum(const float* in, float* out, int n) {
    extern __shared__ float partial[];  // (blockDim.x / 32)
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float x = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) x += in[blockIdx.x * n + i];
    for (int o = 16; o > 0; o >>= 1) x += __shfl_down_sync(0xffffffff, x, o);
    if (lane == 0) partial[warp] = x;
    __syncthreads();
    if (warp == 0) {
        x = lane < (blockDim.x + 31) / 32 ? partial[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffff, x, o);
        if (lane == 0) out[blockIdx.x] = x;
    }
}

// out[t] = the value each thread gets from each shuffle flavour. whole_mask names all 32 lanes,
// which is wrong in a partial warp (lanes past the block do not exist); otherwise the mask is
// __activemask(): the lanes that exist.
extern "C" __global__ void shuffles(int* out, int width, int whole_mask) {
    const int t = threadIdx.x, v = 100 + t;
    const unsigned mask = whole_mask ? 0xffffffffu : __activemask();
    out[4 * t + 0] = __shfl_xor_sync(mask, v, 1, width);
    out[4 * t + 1] = __shfl_down_sync(mask, v, 3, width);
    out[4 * t + 2] = __shfl_up_sync(mask, v, 2, width);
    out[4 * t + 3] = __shfl_sync(mask, v, 5, width);
}

// Threads with odd lane return first; the even lanes shuffle among themselves with `mask`.
// Right: mask 0x55555555 and lane_mask 2. Wrong: a mask naming the odd lanes, or lane_mask 1
// (reading a lane that has returned).
extern "C" __global__ void shuffle_exited(int* out, unsigned mask, int lane_mask) {
    const int t = threadIdx.x;
    if (t % 2) return;
    out[t] = __shfl_xor_sync(mask, t, lane_mask);
}

// Threads past n return, the rest meet at __syncwarp(mask); mask 0 stands for __activemask().
extern "C" __global__ void syncwarp_after_return(int* out, int n, unsigned mask) {
    const int t = threadIdx.x;
    if (t >= n) return;
    __syncwarp(mask ? mask : __activemask());
    out[t] = 1;
}

// __activemask() in divergent branches: each half-warp sees only itself; then a ballot of odd
// lanes over the lanes that exist.
extern "C" __global__ void active_lanes(unsigned* out) {
    const int t = threadIdx.x;
    if (t % 32 < 16) out[t] = __activemask();
    else out[t] = __activemask();
    const unsigned all = __activemask();
    out[blockDim.x + t] = __ballot_sync(all, t & 1);
    out[2 * blockDim.x + t] = __shfl_sync(all, (unsigned)t, 0) + 1000u * __all_sync(all, t >= 0)
                              + 2000u * __any_sync(all, t == 0);
}

// float4 loads and stores, with a float4 reinterpret cast as kernels write them.
extern "C" __global__ void double4(const float* in, float* out, int n4) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n4) return;
    float4 v = reinterpret_cast<const float4*>(in)[i];
    reinterpret_cast<float4*>(out)[i] = make_float4(2 * v.x, 2 * v.y, 2 * v.z, 2 * v.w);
}

// Every thread of every block adds 1 and tracks the max thread id seen, through atomics.
extern "C" __global__ void atomics(int* count, float* fsum, int* maxid, int* exch, int* cas) {
    const int id = blockIdx.x * blockDim.x + threadIdx.x;
    atomicAdd(count, 1);
    atomicAdd(fsum, 0.5f);
    atomicMax(maxid, id);
    atomicExch(exch, 7);
    atomicCAS(cas, 0, id + 1);  // only the first thread wins
}

// Deliberately wrong: only half the block reaches the barrier, the other half waits at another.
extern "C" __global__ void deadlock(float* out) {
    if (threadIdx.x < 16) {
        __syncthreads();
        out[threadIdx.x] = 1.0f;
    } else {
        __syncwarp();
    }
}

// Deliberately missing a barrier (unless with_barrier): thread t reads what thread t-1 wrote.
// Forward order runs t-1 first, so it passes by luck; reverse order reads unwritten (NaN) memory.
extern "C" __global__ void neighbour(float* out, int with_barrier) {
    __shared__ float buf[64];
    const int t = threadIdx.x;
    buf[t] = (float)t;
    if (with_barrier) __syncthreads();
    out[t] = t > 0 ? buf[t - 1] : -1.0f;
}

// Reads shared memory nobody wrote: must be NaN (poisoned), not a stale value from a launch before.
extern "C" __global__ void unwritten(float* out, int write) {
    __shared__ float buf[32];
    extern __shared__ float dyn[];
    if (write) { buf[threadIdx.x] = 1.0f; dyn[threadIdx.x] = 2.0f; }
    __syncthreads();
    out[threadIdx.x] = buf[threadIdx.x];
    out[32 + threadIdx.x] = dyn[threadIdx.x];
}

// Reads one element past the end of in (for the sanitizer test).
extern "C" __global__ void out_of_bounds(const float* in, float* out, int n) {
    const int i = threadIdx.x;
    if (i <= n) out[i % n] = in[i];
}

// Signed overflow for n > 1 (for the UndefinedBehaviorSanitizer test).
extern "C" __global__ void overflow(int* out, int n) {
    out[threadIdx.x] = n * 0x40000000;
}

// Reads far outside any allocation (offset in elements): an illegal address on a GPU.
extern "C" __global__ void wild_read(const float* in, float* out, long offset) {
    out[threadIdx.x] = in[offset];
}

// Recursion with a large frame: runs past the end of the thread's stack.
__device__ float deep(int n, volatile float* sink) {
    volatile float frame[1024];
    frame[n % 1024] = (float)n;
    if (n == 0) return frame[0];
    return deep(n - 1, sink) + frame[n % 1024];
}
extern "C" __global__ void stack_overflow(float* out, int depth) {
    out[threadIdx.x] = deep(depth, out);
}
