// Kernels that run the kernel file's tensor-core wrappers (mma.sync, ldmatrix, wgmma) with their
// operands placed by CUTLASS CuTe's tables (tests/kernels/cute_layouts.cu prints them), not by the
// emulation's own reading: if the emulation's layout is CuTe's, the products are right; a lane,
// a register, a descriptor field read differently gives other numbers. Appended to the kernel
// file (they use its wrappers), CPU build only (test_cute_layouts.py).

// mma.sync m16n8k16: a[m + 16 k], b[n + 8 k] bf16 bits; thread t's value v of A is a[amap[8 t + v]]
// (register v / 2, low half first), of B b[bmap[4 t + v]]; its D value v lands at out[cmap[4 t + v]].
extern "C" __global__ void cute_mma(const unsigned short* __restrict__ a, const unsigned short* __restrict__ b,
                                    const int* __restrict__ amap, const int* __restrict__ bmap,
                                    const int* __restrict__ cmap, float* __restrict__ out) {
    const int t = threadIdx.x;
    u32 af[4], bf[2];
    for (int j = 0; j < 4; j++) af[j] = (u32)a[amap[8 * t + 2 * j]] | (u32)a[amap[8 * t + 2 * j + 1]] << 16;
    for (int j = 0; j < 2; j++) bf[j] = (u32)b[bmap[4 * t + 2 * j]] | (u32)b[bmap[4 * t + 2 * j + 1]] << 16;
    const float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    float d[4];
    mma_bf16_m16n8k16(d, af, bf, c);
    for (int v = 0; v < 4; v++) out[cmap[4 * t + v]] = d[v];
}

// ldmatrix .x1/.x2/.x4 (.trans): a shared tile of 32 rows of 8 16-bit codes, row r element c = 8 r
// + c; lane t passes the address of row rows[t]; out[4 t + j] = its register j.
extern "C" __global__ void cute_ldmatrix(const int* __restrict__ rows, u32* __restrict__ out, int x, int trans) {
    __shared__ __align__(16) unsigned short tile[32][8];
    const int t = threadIdx.x;
    for (int i = t; i < 256; i += 32) tile[i / 8][i % 8] = (unsigned short)i;
    __syncthreads();
    u32 r[4] = {0, 0, 0, 0};
    const void* row = &tile[rows[t]][0];
    if (x == 1 && !trans) ldmatrix<1, false>(r, row);
    if (x == 2 && !trans) ldmatrix<2, false>(r, row);
    if (x == 4 && !trans) ldmatrix<4, false>(r, row);
    if (x == 1 && trans) ldmatrix<1, true>(r, row);
    if (x == 2 && trans) ldmatrix<2, true>(r, row);
    if (x == 4 && trans) ldmatrix<4, true>(r, row);
    for (int j = 0; j < 4; j++) out[4 * t + j] = r[j];
}

// wgmma m64nNk16 RS, B (N x 16, (n, k)) placed in dynamic shared memory at the element offsets
// CuTe's tile layout gives (offsets[16 n + k]) and read through CuTe's descriptor `desc` (its
// start field replaced by this tile's); a[m + 64 k] bf16 placed by CuTe's A table, D by its C table.
template <int N, bool MN_MAJOR>
__device__ void cute_wgmma(const unsigned short* __restrict__ a, const unsigned short* __restrict__ b,
                           const int* __restrict__ offsets, const int* __restrict__ amap,
                           const int* __restrict__ cmap, unsigned long long desc, float* __restrict__ out) {
    extern __shared__ __align__(128) unsigned char cute_smem[];
    unsigned short* tile = (unsigned short*)cute_smem;
    const int t = threadIdx.x;
    for (int i = t; i < 16 * N; i += blockDim.x) tile[offsets[i]] = b[i];
    fence_proxy_async();
    __syncthreads();
    const unsigned long long start = wgmma_desc(cute_smem, 0, 0) & 0x3fffull;
    desc = (desc & ~0x3fffull) | start;
    u32 af[4];
    for (int j = 0; j < 4; j++) af[j] = (u32)a[amap[8 * t + 2 * j]] | (u32)a[amap[8 * t + 2 * j + 1]] << 16;
    float d[N / 2];
    for (int i = 0; i < N / 2; i++) d[i] = 0.0f;
    wgmma_fence();
    wgmma_bf16_m64nNk16<N, MN_MAJOR>(d, af, desc, false);
    wgmma_commit();
    wgmma_wait<0>();
    for (int v = 0; v < N / 2; v++) out[cmap[(N / 2) * t + v]] = d[v];
}

