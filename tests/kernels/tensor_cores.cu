// Check kernels for the tensor-core building blocks of cuda/microgpt_cuda.cu, compiled appended to
// that file: on the CPU build they run the emulated bodies
// (tests/backends/cpu_runtime/test_tensor_cores.py compares them with NumPy), on a GPU the PTX ones (scripts/tensor_core_check.py compares the two). One warp
// each, but the wgmma checks: one warpgroup or more.

// y[i] = exp2_approx_ftz(x[i]): ex2.approx.ftz.f32 (emulated on the CPU build).
extern "C" __global__ void check_ex2_ftz(const float* __restrict__ x, float* __restrict__ y, int n) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = exp2_approx_ftz(x[i]);
}

// bf16x2[i] = pack_bf16x2(x[i], -x[i]) (x[i] in the low half), tf32[i] = f32_to_tf32(x[i]).
extern "C" __global__ void check_conversions(const float* __restrict__ x, u32* __restrict__ bf16x2,
                                             u32* __restrict__ tf32, int n) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        bf16x2[i] = pack_bf16x2(x[i], -x[i]);
        tf32[i] = f32_to_tf32(x[i]);
    }
}

// D (16x8) = A (16x16) · B + C in bf16, the fragments gathered by the layout formulas (not by
// ldmatrix), so this checks mma alone. a: (16, 16) row-major bf16; bn: B n-major, (8, 16) bf16,
// the way K rows arrive; c, d: (16, 8) fp32.
extern "C" __global__ void check_mma_bf16(const unsigned short* __restrict__ a,
                                          const unsigned short* __restrict__ bn, const float* __restrict__ c,
                                          float* __restrict__ d) {
    const int lane = threadIdx.x, g = lane / 4, t = lane % 4;
    const u32* a2 = (const u32*)a;  // (16, 8) pairs: a2[r * 8 + col / 2] holds cols col, col + 1
    const u32* b2 = (const u32*)bn;
    const u32 af[4] = {a2[g * 8 + t], a2[(g + 8) * 8 + t], a2[g * 8 + t + 4], a2[(g + 8) * 8 + t + 4]};
    const u32 bf[2] = {b2[g * 8 + t], b2[g * 8 + t + 4]};
    const float cf[4] = {c[g * 8 + 2 * t], c[g * 8 + 2 * t + 1], c[(g + 8) * 8 + 2 * t], c[(g + 8) * 8 + 2 * t + 1]};
    float df[4];
    mma_bf16_m16n8k16(df, af, bf, cf);
    d[g * 8 + 2 * t] = df[0]; d[g * 8 + 2 * t + 1] = df[1];
    d[(g + 8) * 8 + 2 * t] = df[2]; d[(g + 8) * 8 + 2 * t + 1] = df[3];
}

// D (16x8) = A (16x8) · B + C in tf32; bn: B n-major (8, 8). convert = 0 passes the raw fp32 bits,
// which the tensor core truncates (the bug of a forgotten f32_to_tf32).
extern "C" __global__ void check_mma_tf32(const float* __restrict__ a, const float* __restrict__ bn,
                                          const float* __restrict__ c, float* __restrict__ d, int convert) {
    const int lane = threadIdx.x, g = lane / 4, t = lane % 4;
    const float av[4] = {a[g * 8 + t], a[(g + 8) * 8 + t], a[g * 8 + t + 4], a[(g + 8) * 8 + t + 4]};
    const float bv[2] = {bn[g * 8 + t], bn[g * 8 + t + 4]};
    u32 af[4], bf[2];
    for (int i = 0; i < 4; ++i) af[i] = convert ? f32_to_tf32(av[i]) : __float_as_uint(av[i]);
    for (int i = 0; i < 2; ++i) bf[i] = convert ? f32_to_tf32(bv[i]) : __float_as_uint(bv[i]);
    const float cf[4] = {c[g * 8 + 2 * t], c[g * 8 + 2 * t + 1], c[(g + 8) * 8 + 2 * t], c[(g + 8) * 8 + 2 * t + 1]};
    float df[4];
    mma_tf32_m16n8k8(df, af, bf, cf);
    d[g * 8 + 2 * t] = df[0]; d[g * 8 + 2 * t + 1] = df[1];
    d[(g + 8) * 8 + 2 * t] = df[2]; d[(g + 8) * 8 + 2 * t + 1] = df[3];
}

