// Check kernels for Hopper's barriers (tests/backends/cpu_runtime/test_async_barriers.py): named
// barriers, mbarriers with transaction counts, setmaxnreg. Each wrapper is the inline PTX on a GPU
// and, in the CPU build, a call into the emulation (cuda/cpu_runtime/async_barriers.h), the way
// cuda/microgpt_cuda.cu wraps its tensor-core instructions. `how` selects a correct use (0) or one
// misuse each.

typedef unsigned int u32;
typedef unsigned long long u64;

// --- wrappers -----------------------------------------------------------------------------------

__device__ __forceinline__ u32 smem_u32(const void* p) {
#ifdef __CUDA_ARCH__
    return (u32)__cvta_generic_to_shared(p);
#else
    return 0;
#endif
}

__device__ __forceinline__ void named_bar_sync(int id, int n) {
#ifdef __CUDA_ARCH__
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
#else
    ptx_emulated::bar_sync(id, n);
#endif
}

__device__ __forceinline__ void named_bar_arrive(int id, int n) {
#ifdef __CUDA_ARCH__
    asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory");
#else
    ptx_emulated::bar_arrive(id, n);
#endif
}

__device__ __forceinline__ void mbar_init(u64* bar, u32 count) {
#ifdef __CUDA_ARCH__
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
#else
    ptx_emulated::mbarrier_init(bar, count);
#endif
}

__device__ __forceinline__ u64 mbar_arrive(u64* bar) {
#ifdef __CUDA_ARCH__
    u64 token;
    asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1];" : "=l"(token) : "r"(smem_u32(bar)) : "memory");
    return token;
#else
    return ptx_emulated::mbarrier_arrive(bar);
#endif
}

__device__ __forceinline__ u64 mbar_arrive_expect_tx(u64* bar, u32 bytes) {
#ifdef __CUDA_ARCH__
    u64 token;
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 %0, [%1], %2;"
                 : "=l"(token) : "r"(smem_u32(bar)), "r"(bytes) : "memory");
    return token;
#else
    return ptx_emulated::mbarrier_arrive_expect_tx(bar, bytes);
#endif
}

__device__ __forceinline__ void mbar_complete_tx(u64* bar, u32 bytes) {
#ifdef __CUDA_ARCH__
    asm volatile("mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes)
                 : "memory");
#else
    ptx_emulated::mbarrier_complete_tx(bar, bytes);
#endif
}

__device__ __forceinline__ void mbar_wait(u64* bar, u32 parity) {
#ifdef __CUDA_ARCH__
    u32 done = 0;
    while (!done)
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"(smem_u32(bar)), "r"(parity) : "memory");
#else
    while (!ptx_emulated::mbarrier_try_wait_parity(bar, parity)) {}
#endif
}

__device__ __forceinline__ bool mbar_test(u64* bar, u32 parity) {
#ifdef __CUDA_ARCH__
    u32 done;
    asm volatile("{ .reg .pred p; mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"(smem_u32(bar)), "r"(parity) : "memory");
    return done;
#else
    return ptx_emulated::mbarrier_test_wait_parity(bar, parity);
#endif
}

// TMA: the 2d tiled load of box {c0, c1} (elements, innermost first) through the tensor map at `map`
// (encoded on the host, in global memory), its bytes completed on `bar`.
__device__ __forceinline__ void tma_load_2d(void* dst, const void* map, int c0, int c1, u64* bar) {
#ifdef __CUDA_ARCH__
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 ::"r"(smem_u32(dst)), "l"(map), "r"(c0), "r"(c1), "r"(smem_u32(bar)) : "memory");
#else
    ptx_emulated::cp_async_bulk_tensor_2d(dst, map, c0, c1, bar);
#endif
}

// The map's global address replaced on the device (the map in global memory), then fenced so the
// copy engine sees it: what CUTLASS does for maps whose tensor is known only at the launch.
__device__ __forceinline__ void tensormap_set_address(void* map, const void* addr) {
#ifdef __CUDA_ARCH__
    asm volatile("tensormap.replace.tile.global_address.global.b1024.b64 [%0], %1;" ::"l"(map), "l"(addr) : "memory");
    asm volatile("fence.proxy.tensormap::generic.release.gpu;" ::: "memory");
    asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(map) : "memory");
