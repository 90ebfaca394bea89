// microgpt_cuda.cu — the attention equation of one decoder-only transformer layer, stage by stage.
//
//     Attention(Q, K, V) = softmax(mask(Q · K^T / sqrt(d_k))) · V
//
// Every kernel works on H independent heads laid out one after the other (head h of a (H, T, d)
// tensor starts at h * T * d); the head is blockIdx.z, so one launch covers every head and a
// single head is just gridDim.z = 1. All data is float32, row-major, contiguous.
//
// Kernels, in the order of the equation (launch geometry as the launcher chooses it):
//
//   scores_kernel1   S = Q · K^T, unscaled                      (H,T,d_k),(H,T,d_k) -> (H,T,T)
//                    16x16 output tile per block, Q and K tiles staged in shared memory.
//                    grid (ceil(T/16), ceil(T/16), H), block (16, 16)
//   scale_kernel1    S' = S * scale, scale = 1/sqrt(d_k)        (n) -> (n), elementwise
//                    grid-stride loop; grid (min(ceil(n/256), 4096)), block (256)
//   mask_kernel1     S'[i][j] = -inf where key j is hidden from query i   (H,T,T) -> (H,T,T)
//                    hidden: j > i (the future), or i - j >= window when window > 0 (a sliding
//                    window: i sees i-window+1 .. i). grid (ceil(T/16), ceil(T/16), H), block (16, 16)
//   softmax_kernel1  P = row softmax of S', max-subtracted      (H,T,T) -> (H,T,T)
//                    one block per row; warp shuffles, then the warp results through shared
//                    memory. grid (T, 1, H), block (threads: a multiple of 32, <= 1024),
//                    shared_mem = (threads / 32) * sizeof(float)
//   softmax_kernel2  the same result, one warp per row; shuffles only, no shared memory
//                    grid (ceil(T/rows), 1, H), block (32, rows)
//   av_kernel1       O = P · V                                  (H,T,T),(H,T,d_v) -> (H,T,d_v)
//                    16x16 output tile per block, P and V tiles staged in shared memory;
//                    with causal != 0 it stops at the diagonal, since P is exactly 0 beyond it.
//                    grid (ceil(d_v/16), ceil(T/16), H), block (16, 16)
//   attention_fused_kernel1   O = softmax(mask(Q · K^T * scale)) · V in one pass, flash-style
//                    (H,T,d_k),(H,T,d_k),(H,T,d_v) -> (H,T,d_v); never writes a T×T matrix.
//                    One warp per query row, `rows` rows per block sharing K/V tiles of 32 keys
//                    in shared memory; online softmax; key tiles the mask removes are skipped.
//                    d_k, d_v <= 128. grid (ceil(T/rows), 1, H), block (32, rows),
//                    shared_mem = 4 * (rows * d_k + 32 * (d_k | 1) + 32 * d_v) bytes
//   attention_fused_kernel2   the same, with float4 shared-memory loads (4 values per load
//                    instruction instead of 1); needs d_k % 4 == 0 and d_v % 4 == 0.
//                    shared_mem = 4 * (rows * d_k + 32 * (d_k + 4) + 32 * d_v) bytes
//
// Every kernel is correct for any T >= 1 and d >= 1: partial tiles are padded with zeros on load
// and threads outside the matrix skip the store but still reach every __syncthreads().
// No host code lives here: the Python launchers (andrea_cli/backends/staged.py) load this file
// with cupy.RawModule on a GPU, or compile it for the CPU with cuda/cuda_cpu_runtime.h.

#define TILE 16

// NVRTC compiles without the C headers, so INFINITY is ours to define: the float with all
// exponent bits set and a zero mantissa. (The CPU build gets it from <cmath>.)
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif

// ------------------------------------------------------------------------------------------------
// scores: S = Q · K^T

