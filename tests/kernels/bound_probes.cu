// Kernels whose static bound is known by hand, for tests/bench/bound/test_model.py
// (`andrea bench --bound`).
// Each hot loop does one kind of work only:
//   ffma_loop     8 independent FFMA chains, unrolled: FP32 pipe and issue (one FFMA per slot)
//   shared_copy   float4 from one shared buffer to the other: 512 bytes in, 512 out per warp
//   shared_copy_4way  the same with lane l at float4 4l: each quarter-warp's 8 lanes on two groups
//                 of 4 banks, 4 distinct words in each bank: 4 wavefronts a phase, 16 per access
//   global_copy   float4 grid-stride copy: what the launch moves crosses HBM
//   mma_loop      two independent mma.sync m16n8k16 bf16 chains: the tensor cores
//   spilling      96 live floats under __launch_bounds__(1024, 2) (32 registers): spills
//   wgmma_loop    wgmma m64n128k16 bf16 chains, A from registers, B from shared memory through a
//                 descriptor: the tensor cores, B counted once per warpgroup instruction
//   wgmma_ss_loop wgmma m64n64k16 bf16, A and B both through descriptors
// The wgmma probes are Hopper's own (sm_90a); compiled for another architecture they are empty.
// Their numbers are nonsense (B is whatever the set-up stored): only the instruction mix counts.
extern "C" __global__ void ffma_loop(float* out, int n) {
    float a0 = threadIdx.x, a1 = a0 + 1, a2 = a0 + 2, a3 = a0 + 3, a4 = a0 + 4, a5 = a0 + 5, a6 = a0 + 6, a7 = a0 + 7;
    const float b = out[0], c = out[1];
    for (int i = 0; i < n; ++i) {
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            a0 = fmaf(a0, b, c); a1 = fmaf(a1, b, c); a2 = fmaf(a2, b, c); a3 = fmaf(a3, b, c);
            a4 = fmaf(a4, b, c); a5 = fmaf(a5, b, c); a6 = fmaf(a6, b, c); a7 = fmaf(a7, b, c);
        }
    }
    out[threadIdx.x] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}

extern "C" __global__ void shared_copy(float4* out, int n) {
    __shared__ float4 buf[2][256];
    buf[0][threadIdx.x] = make_float4(threadIdx.x, 0, 0, 0);
    __syncthreads();
    for (int i = 0; i < n; ++i) {
        buf[(i + 1) & 1][threadIdx.x ^ (i & 31)] = buf[i & 1][threadIdx.x];
    }
    out[threadIdx.x] = buf[n & 1][threadIdx.x];
}

extern "C" __global__ void shared_copy_4way(float4* out, int n) {
    __shared__ float4 buf[2][1024];
    buf[0][4 * threadIdx.x] = make_float4(threadIdx.x, 0, 0, 0);
    __syncthreads();
    for (int i = 0; i < n; ++i) {
        buf[(i + 1) & 1][4 * (threadIdx.x ^ (i & 31))] = buf[i & 1][4 * threadIdx.x];
    }
    out[threadIdx.x] = buf[n & 1][4 * threadIdx.x];
}

extern "C" __global__ void global_copy(const float4* __restrict__ in, float4* __restrict__ out, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        out[i] = in[i];
}

extern "C" __global__ void mma_loop(float* out, int n) {
    unsigned a0 = threadIdx.x, a1 = a0 * 3, a2 = a0 * 5, a3 = a0 * 7, b0 = a0 * 11, b1 = a0 * 13;
    float c0 = 0, c1 = 0, c2 = 0, c3 = 0, d0 = 0, d1 = 0, d2 = 0, d3 = 0;
    for (int i = 0; i < n; ++i) {
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                         : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                         : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
        }
    }
    out[threadIdx.x] = c0 + c1 + c2 + c3 + d0 + d1 + d2 + d3;
}

extern "C" __global__ void __launch_bounds__(1024, 2) spilling(float* out, const int* idx, int n) {
    float v[96];
#pragma unroll
    for (int j = 0; j < 96; ++j) v[j] = out[j * 1024 + threadIdx.x];
    for (int i = 0; i < n; ++i) {
#pragma unroll
        for (int j = 0; j < 96; ++j) v[j] = v[j] * v[(j + 1) % 96] + 1.0f;
    }
#pragma unroll
    for (int j = 0; j < 96; ++j) out[j * 1024 + threadIdx.x] = v[j];
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// D (64 x 128 fp32, 64 per thread) += A (64 x 16, this warp's 16 rows in a[4]) · B (16 x 128, shared memory)
__device__ __forceinline__ void wgmma_rs_m64n128k16(float (&d)[64], const unsigned (&a)[4], unsigned long long desc_b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
                 "{%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
}

// D (64 x 64 fp32, 32 per thread) += A (64 x 16, shared memory) · B (16 x 64, shared memory)
__device__ __forceinline__ void wgmma_ss_m64n64k16(float (&d)[32], unsigned long long desc_a, unsigned long long desc_b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
                 "%32, %33, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(desc_a), "l"(desc_b));
}

// A no-swizzle descriptor of a shared array: 8x8 core matrices, LBO 128 bytes (along K), SBO 256 (along N)
__device__ __forceinline__ unsigned long long probe_desc(const void* smem) {
    const unsigned addr = (unsigned)__cvta_generic_to_shared(smem);
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | (128ull >> 4) << 16 | (256ull >> 4) << 32;
}
#endif

// One warpgroup (128 threads) per block. Per trip, 4 wgmma in one commit group, then a wait.
extern "C" __global__ void wgmma_loop(float* out, int n) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    __shared__ __align__(128) unsigned short b[16 * 128];
    for (int i = threadIdx.x; i < 16 * 128; i += blockDim.x) b[i] = (unsigned short)i;
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    const unsigned long long desc_b = probe_desc(b);
    const unsigned a[4] = {threadIdx.x, threadIdx.x * 3, threadIdx.x * 5, threadIdx.x * 7};
    float d[64] = {};
    for (int i = 0; i < n; ++i) {
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int u = 0; u < 4; ++u) wgmma_rs_m64n128k16(d, a, desc_b);
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    }
    float s = 0;
#pragma unroll
    for (int j = 0; j < 64; ++j) s += d[j];
    out[threadIdx.x] = s;
#endif
}

extern "C" __global__ void wgmma_ss_loop(float* out, int n) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    __shared__ __align__(128) unsigned short ab[2][16 * 64];
    for (int i = threadIdx.x; i < 2 * 16 * 64; i += blockDim.x) ab[i / (16 * 64)][i % (16 * 64)] = (unsigned short)i;
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    const unsigned long long desc_a = probe_desc(ab[0]), desc_b = probe_desc(ab[1]);
    float d[32] = {};
    for (int i = 0; i < n; ++i) {
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int u = 0; u < 4; ++u) wgmma_ss_m64n64k16(d, desc_a, desc_b);
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    }
    float s = 0;
#pragma unroll
    for (int j = 0; j < 32; ++j) s += d[j];
    out[threadIdx.x] = s;
#endif
}