#else
    ptx_emulated::tensormap_replace_global_address(map, addr);
#endif
}

template <bool INC>
__device__ __forceinline__ void set_max_nreg(u32 n) {  // N is an immediate on a GPU: see the callers
#ifdef __CUDA_ARCH__
    (void)n;
#else
    if (INC) ptx_emulated::setmaxnreg_inc(n);
    else ptx_emulated::setmaxnreg_dec(n);
#endif
}

// --- named barriers -------------------------------------------------------------------------------

// 128 threads. Round 1: warps 0-1 write buf, bar.arrive(1, 128); warps 2-3 bar.sync(1, 128) and read
// it. Round 2 the other way round on barrier 2. out[i] = 2 x[i] + 1 (round 1, threads 64..127 store
// for i < 64) and out[64 + i] = 3 x[64 + i] (round 2, threads 0..63). how: 0 correct, 1 a second
// count on barrier 1, 2 a count that is not whole warps, 3 id 16, 4 a count above the block, 5 the
// producers never arrive (deadlock), 6 barrier 0 with the block size (= __syncthreads) between the
// rounds, 7 the consumers of round 1 do not wait (a race), 8 a third warp-pair reads without being a
// participant of barrier 3 (a race: the barrier orders only its participants).
extern "C" __global__ void named_barrier_check(const float* x, float* out, int how) {
    __shared__ float buf[128];
    const int t = threadIdx.x;
    const bool producer = t < 64;
    int id = how == 3 ? 16 : 1, n = how == 2 ? 100 : how == 4 ? 160 : 128;
    if (producer) {
        buf[t] = 2.0f * x[t];
        if (how != 5) named_bar_arrive(id, n);
    } else {
        if (how == 1) n = 96;
        if (how != 7) named_bar_sync(id, n);
        out[t - 64] = buf[t - 64] + 1.0f;
    }
    if (how == 6) named_bar_sync(0, blockDim.x);
    if (how == 8) {  // barrier 3: warp 0 writes, warp 1 waits; warps 2-3 read with no barrier between
        if (t < 32) { buf[64 + t] = 5.0f; named_bar_arrive(3, 64); }
        else if (t < 64) { named_bar_sync(3, 64); out[64 + t - 32] = buf[64 + t - 32]; }
        else out[64 + t - 64] = buf[64 + (t - 64) % 32];
        return;
    }
    // round 2, the other way round
    if (!producer) {
        buf[t] = 3.0f * x[t];
        named_bar_arrive(2, 128);
    } else {
        named_bar_sync(2, 128);
        out[64 + t] = buf[64 + t];
    }
}

// --- mbarrier -----------------------------------------------------------------------------------