extern "C" __global__ void scores_kernel1(const float* __restrict__ q,  // (H, T, d_k)
                                          const float* __restrict__ k,  // (H, T, d_k)
                                          float* __restrict__ scores,   // (H, T, T)
                                          int T, int d_k) {
    // q_tile[r][c] = Q[row0 + r][c0 + c]; k_tile[r][c] = K[col0 + r][c0 + c]. The +1 column
    // keeps threads of one warp on different shared-memory banks when they read k_tile[tx][c].
    __shared__ float q_tile[TILE][TILE + 1];
    __shared__ float k_tile[TILE][TILE + 1];

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;
    const long head = blockIdx.z;
    q += head * T * d_k;
    k += head * T * d_k;
    scores += head * T * T;

    const int i = row0 + ty;  // query position of this thread's output
    const int j = col0 + tx;  // key position of this thread's output
    float acc = 0.0f;
    for (int c0 = 0; c0 < d_k; c0 += TILE) {
        // Each thread loads one element of each tile; outside the matrices it loads 0, which
        // adds nothing to the dot product.
        const int qr = row0 + ty, kr = col0 + ty, c = c0 + tx;
        q_tile[ty][tx] = (qr < T && c < d_k) ? q[(long)qr * d_k + c] : 0.0f;
        k_tile[ty][tx] = (kr < T && c < d_k) ? k[(long)kr * d_k + c] : 0.0f;
        __syncthreads();  // the tiles are complete before anyone reads them
        for (int cc = 0; cc < TILE; ++cc) acc += q_tile[ty][cc] * k_tile[tx][cc];
        __syncthreads();  // everyone is done reading before the next tiles overwrite them
    }
    if (i < T && j < T) scores[(long)i * T + j] = acc;
}

// ------------------------------------------------------------------------------------------------
// scale: S' = S / sqrt(d_k), written as a multiply by the launcher's 1/sqrt(d_k): one float
// multiply per score. Out of place, so the unscaled scores stay available for statistics.

extern "C" __global__ void scale_kernel1(const float* __restrict__ in,  // (n)
                                         float* __restrict__ out,       // (n)
                                         long n, float scale) {
    const long stride = (long)gridDim.x * blockDim.x;
    for (long idx = (long)blockIdx.x * blockDim.x + threadIdx.x; idx < n; idx += stride)
        out[idx] = in[idx] * scale;
}

// ------------------------------------------------------------------------------------------------
// mask: the future (and, with a window, the distant past) gets -inf. Not -1e9: exp(-inf) is
// exactly 0, so masked weights are exactly 0 and a fully masked row is detectable (its max is
// -inf) instead of silently becoming a uniform distribution.

extern "C" __global__ void mask_kernel1(const float* __restrict__ in,  // (H, T, T)
                                        float* __restrict__ out,       // (H, T, T)
                                        int T, int window) {
    const int j = blockIdx.x * TILE + threadIdx.x;  // key
    const int i = blockIdx.y * TILE + threadIdx.y;  // query
    if (i >= T || j >= T) return;
    const long idx = (long)blockIdx.z * T * T + (long)i * T + j;
    const bool future = j > i;
    const bool too_far = window > 0 && i - j >= window;
    out[idx] = (future || too_far) ? -INFINITY : in[idx];
}

// ------------------------------------------------------------------------------------------------
// softmax: P[i][j] = exp(S'[i][j] - m_i) / sum_j exp(S'[i][j] - m_i), m_i = max_j S'[i][j].
// Subtracting the row max changes nothing mathematically and keeps exp() from overflowing:
// unscaled scores at d_k = 4096 reach 200+, and expf(89) is already inf in float32.

__device__ __forceinline__ float warp_max(float x) {
    for (int offset = 16; offset > 0; offset >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffff, x, offset));
    return x;  // every lane holds the warp's max
}

__device__ __forceinline__ float warp_sum(float x) {
    for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffff, x, offset);
    return x;  // every lane holds the warp's sum
}

// Reduce one value per thread to one value for the block: shuffles within each warp, then warp 0
// combines the per-warp results from shared memory. blockDim.x is a multiple of 32.
__device__ float block_reduce(float x, float* warp_results, bool is_max) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, n_warps = blockDim.x / 32;
    x = is_max ? warp_max(x) : warp_sum(x);
    if (lane == 0) warp_results[warp] = x;
    __syncthreads();
    if (warp == 0) {
        x = lane < n_warps ? warp_results[lane] : (is_max ? -INFINITY : 0.0f);
        x = is_max ? warp_max(x) : warp_sum(x);
        if (lane == 0) warp_results[0] = x;
    }
    __syncthreads();
    const float result = warp_results[0];
    __syncthreads();  // warp_results is reused by the next reduction
    return result;
}