// Every ldmatrix form on a (32, 32) 16-bit matrix in shared memory (rows padded to 40 values, 80
// bytes, so each row stays 16-byte aligned). Lane L points at row row_of_lane[L], columns
// 8 * col8_of_lane[L] .. + 7. out: (6, 32, 4) registers for x1, x2, x4, x1.trans, x2.trans, x4.trans.
extern "C" __global__ void check_ldmatrix(const unsigned short* __restrict__ m, const int* __restrict__ row_of_lane,
                                          const int* __restrict__ col8_of_lane, u32* __restrict__ out) {
    __shared__ __align__(16) unsigned short tile[32][40];
    const int lane = threadIdx.x;
    for (int i = lane; i < 32 * 32; i += 32) tile[i / 32][i % 32] = m[i];
    __syncthreads();
    const unsigned short* row = &tile[row_of_lane[lane]][8 * col8_of_lane[lane]];
    u32 r[6][4] = {};
    ldmatrix<1, false>(r[0], row);
    ldmatrix<2, false>(r[1], row);
    ldmatrix<4, false>(r[2], row);
    ldmatrix<1, true>(r[3], row);
    ldmatrix<2, true>(r[4], row);
    ldmatrix<4, true>(r[5], row);
    for (int f = 0; f < 6; ++f)
        for (int i = 0; i < 4; ++i) out[(f * 32 + lane) * 4 + i] = r[f][i];
}

// cp.async in two groups per thread: group A copies src row 2·lane (4 floats), group B copies row
// 2·lane+1, or zero-fills it on odd lanes. Snapshots of the shared rows: after_wait1 (group A
// retired, B may still be in flight) and after_wait0 (both); before_wait reads A's row right
// after the copy is issued (the CPU build shows NaN there; on a GPU it is undefined).
extern "C" __global__ void check_cp_async(const float* __restrict__ src, float* __restrict__ before_wait,
                                          float* __restrict__ after_wait1, float* __restrict__ after_wait0) {
    __shared__ __align__(16) float rows[64][4];
    const int lane = threadIdx.x;
    cp_async16(rows[2 * lane], src + 8 * lane, true);
    cp_async_commit();
    for (int i = 0; i < 4; ++i) before_wait[4 * lane + i] = rows[2 * lane][i];
    cp_async16(rows[2 * lane + 1], src + 8 * lane + 4, lane % 2 == 0);
    cp_async_commit();
    cp_async_wait<1>();
    for (int i = 0; i < 4; ++i) after_wait1[8 * lane + i] = rows[2 * lane][i];
    for (int i = 0; i < 4; ++i) after_wait1[8 * lane + 4 + i] = rows[2 * lane + 1][i];
    cp_async_wait<0>();
    for (int i = 0; i < 4; ++i) after_wait0[8 * lane + i] = rows[2 * lane][i];
    for (int i = 0; i < 4; ++i) after_wait0[8 * lane + 4 + i] = rows[2 * lane + 1][i];
}

// What a GPU leaves undefined, for the CPU build to refuse (never run these on a GPU).
// how = 0: half the warp calls mma; 1: ldmatrix on a global address; 2: a row address 2 bytes
// off 16-byte alignment; 3: half the warp at ldmatrix.x1, the other half at .x2; 4: a correct
// ldmatrix.x1 (misused only when the block is not whole warps).
extern "C" __global__ void misuse_tensor_cores(const unsigned short* __restrict__ global, float* __restrict__ out,
                                               int how) {
    __shared__ __align__(16) unsigned short tile[8][8];
    const int lane = threadIdx.x % 32;
    for (int i = lane; i < 64; i += 32) tile[i / 8][i % 8] = (unsigned short)i;
    __syncthreads();
    u32 r[2] = {0, 0};
    const u32 a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
    float c[4] = {0, 0, 0, 0};
    if (how == 0 && lane < 16) mma_bf16_m16n8k16(c, a, b, c);
    if (how == 1) ldmatrix<1, false>(r, global + 8 * (lane % 8));
    if (how == 2) ldmatrix<1, false>(r, &tile[lane % 8][0] + 1);
    if (how == 3) {
        if (lane < 16) ldmatrix<1, false>(r, &tile[lane % 8][0]);
        else ldmatrix<2, false>(r, &tile[lane % 8][0]);
    }
    if (how == 4) ldmatrix<1, false>(r, &tile[lane % 8][0]);
    out[threadIdx.x] = c[0] + (float)r[0];
}