// A two-stage ring, FlashAttention-3's shape without TMA: warp 0 produces tiles of 64 floats into
// stage tile % 2 (lane 0 arms full[stage] with arrive.expect_tx of 256 bytes, every lane then
// completes 8 bytes of it after its two stores, as a TMA copy would), warps 1-2 (64 threads) wait
// on full, store out[tile * 64 + i] = 3 x[tile * 64 + i] and arrive on empty[stage] (count 64).
// 96 threads. how: 0 correct, 1 the consumers wait on an mbarrier nobody initialised, 2 the
// producer expects 4 bytes more than it completes (deadlock: pending tx bytes 4), 3 no producer
// (deadlock: never armed), 4 only one consumer warp arrives on empty (deadlock: pending arrivals
// 32), 5 an mbarrier at an address that is not 8-byte aligned, 6 init with count 0, 7 the
// consumers spin on test_wait instead, 8 the consumers skip the full wait of tile 1 (a race: the producer happens to run ahead here, so only racecheck sees it), 9 the producer arrives twice on full (count 1).
extern "C" __global__ void mbarrier_ring_check(const float* x, float* out, int tiles, int how) {
    __shared__ __align__(16) float stage[2][64];
    __shared__ __align__(8) u64 bars[6];  // full[2], empty[2], one never initialised, spare
    u64* full = bars;
    u64* empty = bars + 2;
    const int t = threadIdx.x, lane = t % 32;
    if (t == 0) {
        for (int s = 0; s < 2; s++) {
            mbar_init(&full[s], how == 6 ? 0 : 1);
            mbar_init(&empty[s], 64);
        }
        if (how == 5) mbar_init((u64*)((char*)&bars[4] + 4), 1);
    }
    __syncthreads();
    if (t < 32) {
        if (how == 3) return;
        for (int tile = 0; tile < tiles; tile++) {
            const int s = tile % 2;
            mbar_wait(&empty[s], ((tile / 2) & 1) ^ 1);  // the first pass through each stage does not wait
            if (lane == 0) mbar_arrive_expect_tx(&full[s], how == 2 ? 260 : 256);
            if (lane == 0 && how == 9) mbar_arrive(&full[s]);  // a second arrival: the count is 1
            stage[s][lane] = x[tile * 64 + lane];
            stage[s][32 + lane] = x[tile * 64 + 32 + lane];
            mbar_complete_tx(&full[s], 8);
        }
        return;
    }
    const int i = t - 32;  // 0..63
    for (int tile = 0; tile < tiles; tile++) {
        const int s = tile % 2;
        const u32 parity = (tile / 2) & 1;
        if (how == 1) mbar_wait(&bars[4], parity);
        else if (how == 7) { while (!mbar_test(&full[s], parity)) {} }
        else if (!(how == 8 && tile == 1)) mbar_wait(&full[s], parity);
        out[tile * 64 + i] = 3.0f * stage[s][i];
        if (!(how == 4 && t >= 64)) mbar_arrive(&empty[s]);
    }
}

// --- setmaxnreg -----------------------------------------------------------------------------------

// 256 threads, two warpgroups: warpgroup 0 gives registers away (dec 40), warpgroup 1 takes them
// (inc 232), as FlashAttention-3's producer and consumers do; out[i] = x[i] + 1. how: 0 correct,
// 1 N = 30 (not a multiple of 8), 2 warp 1 asks for another N than its warpgroup, 3 (launched with
// 96 threads) not whole warpgroups, 4 warp 3 skips it (deadlock).
extern "C" __global__ void setmaxnreg_check(const float* x, float* out, int how) {
    const int t = threadIdx.x, warp = t / 32;
#ifdef __CUDA_ARCH__
    if (t < 128) asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    else asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
#else
    if (!(how == 4 && warp == 3)) {
        if (t < 128 && t < (int)blockDim.x) set_max_nreg<false>(how == 1 ? 30 : how == 2 && warp == 1 ? 48 : 40);
        else set_max_nreg<true>(232);
    }
#endif
    out[t] = x[t] + 1.0f;
}

// --- TMA ------------------------------------------------------------------------------------------

// Thread 0 arms the barrier for `bytes` and issues one TMA load of the box at (c0, c1); every thread
// waits on phase 0, then the block copies the shared-memory bytes (as the swizzle left them) to out.
// 128 threads. how: 0 correct, 1 nobody arms or issues (deadlock: never armed), 2 the copy without
// the expect_tx (deadlock: the transaction count below zero), 3 the readers do not wait (a race).
// src: the tensor, whose address replaces the map's (null: the map's own, the host's address).
extern "C" __global__ void tma_check(unsigned char* map, const void* src, unsigned char* out, int c0, int c1,
                                     int bytes, int how) {
    __shared__ __align__(1024) unsigned char tile[8192];
    __shared__ __align__(8) u64 bar;
    if (threadIdx.x == 0) mbar_init(&bar, 1);
    __syncthreads();
    if (threadIdx.x == 0 && how != 1) {
        if (src) tensormap_set_address(map, src);
        if (how != 2) mbar_arrive_expect_tx(&bar, bytes);
        tma_load_2d(tile, map, c0, c1, &bar);
    }
    if (how != 3) mbar_wait(&bar, 0);
    for (int i = threadIdx.x; i < bytes; i += blockDim.x) out[i] = tile[i];
}
