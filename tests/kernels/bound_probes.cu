// Kernels whose static bound is known by hand, for tests/test_bound.py (`andrea bench --bound`).
// Each hot loop does one kind of work only:
//   ffma_loop     8 independent FFMA chains, unrolled: FP32 pipe and issue (one FFMA per slot)
//   shared_copy   float4 from one shared buffer to the other: 512 bytes in, 512 out per warp
//   global_copy   float4 grid-stride copy: what the launch moves crosses HBM
//   mma_loop      two independent mma.sync m16n8k16 bf16 chains: the tensor cores
//   spilling      96 live floats under __launch_bounds__(1024, 2) (32 registers): spills
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