// wgmma: out (64 WG x N, fp32) = a (64 WG x K, bf16, row-major) · b (K x N, bf16, row-major)
// (+ c when flags & 1), K 64, by WG warpgroups (blockDim 128 WG), each its own 64 rows, 4
// wgmmas in a row (a constant trip count, unrolled: ptxas pipelines them; a loop of unknown
// length makes it serialize every wgmma, "C7515 Potential Performance Loss"). B is staged in dynamic shared memory (K N 2 bytes) in the no-swizzle
// canonical layout TRANS_B picks: core matrix (k / 8, n / 8) at (k / 8) LBO + (n / 8) SBO, inside
// it K-major (n % 8) 16 + (k % 8) 2 or MN-major (k % 8) 16 + (n % 8) 2. flags & 4 stores the
// core matrices n-blocks first (SBO 128) instead of k-blocks first (LBO 128); k-step s starts at
// byte 2 s LBO. flags & 2 commits each wgmma as its own group (the accumulation chains across
// groups in flight). how: 0 correct; misuse the CPU build reports or poisons: 1 D read before
// the wait, 2 B overwritten before the wait, 3 a descriptor reaching past the dynamic shared
// bytes, 4 a descriptor start not 16-byte aligned, 5 a descriptor of static shared memory, 6
// no barrier between filling B and the wgmma, 7 B written again (the same values) while the
// wgmmas are in flight, without a barrier: no change to see, a race for racecheck; 8 the last
// warp of each warpgroup issues one wgmma more than the others, first; 9 a second group in
// flight at wgmma_wait<1> (D of the first lands, of the second stays NaN); 10 the descriptor's
// layout type says 128-byte swizzle, 11 its base offset is 1 (neither is decoded: refused).
template <int N, bool TRANS_B>
__device__ void wgmma_check(const unsigned short* __restrict__ a, const unsigned short* __restrict__ b,
                            const float* __restrict__ c, float* __restrict__ out, int flags, int how) {
    constexpr int K = 64;
    extern __shared__ __align__(128) unsigned char wgmma_smem[];
    __shared__ __align__(16) unsigned char static_tile[16];
    unsigned short* tile = (unsigned short*)wgmma_smem;
    const u32 lbo = (flags & 4) ? 128u * (N / 8) : 128u, sbo = (flags & 4) ? 128u : 128u * (K / 8);
    auto fill = [&] {
        for (int i = threadIdx.x; i < K * N; i += blockDim.x) {
            const int k = i / N, n = i % N;
            const u32 inner = TRANS_B ? (k % 8) * 16 + (n % 8) * 2 : (n % 8) * 16 + (k % 8) * 2;
            tile[((k / 8) * lbo + (n / 8) * sbo + inner) / 2] = b[i];
        }
    };
    fill();
    if (how != 6) {  // 6: the bug of no barrier between filling B and the wgmmas reading it (a race)
        fence_proxy_async();
        __syncthreads();
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int r0 = 64 * (warp / 4) + 16 * (warp % 4);  // this warp's 16 rows of its warpgroup's 64
    const u32* a2 = (const u32*)a;
    const int K2 = K / 2;
    float d[N / 2];
    for (int cc = 0; cc < N / 8; cc++)
        for (int e = 0; e < 4; e++)
            d[4 * cc + e] = (flags & 1) ? c[(r0 + g + 8 * (e / 2)) * N + 8 * cc + 2 * t + e % 2] : 0.0f;
    for (int i = 0; i < N / 2; i++) wgmma_hold(d[i]);
    wgmma_fence();
#if !WGMMA_PTX  // (natively a wgmma under a divergent branch makes ptxas serialize them all, C7519)
    if (how == 8 && warp % 4 == 3) {  // the bug: one warp of the warpgroup issues an extra wgmma
        const u32 zero[4] = {0, 0, 0, 0};
        wgmma_bf16_m64nNk16<N, TRANS_B>(d, zero, wgmma_desc(wgmma_smem, lbo, sbo), true);
    }
#endif
#pragma unroll
    for (int s = 0; s < K / 16; s++) {
        const u32 af[4] = {a2[(r0 + g) * K2 + 8 * s + t], a2[(r0 + g + 8) * K2 + 8 * s + t],
                           a2[(r0 + g) * K2 + 8 * s + t + 4], a2[(r0 + g + 8) * K2 + 8 * s + t + 4]};
        const unsigned char* start = wgmma_smem + 2 * s * lbo;
        if (how == 3) start = wgmma_smem + K * N * 2 - 16;
        if (how == 4) start += 8;
        if (how == 5) start = static_tile;
        unsigned long long desc = wgmma_desc(start, lbo, sbo);
        if (how == 10) desc |= 1ull << 62;  // layout type 1: SWIZZLE_128B
        if (how == 11) desc |= 1ull << 49;  // base offset 1
        wgmma_bf16_m64nNk16<N, TRANS_B>(d, af, desc, (flags & 1) || s > 0);
        if (flags & 2) wgmma_commit();
    }
    wgmma_commit();
#if !WGMMA_PTX  // (natively ptxas would see the early reads and wait for the wgmmas at every one)
    if (how == 9) {  // wait_group 1 with a newer group in flight: it retires d's, not d2's
        float d2[N / 2];
        const u32 af[4] = {a2[(r0 + g) * K2 + t], a2[(r0 + g + 8) * K2 + t], a2[(r0 + g) * K2 + t + 4],
                           a2[(r0 + g + 8) * K2 + t + 4]};
        wgmma_bf16_m64nNk16<N, TRANS_B>(d2, af, wgmma_desc(wgmma_smem, lbo, sbo), false);
        wgmma_commit();
        wgmma_wait<1>();
        for (int cc = 0; cc < N / 8; cc++)
            for (int e = 0; e < 4; e++)  // d landed; d2 still NaN, or the element reads -1
                out[(r0 + g + 8 * (e / 2)) * N + 8 * cc + 2 * t + e % 2] = d2[4 * cc + e] != d2[4 * cc + e]
                                                                              ? d[4 * cc + e] : -1.0f;
        wgmma_wait<0>();
        return;
    }
    if (how == 1) {  // the bug: D read while the wgmmas are in flight
        for (int cc = 0; cc < N / 8; cc++)
            for (int e = 0; e < 4; e++) out[(r0 + g + 8 * (e / 2)) * N + 8 * cc + 2 * t + e % 2] = d[4 * cc + e];
        return;
    }
#endif
    if (how == 2) {  // the bug: B overwritten while the tensor cores may still read it
        __syncthreads();
        for (int i = threadIdx.x; i < K * N; i += blockDim.x) tile[i] = 0;
    }
    if (how == 7) fill();  // the same values again, no barrier: unchanged, yet a race
    wgmma_wait<0>();
    for (int i = 0; i < N / 2; i++) wgmma_hold(d[i]);
    for (int cc = 0; cc < N / 8; cc++)
        for (int e = 0; e < 4; e++) out[(r0 + g + 8 * (e / 2)) * N + 8 * cc + 2 * t + e % 2] = d[4 * cc + e];
}

// (written out: the CPU build finds kernels by their extern "C" __global__ text, not through macros)
extern "C" __global__ void check_wgmma_n64_kmajor(const unsigned short* __restrict__ a,
        const unsigned short* __restrict__ b, const float* __restrict__ c, float* __restrict__ out,
        int flags, int how) {
    wgmma_check<64, false>(a, b, c, out, flags, how);
}
extern "C" __global__ void check_wgmma_n64_mnmajor(const unsigned short* __restrict__ a,
        const unsigned short* __restrict__ b, const float* __restrict__ c, float* __restrict__ out,
        int flags, int how) {
    wgmma_check<64, true>(a, b, c, out, flags, how);
}
extern "C" __global__ void check_wgmma_n128_kmajor(const unsigned short* __restrict__ a,
        const unsigned short* __restrict__ b, const float* __restrict__ c, float* __restrict__ out,
        int flags, int how) {
    wgmma_check<128, false>(a, b, c, out, flags, how);
}
extern "C" __global__ void check_wgmma_n128_mnmajor(const unsigned short* __restrict__ a,
        const unsigned short* __restrict__ b, const float* __restrict__ c, float* __restrict__ out,
        int flags, int how) {
    wgmma_check<128, true>(a, b, c, out, flags, how);
}
