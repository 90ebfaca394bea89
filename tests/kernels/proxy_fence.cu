// Kernels for the async proxy in the CPU build (tests/backends/cpu_runtime/test_proxy_fence.py):
// wgmma's tensor cores read shared memory through descriptors as the ASYNC proxy, so a thread's
// generic writes (plain stores, cp.async) reach them only through fence.proxy.async together with
// a barrier (PTX ISA, "Memory Consistency Model", proxy-preserved causality order). Appended to
// the kernel file (they use its wrappers); CPU build only (the SS form is called through the
// emulation directly: the kernel file has no wrapper for it yet).
//
// One warpgroup (128 threads), one wgmma m64n64k16: out (64 x 64, fp32, row-major) = a (64 x 16,
// bf16, row-major) · b (16 x 64, bf16, row-major). B in dynamic shared memory bytes 2048..4095,
// K-major (core matrix (n / 8, k / 8) at (n / 8) 256 + (k / 8) 128, inside (n % 8) 16 + (k % 8) 2).
// ss 1: A from shared memory too (the SS form), bytes 0..2047, K-major (core (m / 8, k / 8) at
// (m / 8) 256 + (k / 8) 128, inside (m % 8) 16 + (k % 8) 2) or, trans_a, MN-major (core at
// (k / 8) 1024 + (m / 8) 128, inside (k % 8) 16 + (m % 8) 2); ss 0: A in registers (RS).
// Thread t fills elements t, t + 128, ...: the tensor cores of every warp read other threads' bytes.
// how: 0 correct (each thread fences its writes, then the barrier); 1 the barrier without the
// fence; 2 the barrier, then each thread's fence (the reader's: also correct); 3 only warp 0
// fences before the barrier; 4 the fence without the barrier; 5 after the wait, the tiles
// written again (the same values) with no barrier between; 6 the same after a barrier (correct);
// 7 A (SS) or B changed while the wgmma is in flight.
__device__ __forceinline__ u32 proxy_tile_offset(int row, int k, bool mn_major) {  // bytes, 64 x 16 tile
    return mn_major ? (k / 8) * 1024 + (row / 8) * 128 + (k % 8) * 16 + (row % 8) * 2
                    : (row / 8) * 256 + (k / 8) * 128 + (row % 8) * 16 + (k % 8) * 2;
}

extern "C" __global__ void proxy_wgmma(const unsigned short* __restrict__ a, const unsigned short* __restrict__ b,
                                       float* __restrict__ out, int ss, int trans_a, int how) {
    extern __shared__ __align__(128) unsigned char proxy_smem[];
    unsigned char* a_s = proxy_smem;
    unsigned char* b_s = proxy_smem + 2048;
    const int t = threadIdx.x, warp = t / 32, lane = t % 32, g = lane / 4, q = lane % 4;
    auto fill = [&](unsigned short add) {
        for (int i = t; i < 64 * 16; i += blockDim.x) {
            const int n = i % 64, k = i / 64;  // b (k, n)
            *(unsigned short*)(b_s + proxy_tile_offset(n, k, false)) = (unsigned short)(b[k * 64 + n] + add);
            if (ss) {
                const int m = i / 16, kk = i % 16;  // a (m, k)
                *(unsigned short*)(a_s + proxy_tile_offset(m, kk, trans_a)) = (unsigned short)(a[m * 16 + kk] + add);
            }
        }
    };
    fill(0);
    if (how == 0 || (how == 3 && warp == 0) || how == 4 || how >= 5) fence_proxy_async();
    if (how != 4) __syncthreads();
    if (how == 2) fence_proxy_async();
    float d[32];
    for (int i = 0; i < 32; i++) d[i] = 0.0f;
    const unsigned long long desc_b = wgmma_desc(b_s, 128, 256);
    wgmma_fence();
    if (ss) {
        const unsigned long long desc_a = trans_a ? wgmma_desc(a_s, 1024, 128) : wgmma_desc(a_s, 128, 256);
        ptx_emulated::wgmma_m64nNk16_bf16_ss(64, trans_a != 0, false, d, desc_a, desc_b, false);
    } else {
        const u32* a2 = (const u32*)a;  // a (m, k) pairs: row m holds 8 of them
        const int r0 = 16 * warp;
        const u32 af[4] = {a2[(r0 + g) * 8 + q], a2[(r0 + g + 8) * 8 + q], a2[(r0 + g) * 8 + q + 4],
                           a2[(r0 + g + 8) * 8 + q + 4]};
        wgmma_bf16_m64nNk16<64, false>(d, af, desc_b, false);
    }
    wgmma_commit();
    if (how == 7) {  // the bug: a tile changed under the tensor cores (barrier: every thread's fill is in)
        __syncthreads();
        fill(1);
    }
    wgmma_wait<0>();
    for (int i = 0; i < 32; i++) wgmma_hold(d[i]);
    if (how == 6) __syncthreads();
    if (how == 5 || how == 6) fill(0);  // the next tile's fill, of the same values
    for (int c = 0; c < 8; c++)
        for (int e = 0; e < 4; e++) out[(16 * warp + g + 8 * (e / 2)) * 64 + 8 * c + 2 * q + e % 2] = d[4 * c + e];
}