extern "C" __global__ void cute_wgmma_n64_kmajor(const unsigned short* __restrict__ a, const unsigned short* __restrict__ b,
                                          const int* __restrict__ offsets, const int* __restrict__ amap,
                                          const int* __restrict__ cmap, unsigned long long desc, float* __restrict__ out) {
    cute_wgmma<64, false>(a, b, offsets, amap, cmap, desc, out);
}
extern "C" __global__ void cute_wgmma_n64_mnmajor(const unsigned short* __restrict__ a, const unsigned short* __restrict__ b,
                                          const int* __restrict__ offsets, const int* __restrict__ amap,
                                          const int* __restrict__ cmap, unsigned long long desc, float* __restrict__ out) {
    cute_wgmma<64, true>(a, b, offsets, amap, cmap, desc, out);
}
extern "C" __global__ void cute_wgmma_n128_kmajor(const unsigned short* __restrict__ a, const unsigned short* __restrict__ b,
                                          const int* __restrict__ offsets, const int* __restrict__ amap,
                                          const int* __restrict__ cmap, unsigned long long desc, float* __restrict__ out) {
    cute_wgmma<128, false>(a, b, offsets, amap, cmap, desc, out);
}
extern "C" __global__ void cute_wgmma_n128_mnmajor(const unsigned short* __restrict__ a, const unsigned short* __restrict__ b,
                                          const int* __restrict__ offsets, const int* __restrict__ amap,
                                          const int* __restrict__ cmap, unsigned long long desc, float* __restrict__ out) {
    cute_wgmma<128, true>(a, b, offsets, amap, cmap, desc, out);
}

// The kernel file's own descriptor encoding, for a tile at the start of dynamic shared memory
// with the given LBO and SBO (kernel6's, read from its source by the test): out[0].
extern "C" __global__ void cute_file_desc(unsigned long long* __restrict__ out, unsigned lbo, unsigned sbo) {
    extern __shared__ __align__(128) unsigned char cute_desc_smem[];
    if (threadIdx.x == 0) out[0] = wgmma_desc(cute_desc_smem, lbo, sbo);
}

// wgmma m64n64k16 SS: A (64 x 16, (m, k)) from shared memory too, placed at the element offsets
// CuTe's A tile gives (offsets_a[16 m + k]) from byte 4096 on and read through CuTe's descriptor
// desc_a (its start replaced by that tile's); the warpgroup's value v, at the tile's coordinate
// (v % 64, v / 64), holds the element of a that CuTe's SS A table names for it (aorder[v], an index
// m + 64 k): with CuTe's table, the emulation must read A(m, k) there; B as in
// cute_wgmma (N 64, K-major); D by CuTe's C table. The SS form is called through the emulation
// (the kernel file has no wrapper for it yet).
template <bool TRANS_A>
__device__ void cute_wgmma_ss(const unsigned short* __restrict__ a, const unsigned short* __restrict__ b,
                              const int* __restrict__ offsets_a, const int* __restrict__ offsets_b,
                              const int* __restrict__ aorder, const int* __restrict__ cmap,
                              unsigned long long desc_a, unsigned long long desc_b, float* __restrict__ out) {
    extern __shared__ __align__(128) unsigned char cute_ss_smem[];
    unsigned short* b_tile = (unsigned short*)cute_ss_smem;
    unsigned short* a_tile = (unsigned short*)(cute_ss_smem + 4096);
    const int t = threadIdx.x;
    for (int i = t; i < 16 * 64; i += blockDim.x) b_tile[offsets_b[i]] = b[i];
    for (int v = t; v < 64 * 16; v += blockDim.x)  // value v at the tile's coordinate (v % 64, v / 64)
        a_tile[offsets_a[16 * (v % 64) + v / 64]] = a[aorder[v]];
    fence_proxy_async();
    __syncthreads();
    desc_b = (desc_b & ~0x3fffull) | (wgmma_desc(cute_ss_smem, 0, 0) & 0x3fffull);
    desc_a = (desc_a & ~0x3fffull) | (wgmma_desc(cute_ss_smem + 4096, 0, 0) & 0x3fffull);
    float d[32];
    for (int i = 0; i < 32; i++) d[i] = 0.0f;
    wgmma_fence();
    ptx_emulated::wgmma_m64nNk16_bf16_ss(64, TRANS_A, false, d, desc_a, desc_b, false);
    wgmma_commit();
    wgmma_wait<0>();
    for (int v = 0; v < 32; v++) out[cmap[32 * t + v]] = d[v];
}

extern "C" __global__ void cute_wgmma_ss_kmajor(const unsigned short* __restrict__ a, const unsigned short* __restrict__ b,
                                                const int* __restrict__ offsets_a, const int* __restrict__ offsets_b,
                                                const int* __restrict__ aorder, const int* __restrict__ cmap,
                                                unsigned long long desc_a, unsigned long long desc_b, float* __restrict__ out) {
    cute_wgmma_ss<false>(a, b, offsets_a, offsets_b, aorder, cmap, desc_a, desc_b, out);
}
extern "C" __global__ void cute_wgmma_ss_mnmajor(const unsigned short* __restrict__ a, const unsigned short* __restrict__ b,
                                                 const int* __restrict__ offsets_a, const int* __restrict__ offsets_b,
                                                 const int* __restrict__ aorder, const int* __restrict__ cmap,
                                                 unsigned long long desc_a, unsigned long long desc_b, float* __restrict__ out) {
    cute_wgmma_ss<true>(a, b, offsets_a, offsets_b, aorder, cmap, desc_a, desc_b, out);
}