extern "C" __global__ void softmax_kernel1(const float* __restrict__ in,  // (H, T, T)
                                           float* __restrict__ out,       // (H, T, T)
                                           int T) {
    extern __shared__ float warp_results[];  // (blockDim.x / 32)
    const long row = (long)blockIdx.z * T * T + (long)blockIdx.x * T;
    const float* x = in + row;
    float* p = out + row;

    float m = -INFINITY;
    for (int j = threadIdx.x; j < T; j += blockDim.x) m = fmaxf(m, x[j]);
    m = block_reduce(m, warp_results, true);

    // A row whose every entry is masked has m = -inf; exp(-inf - -inf) would be NaN. Such a row
    // attends to nothing: give it zeros rather than NaNs (the Python side reports it).
    if (m == -INFINITY) {
        for (int j = threadIdx.x; j < T; j += blockDim.x) p[j] = 0.0f;
        return;  // every thread of the block takes this branch: m is the same for all
    }

    float sum = 0.0f;
    for (int j = threadIdx.x; j < T; j += blockDim.x) sum += expf(x[j] - m);
    sum = block_reduce(sum, warp_results, false);

    const float inv_sum = 1.0f / sum;
    for (int j = threadIdx.x; j < T; j += blockDim.x) p[j] = expf(x[j] - m) * inv_sum;
}

extern "C" __global__ void softmax_kernel2(const float* __restrict__ in,  // (H, T, T)
                                           float* __restrict__ out,       // (H, T, T)
                                           int T) {
    // One warp per row: for short rows a whole block per row leaves most threads idle.
    const int i = blockIdx.x * blockDim.y + threadIdx.y;
    const int lane = threadIdx.x;
    if (i >= T) return;  // the whole warp leaves together, so no shuffle loses a partner
    const long row = (long)blockIdx.z * T * T + (long)i * T;
    const float* x = in + row;
    float* p = out + row;

    float m = -INFINITY;
    for (int j = lane; j < T; j += 32) m = fmaxf(m, x[j]);
    m = warp_max(m);
    if (m == -INFINITY) {
        for (int j = lane; j < T; j += 32) p[j] = 0.0f;
        return;
    }
    float sum = 0.0f;
    for (int j = lane; j < T; j += 32) sum += expf(x[j] - m);
    const float inv_sum = 1.0f / warp_sum(sum);
    for (int j = lane; j < T; j += 32) p[j] = expf(x[j] - m) * inv_sum;
}

// ------------------------------------------------------------------------------------------------
// av: O = P · V, output[i] = sum_j P[i][j] · V[j].

extern "C" __global__ void av_kernel1(const float* __restrict__ weights,  // (H, T, T)
                                      const float* __restrict__ v,        // (H, T, d_v)
                                      float* __restrict__ out,            // (H, T, d_v)
                                      int T, int d_v, int causal) {
    __shared__ float p_tile[TILE][TILE + 1];  // p_tile[r][c] = P[row0 + r][j0 + c]
    __shared__ float v_tile[TILE][TILE + 1];  // v_tile[r][c] = V[j0 + r][col0 + c]

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;
    const long head = blockIdx.z;
    weights += head * T * T;
    v += head * T * d_v;
    out += head * T * d_v;

    // Under a causal mask P[i][j] = 0 for j > i, so key tiles past this block's last query row
    // contribute nothing: skipping them halves the work without changing a bit of the result.
    const int last_row = min(row0 + TILE, T) - 1;
    const int j_end = causal ? last_row + 1 : T;

    const int i = row0 + ty, c = col0 + tx;
    float acc = 0.0f;
    for (int j0 = 0; j0 < j_end; j0 += TILE) {
        const int pj = j0 + tx, vj = j0 + ty;
        p_tile[ty][tx] = (i < T && pj < T) ? weights[(long)i * T + pj] : 0.0f;
        v_tile[ty][tx] = (vj < T && c < d_v) ? v[(long)vj * d_v + c] : 0.0f;
        __syncthreads();
        for (int jj = 0; jj < TILE; ++jj) acc += p_tile[ty][jj] * v_tile[jj][tx];
        __syncthreads();
    }
    if (i < T && c < d_v) out[(long)i * d_v + c] = acc;
}

// ================================================================================================
// FUSED ATTENTION
//
// The staged kernels above write four (H, T, T) matrices to memory and read them back: at T =
// 16,384 one head's scores alone are 1 GiB. The fused kernel computes the same output in one
// pass over key tiles and keeps only a (rows, d) slice of the work on chip; the T×T matrices
// never exist. The softmax is computed "online": each query row keeps its running max m and
// running sum l of exp(s - m); when a later key tile raises the max, what was accumulated so far
// is rescaled by exp(m_old - m_new). After the last tile, O = acc / l.
// ------------------------------------------------------------------------------------------------

#define FUSED_KEYS 32   // keys per tile: one per lane of a warp
#define FUSED_MAX_D 128 // d_k and d_v limit: each lane owns d_v / 32 <= 4 output columns in registers

extern "C" __global__ void attention_fused_kernel1(const float* __restrict__ q,  // (H, T, d_k)
                                                   const float* __restrict__ k,  // (H, T, d_k)
                                                   const float* __restrict__ v,  // (H, T, d_v)
                                                   float* __restrict__ out,      // (H, T, d_v)
                                                   int T, int d_k, int d_v, float scale,
                                                   int causal, int window) {
    // One warp per query row, blockDim.y rows per block, all of them sharing each K/V tile.
    // grid (ceil(T / blockDim.y), 1, H), block (32, rows). Dynamic shared memory, in floats:
    //   q_s  (rows, d_k)            this block's query rows
    //   k_s  (FUSED_KEYS, ks)       the current key tile, ks = d_k | 1: an odd row stride puts
    //                               lane j's reads of k_s[j][c] on 32 different banks
    //   v_s  (FUSED_KEYS, d_v)      the current value tile; lanes read consecutive columns
    extern __shared__ float fused_smem[];
    const int rows = blockDim.y, lane = threadIdx.x, r = threadIdx.y;
    const int tid = r * 32 + lane, n_threads = rows * 32;
    const int ks = d_k | 1;
    float* q_s = fused_smem;
    float* k_s = q_s + rows * d_k;
    float* v_s = k_s + FUSED_KEYS * ks;

    // Under a causal mask the last query tiles have the most key tiles: hand them out first so
    // the short ones fill in the tail of the launch instead of a long one running alone.
    const int tile = causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
    const int row0 = tile * rows;
    const int i = row0 + r;  // this warp's query row (may be >= T in the last tile)
    const long head = blockIdx.z;
    q += head * T * d_k;
    k += head * T * d_k;
    v += head * T * d_v;
    out += head * T * d_v;

    for (int idx = tid; idx < rows * d_k; idx += n_threads) {
        const int rr = idx / d_k, c = idx % d_k;
        q_s[idx] = (row0 + rr < T) ? q[(long)(row0 + rr) * d_k + c] : 0.0f;
    }

    // The key range any row of this block can see; tiles outside it are skipped entirely.
    // Causal: nothing past the block's last row. Window: nothing before first_row - window + 1.
    const int last_row = min(row0 + rows, T) - 1;
    const int j_end = causal ? last_row + 1 : T;
    int j_begin = 0;
    if (window > 0) j_begin = max(0, row0 - window + 1) / FUSED_KEYS * FUSED_KEYS;

    float m = -INFINITY;  // running max of this row's visible scores
    float l = 0.0f;       // running sum of exp(s - m)
    float acc[FUSED_MAX_D / 32];  // acc[t] = output column lane + 32 t, unnormalised
#pragma unroll
    for (int t = 0; t < FUSED_MAX_D / 32; ++t) acc[t] = 0.0f;

    for (int j0 = j_begin; j0 < j_end; j0 += FUSED_KEYS) {
        __syncthreads();  // the previous tile is fully read (and, first time, q_s is written)
        for (int idx = tid; idx < FUSED_KEYS * d_k; idx += n_threads) {
            const int jj = idx / d_k, c = idx % d_k;
            k_s[jj * ks + c] = (j0 + jj < T) ? k[(long)(j0 + jj) * d_k + c] : 0.0f;
        }
        for (int idx = tid; idx < FUSED_KEYS * d_v; idx += n_threads) {
            const int jj = idx / d_v;
            v_s[idx] = (j0 + jj < T) ? v[(long)j0 * d_v + idx] : 0.0f;
        }
        __syncthreads();

        // Does this row see any key of the tile? The same answer for the whole warp (one row
        // per warp), so skipping keeps the warp converged for the shuffles below.
        const bool any = i < T && (!causal || j0 <= i) && (window <= 0 || j0 + FUSED_KEYS - 1 > i - window);
        if (!any) continue;

        // S tile: lane owns key j = j0 + lane.
        const int j = j0 + lane;
        const float* qi = q_s + r * d_k;
        const float* kj = k_s + lane * ks;
        float s = 0.0f;
        for (int c = 0; c < d_k; ++c) s += qi[c] * kj[c];
        s *= scale;
        const bool visible = j < T && (!causal || j <= i) && (window <= 0 || i - j < window);
        s = visible ? s : -INFINITY;  // -inf, not -1e9: exp gives exactly 0

        // Online softmax. m_new is finite here: `any` guarantees one visible key in the tile.
        const float m_new = fmaxf(m, warp_max(s));
        const float alpha = expf(m - m_new);  // m = -inf on the first visible tile: alpha = 0
        const float p = expf(s - m_new);      // masked: exp(-inf) = 0
        l = l * alpha + warp_sum(p);
        m = m_new;

        // acc = acc * alpha + P_tile · V_tile; p of key jj is broadcast from lane jj.
#pragma unroll
        for (int t = 0; t < FUSED_MAX_D / 32; ++t) acc[t] *= alpha;
        const int n_keys = min(FUSED_KEYS, T - j0);
        for (int jj = 0; jj < n_keys; ++jj) {
            const float pj = __shfl_sync(0xffffffff, p, jj);
            const float* vj = v_s + jj * d_v;
#pragma unroll
            for (int t = 0; t < FUSED_MAX_D / 32; ++t) {
                const int c = lane + 32 * t;
                if (c < d_v) acc[t] += pj * vj[c];
            }
        }
    }

    if (i >= T) return;
    // l = 0 only if the row saw no key at all: it attends to nothing and gets zeros, like the
    // staged softmax, rather than 0/0 = NaN.
    const float inv_l = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
    for (int t = 0; t < FUSED_MAX_D / 32; ++t) {
        const int c = lane + 32 * t;
        if (c < d_v) out[(long)i * d_v + c] = acc[t] * inv_l;
    }
}

// attention_fused_kernel2: kernel1 with 16-byte shared-memory accesses, for d_k and d_v that are
// multiples of 4 (every real head size). Kernel1's inner loops issue one shared load per FMA in
// Q·K^T (and one per FMA in P·V), so shared-memory bandwidth, not arithmetic, bounds it; float4
// loads move four values per instruction. Changes from kernel1:
//   k_s row stride d_k + 4: lane j reads 16 bytes at word j * (d_k + 4); a quarter warp's 8 lanes
//                           then start on banks 0, 4, ..., 28 and never conflict
//   each lane owns 4 adjacent output columns 4·lane .. 4·lane+3 (so d_v <= 128), read from v_s
//                           as one float4; a warp reads one 512-byte V row without conflicts
// shared_mem = 4 * (rows * d_k + 32 * (d_k + 4) + 32 * d_v) bytes
extern "C" __global__ void attention_fused_kernel2(const float* __restrict__ q,  // (H, T, d_k)
                                                   const float* __restrict__ k,  // (H, T, d_k)
                                                   const float* __restrict__ v,  // (H, T, d_v)
                                                   float* __restrict__ out,      // (H, T, d_v)
                                                   int T, int d_k, int d_v, float scale,
                                                   int causal, int window) {
    extern __shared__ float4 fused_smem4[];  // float4: the array is 16-byte aligned
    const int rows = blockDim.y, lane = threadIdx.x, r = threadIdx.y;
    const int tid = r * 32 + lane, n_threads = rows * 32;
    const int ks = d_k + 4, dk4 = d_k / 4, dv4 = d_v / 4;
    float* q_s = (float*)fused_smem4;
    float* k_s = q_s + rows * d_k;
    float* v_s = k_s + FUSED_KEYS * ks;

    const int tile = causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
    const int row0 = tile * rows;
    const int i = row0 + r;
    const long head = blockIdx.z;
    const float4* q4 = (const float4*)(q + head * T * d_k);  // d_k % 4 == 0: rows stay aligned
    const float4* k4 = (const float4*)(k + head * T * d_k);
    const float4* v4 = (const float4*)(v + head * T * d_v);
    out += head * T * d_v;

    const float4 zero4 = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int idx = tid; idx < rows * dk4; idx += n_threads) {
        const int rr = idx / dk4;
        ((float4*)q_s)[idx] = (row0 + rr < T) ? q4[(long)row0 * dk4 + idx] : zero4;
    }

    const int last_row = min(row0 + rows, T) - 1;
    const int j_end = causal ? last_row + 1 : T;
    int j_begin = 0;
    if (window > 0) j_begin = max(0, row0 - window + 1) / FUSED_KEYS * FUSED_KEYS;

    float m = -INFINITY, l = 0.0f;
    float4 acc = zero4;  // output columns 4·lane .. 4·lane+3, unnormalised
    const bool owns_columns = 4 * lane < d_v;

    for (int j0 = j_begin; j0 < j_end; j0 += FUSED_KEYS) {
        __syncthreads();
        for (int idx = tid; idx < FUSED_KEYS * dk4; idx += n_threads) {
            const int jj = idx / dk4, c4 = idx % dk4;
            *(float4*)(k_s + jj * ks + 4 * c4) = (j0 + jj < T) ? k4[(long)(j0 + jj) * dk4 + c4] : zero4;
        }
        for (int idx = tid; idx < FUSED_KEYS * dv4; idx += n_threads) {
            const int jj = idx / dv4;
            ((float4*)v_s)[idx] = (j0 + jj < T) ? v4[(long)j0 * dv4 + idx] : zero4;
        }
        __syncthreads();

        const bool any = i < T && (!causal || j0 <= i) && (window <= 0 || j0 + FUSED_KEYS - 1 > i - window);
        if (!any) continue;

        const int j = j0 + lane;
        const float4* qi = (const float4*)(q_s + r * d_k);
        const float4* kj = (const float4*)(k_s + lane * ks);
        float s = 0.0f;
        for (int c4 = 0; c4 < dk4; ++c4) {
            const float4 a = qi[c4], b = kj[c4];
            s += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
        }
        s *= scale;
        const bool visible = j < T && (!causal || j <= i) && (window <= 0 || i - j < window);
        s = visible ? s : -INFINITY;

        const float m_new = fmaxf(m, warp_max(s));
        const float alpha = expf(m - m_new);
        const float p = expf(s - m_new);
        l = l * alpha + warp_sum(p);
        m = m_new;

        acc.x *= alpha; acc.y *= alpha; acc.z *= alpha; acc.w *= alpha;
        const int n_keys = min(FUSED_KEYS, T - j0);
        for (int jj = 0; jj < n_keys; ++jj) {
            const float pj = __shfl_sync(0xffffffff, p, jj);
            if (owns_columns) {
                const float4 b = ((const float4*)(v_s + jj * d_v))[lane];
                acc.x += pj * b.x; acc.y += pj * b.y; acc.z += pj * b.z; acc.w += pj * b.w;
            }
        }
    }

    if (i >= T || !owns_columns) return;
    const float inv_l = l > 0.0f ? 1.0f / l : 0.0f;
    ((float4*)(out + (long)i * d_v))[lane] = make_float4(acc.x * inv_l, acc.y * inv_l, acc.z * inv_l, acc.w * inv_l);
}
