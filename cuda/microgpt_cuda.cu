// microgpt_cuda.cu — the attention equation of one decoder-only transformer layer, stage by stage.
//
//     Attention(Q, K, V) = softmax(mask(Q · K^T / sqrt(d_k))) · V
//
// START HERE. The equation as the course writes it is five kernels, one launch per stage, each
// the plainest version of its stage (the stage's kernel1):
//
//   scores_kernel1    S[i][j] = dot(Q[i], K[j])                        S = Q · K^T
//   scale_kernel1     S'[i][j] = S[i][j] * (1.0f / sqrtf(d_k))         / sqrt(d_k)
//   mask_kernel1      S'[i][j] = -inf where query i may not see key j  mask(...)
//   softmax_kernel1   P[i][j] = exp(S'[i][j]) / sum_k exp(S'[i][k])    softmax(...)
//   av_kernel1        output[i] = sum_j P[i][j] · V[j]                 the weighted sum, · V
//
// They are the first kernels of STAGED ATTENTION, after the BUILDING BLOCKS they use (search
// for "scores_kernel1("). Each stage's faster variants follow its kernel1 (scores_kernel2,
// softmax_kernel2 and 3, av_kernel2: what andrea runs by default, the same result to rounding).
//
// Where everything is, in file order:
//   BUILDING BLOCKS              warp reductions, the fused kernels' block order, the Mask (which
//                                keys a query sees), the 8x8 GEMM tile of the register-tiled kernels
//   STAGED ATTENTION             the five stages, one launch each, every variant of a stage together
//   FUSED ATTENTION              the whole equation in one kernel (FP32, flash-style): no T×T matrix
//   TENSOR-CORE BUILDING BLOCKS  mma.sync, ldmatrix, cp.async, wgmma, ex2.approx: one wrapper each
//   TENSOR-CORE ATTENTION        the fused forward on tensor cores: bf16 in, fp32 out
//   DECODE                       generation: one new query a step against the KV cache
//   BACKWARD                     dQ, dK, dV: staged (one launch per stage), then fused
//   BACKWARD ON TENSOR CORES     the fused backward on mma.sync
// The catalogue below lists every kernel in that order, with its shapes and launch geometry.
//
// Every kernel works on H independent heads laid out one after the other (head h of a (H, T, d)
// tensor starts at h * T * d); the head is blockIdx.z, so one launch covers every head and a
// single head is just gridDim.z = 1. The staged kernels also take L queries against S keys (the
// shapes below write T for both where they are equal) and grouped K/V heads: `group` query heads
// share each K/V head, query head h reading K/V head h / group in place (K and V are never
// copied; group 1: a K/V head per query head) (a causal fused kernel renumbers its blocks longest first
// across the heads: causal_block_order). All data is float32, row-major, contiguous.
//
// Every kernel that masks takes its Mask's fields as int arguments, (causal, window, offset, right,
// sinks, alibi), and asks one Mask (BUILDING BLOCKS) for every test of a (query, key) pair and
// every range of tiles it visits. The masks: none, causal (key j visible from query i when j <= p +
// right, p = i + offset; right 0), a sliding window (p - j < window as well), two-sided (right > 0:
// window:L,R sees p-L .. p+R), with attention sinks (keys j < sinks pass the window's left bound),
// and ALiBi (alibi = H: -m_h · (p - j) added to head h's scaled scores). offset is the key position
// of query row 0: 0 when queries and keys are one sequence; S - L for L queries against S keys, the
// queries being the last L positions (bottom-right, as FlashAttention >= 2.1).
// A mask given as an array (--mask-file, an attn_mask) is no Mask: mask_kernel2 adds it to the
// scaled scores, and the fused fp32 kernels 1, 2 and 3 add it beside each K tile (their Mask is
// then none; kernel3 through a tile of it in shared memory); the tensor-core and the backward
// kernels refuse one in one line.
//
// Kernels, in the order of the equation (launch geometry as the launcher chooses it). Each entry
// ends with its kernels' register budgets per thread, in the order it names them, for sm_80 and
// sm_90 (NVRTC): tests/backends/launch/test_kernel_compile.py holds every kernel to its budget and to no spills.
//
//   scores_kernel1   S = Q · K^T, unscaled                  (H,L,d_k),(H/group,S,d_k) -> (H,L,S)
//                    16x16 output tile per block, Q and K tiles staged in shared memory.
//                    grid (ceil(S/16), ceil(L/16), H), block (16, 16); registers <= 40
//   scores_kernel2   the same S, 128x128 outputs per block, 8x8 per thread (register tiling):
//                    4 float4 shared loads feed 64 FMAs, 16x fewer loads per FMA than kernel1.
//                    The next k-slice's global loads are held in registers across the FMAs of
//                    this one (a register prefetch: their latency hides behind 512 FMAs of the
//                    same warp), as float4s where d_k % 4 == 0; 8 registers of the 128.
//                    grid (ceil(S/128), ceil(L/128), H), block (256); registers <= 128
//                    (__launch_bounds__(256, 2): two blocks per SM)
//   scale_kernel1    S' = S * scale, scale = 1.0f / sqrtf(d_k) worked out in the kernel (or a
//                    factor given)                               (n) -> (n), elementwise
//                    grid-stride loop; grid (min(ceil(n/256), 4096)), block (256); registers <= 40
//   mask_kernel1     S'[i][j] = -inf where the Mask hides key j from query i  (H,T,T) -> (H,T,T)
//                    (causal: j > i, the future; a window: also i - j >= window, so i sees
//                    i-window+1 .. i; right, sinks as the Mask says), and ALiBi's -m_h·(i - j)
//                    added to the rest. grid (ceil(T/16), ceil(T/16), H), block (16, 16)
//                    registers <= 24
//   mask_kernel2     S'[i][j] += bias[i][j], a mask given as an array    (H,L,S),(Hb,L,S) -> (H,L,S)
//                    (--mask-file): additive biases as they are (ALiBi-shaped, ...), a bool mask
//                    turned into 0 / -inf on the host; Hb = 1 (one (L, S) array for every head)
//                    or H. grid (ceil(S/16), ceil(L/16), H), block (16, 16); registers <= 24
//   softmax_kernel1  P = row softmax of S', max-subtracted      (H,T,T) -> (H,T,T)
//                    one block per row; warp shuffles, then the warp results through shared
//                    memory. grid (T, 1, H), block (threads: a multiple of 32, <= 1024),
//                    shared_mem = (threads / 32) * sizeof(float); registers <= 24
//   softmax_kernel2  the same result, one warp per row; shuffles only, no shared memory
//                    grid (ceil(T/rows), 1, H), block (32, rows); registers <= 40
//   softmax_kernel3  the same result, the row held in registers (16 values per thread): one
//                    read and one write of it instead of three reads, float4 loads where
//                    T % 4 == 0, exp2 of (x - m)·log2 e. T <= 16,384.
//                    grid (T, 1, H), block (32 * ceil(T/512), the smallest that holds the row)
//                    registers <= 64
//   av_kernel1       O = P · V                        (H,L,S),(H/group,S,d_v) -> (H,L,d_v)
//                    16x16 output tile per block, P and V tiles staged in shared memory; only
//                    the key tiles the Mask shows the block's rows (causal: none past the
//                    diagonal; a window: none before its far end), since P is exactly 0 elsewhere.
//                    grid (ceil(d_v/16), ceil(T/16), H), block (16, 16); registers <= 40
//   av_kernel2       the same O, 64x64 outputs per block, 8x8 per thread (scores_kernel2's tile
//                    code and register prefetch, float4s where T and d_v are multiples of 4, 16
//                    values a slice, held half a slice at a time: 8 registers); it stops where
//                    kernel1 does (from key 0 even under a window: its registers are full).
//                    Grouped heads as one taller product: the group's P rows stacked (group·L, S)
//                    times their one V. grid (ceil(d_v/64), ceil(group·L/64), H/group), block (64);
//                    registers <= 128 (__launch_bounds__(64, 8))
//   attention_fused_kernel1   O = softmax(mask(Q · K^T * scale)) · V in one pass, flash-style
//                    (H,L,d_k),(H/group,S,d_k),(H/group,S,d_v) -> (H,L,d_v); never writes an L×S matrix.
//                    One warp per query row, `rows` rows per block sharing K/V tiles of 32 keys
//                    in shared memory; online softmax; key tiles the mask removes are skipped.
//                    ALiBi and a mask array (bias, bias_heads: nullptr, 0 without) added per
//                    score, the array's row read from global memory beside the K tile. Q·K^T
//                    summed in fours, Kahan-compensated (huge scores: see "Q·K^T in fours").
//                    d_k, d_v <= 128. grid (ceil(T/rows), 1, H), block (32, rows),
//                    shared_mem = 4 * (rows * d_k + 32 * (d_k | 1) + 32 * d_v) bytes; registers <= 64
//                    (56 before L != S and grouped heads: 60 on sm_80, still 4 blocks of 8 rows per SM)
//   attention_fused_kernel2   the same, with float4 shared-memory loads (4 values per load
//                    instruction instead of 1); needs d_k % 4 == 0 and d_v % 4 == 0.
//                    shared_mem = 4 * (rows * d_k + 32 * (d_k + 4) + 32 * d_v) bytes; registers <= 80
//   attention_fused_kernel3_d64, attention_fused_kernel3_d128   register-tiled: 64 query rows
//                    per block of 128 threads, 64-key tiles, each thread 8 rows x 4 keys of S and
//                    8 rows x d/16 columns of O, so a shared load feeds 8-11 FMAs instead of 1-4;
//                    the head size is a compile-time constant (d_k = d_v = 64 or 128); Q times
//                    scale·log2 e on load, so the online softmax runs in exp2; row max by
//                    xor-shuffles. ALiBi and a mask array: every tile takes the element pass the
//                    mask's edge tiles take, the array's 64x64 slice loaded into shared memory
//                    beside the K tile. Q·K^T summed in fours. grid (ceil(T/64), 1, H), block (128),
//                    shared_mem = 4 * (192 * d + 256) bytes (over 48 KiB: the launcher opts in),
//                    16,384 more with a mask array
//                    registers <= 168, <= 232 (_d64 has __launch_bounds__(128, 3): 3 blocks/SM)
//   attention_fused_lse_kernel1, attention_fused_lse_kernel2   kernel1 and kernel2, also writing
//                    each row's logsumexp lse_i = m_i + log(l_i), (H, T), for the fused backward.
//                    The same body (a __device__ function); the plain kernels pass nullptr.
//                    registers <= 64, <= 80
//
// Tensor cores (bf16 in, fp32 accumulate; TENSOR-CORE BUILDING BLOCKS explains mma.sync, ldmatrix,
// cp.async, wgmma):
//
//   to_bf16_kernel1  out = bf16(in * multiplier), round to nearest even     (n) f32 -> (n) bf16
//                    the copies of Q (pre-scaled by scale·log2 e), K and V the next kernel reads.
//                    grid-stride over pairs; grid (min(ceil(n/512), 4096)), block (256);
//                    registers <= 24
//   attention_fused_kernel4_d64, attention_fused_kernel4_d128   the same output as the fused
//                    kernels above, from bf16 Q, K, V: FlashAttention-2 on tensor cores (sm_80+).
//                    (H,T,d) bf16 x3 -> (H,T,d) f32, d_k = d_v = d. 4 warps x 16 query rows;
//                    64-key tiles, double-buffered with cp.async; S and O by mma.sync.m16n8k16
//                    (K by ldmatrix, V by ldmatrix.trans), P reused from S's registers; online
//                    softmax in exp2; masked tiles skipped whole; every mask flavour (ALiBi's bias
//                    in base 2, every tile then taking the element pass) in a second instantiation
//                    picked at launch, as kernel5's, so the plain loop has none. grid (ceil(T/64), 1, H),
//                    block (128), shared_mem = 640 * (d + 8) bytes (46,080 at d = 64; 87,040 at
//                    d = 128, an opt-in above 48 KiB); registers <= 144, <= 192
//   attention_fused_kernel5_d64, attention_fused_kernel5_d128   kernel4's output, FlashAttention-2's
//                    proportions (andrea's default for --precision bf16): 4 warps x 32 query rows
//                    (two m16 tiles), so each ldmatrix'd K or V fragment feeds two mma (4 HMMA per
//                    LDSM in the hot loop, kernel4 1.78); Q's fragments held in registers; the
//                    softmax steps 64 keys at d = 64, 16 at d = 128 (the registers: O 128, Q 64);
//                    cp.async offsets computed once per thread; ex2.approx.ftz; mask-edge tiles
//                    in loops of their own, the hot loop without mask code. right, sinks or ALiBi
//                    run a second instantiation (the entry point picks it), so the plain copy's code
//                    is as without them; at d = 128 the flavoured copy re-reads Q's fragments from
//                    q_s each k16 step and runs its softmax steps one at a time (holding Q, or
//                    unrolled, the flavours' tests spill at the 255-register edge).
//                    grid (ceil(T/128), 1, H), block (128), shared_mem = 768 * (d + 8) bytes
//                    (55,296 at d = 64; 104,448 at d = 128: opt-ins); registers <= 255, <= 255
//                    (all a block of 128 may use: two blocks, 8 warps, per SM)
//   attention_fused_kernel6_d64, attention_fused_kernel6_d128   kernel5's output on Hopper's wgmma
//                    (sm_90a only; andrea's default for --precision bf16 on an H100 / H200):
//                    2 warpgroups x 64 query rows; S = Q·K^T and O += P·V by wgmma.m64nNk16, Q and
//                    P from registers, K and V read by the tensor cores from shared memory through
//                    matrix descriptors (no ldmatrix: the shared-memory bound kernel5 hits is
//                    gone, bench --bound puts it on the tensor pipe); K and V tiles unpadded in
//                    the descriptors' canonical layout; the softmax steps 64 keys at both d.
//                    Descriptors built once per block and walked by one add. FlashAttention-3's
//                    intra-warpgroup overlap: S of tile n and P·V of tile n-1 issued together, S
//                    waited for alone (wgmma_wait<1>), so P·V runs through tile n's softmax; three
//                    K/V stages (the third over q_s once Q is in registers), one barrier a tile.
//                    Every mask flavour: the mask pass and online softmax are wgmma_mask_tile and
//                    wgmma_softmax_tile, shared with kernel7.
//                    grid (ceil(T/128), 1, H), block (256), shared_mem = 2 * (128 * (d + 8) + 256 * d)
//                    bytes (51,200 at d = 64; 100,352 at d = 128: opt-ins); registers <= 144, <= 192
//                    (one block, 8 warps, per SM at both: S, P, O and Q's fragments live at once)
//   attention_fused_kernel7_d64, attention_fused_kernel7_d128   kernel6's output and tiles,
//                    FlashAttention-3's structure (sm_90a only; chosen by name, --kernel 7):
//                    warp-specialised, a producer warp (its warpgroup at setmaxnreg 40) streams K
//                    and V with TMA (cp.async.bulk.tensor, boxes of 64 keys x 8 columns) into a
//                    ring of K7_STAGES stages guarded by full/empty mbarriers (expect_tx,
//                    try_wait.parity); two consumer warpgroups (setmaxnreg 232) of 64 query rows
//                    take turns at the tensor cores on named barriers (bar.sync / bar.arrive), so
//                    one's softmax runs under the other's wgmmas; P·V one turn late, beside the
//                    next S. No consumer instruction loads K or V, no __syncthreads in the loop.
//                    kernel6's mask pass and online softmax (the same two functions), every flavour.
//                    grid (ceil(T/128), 1, H), block (384), shared_mem = 2 * (128 * (d + 8) +
//                    2 * K7_STAGES * 64 * d) + 16 * K7_STAGES + 128 bytes (51,360 at d = 64;
//                    100,512 at d = 128); takes k_map, v_map (K, V as (H_kv * S, d)) last;
//                    registers <= 168, <= 168 (384 threads: the most a block may give each)
//
// Decode, one step of generation: one query per head (the newest position, S - 1) against the S
// cached keys and values; K/V heads may be fewer than query heads (group = H / H_kv per K/V head):
//
//   kv_append_kernel1, kv_append_kernel2   the step's k and v into row `position` of the cache,
//                    (H_kv, d) -> (H_kv, capacity, d); kernel2 stores bf16 (two per 32-bit word),
//                    half the bytes each later step reads. grid (1, 1, H_kv), block (128);
//                    registers <= 24, <= 24
//   attention_decode_kernel1, attention_decode_kernel2   flash-decoding: the cache cut into
//                    slices of keys_per_split keys, one block per (slice, head). A warp reads 4
//                    key rows at once, 8 lanes a row (lane owns units sub + 8t: 32 contiguous
//                    bytes a row per load), and each 8-lane group takes 4 rows a step, so one
//                    3-round shuffle tree gives 4 scores (a warp per row spent 5 shuffles and 2
//                    exps a key: issue-bound, 5.9 us for kernel2 at bench --bound's shape, HBM
//                    2.6); each group an online softmax in exp2, the block's 16 merged in shared
//                    memory; writes each slice's normalised output and logsumexp. kernel2 reads
//                    the bf16 cache. d <= 64 runs a loop of half the units. The keys are the
//                    Mask's for row S - 1 (last_row_keys: the sinks, then the window), ALiBi
//                    added to each score. Static estimate
//                    (bench --bound, H200, T 4,096, 12 heads, d 64): both HBM-bound, kernel1
//                    5.3 us (issue 1.1), kernel2 2.6 us (issue 1.0). (H,d_k) + cache ->
//                    (H,splits,d_v), (H,splits). grid (splits, 1, H), block (128),
//                    static shared 8,384 bytes; registers <= 128, <= 96
//   attention_decode_merge_kernel1   the slices of a head merged by their logsumexps
//                    (H,splits,d_v),(H,splits) -> (H,d_v),(H); grid (1, 1, H), block (128);
//                    registers <= 40
//
// Backward, given dO = dL/dO (H, L, d_v); staged, one launch per stage like the forward. L
// queries against S keys (the Mask's offset, as the forward), H query heads over H_kv K/V heads:
// dK, dV (H_kv, S, d) summed over each K/V head's group inside the kernel (no atomics). Every
// backward kernel that masks takes the whole Mask: its ranges hold a right reach and the rows
// that see a sink; ALiBi's bias is in the staged P already, and the fused kernels add it to
// each P they recompute:
//
//   dv_kernel1       dV = sum over the group of P^T · dO      (H,L,S),(H,L,d_v) -> (H_kv,S,d_v)
//                    16x16 output tile per block; only the query tiles that see its keys (the
//                    Mask's query_rows: causal, none above key row j; a window, none past its reach).
//                    grid (ceil(d_v/16), ceil(S/16), H_kv), block (16, 16); registers <= 40
//   dp_kernel1       dP = dO · V^T (scores_kernel1's product)  (H,L,d_v),(H_kv,S,d_v) -> (H,L,S)
//                    grid (ceil(S/16), ceil(L/16), H), block (16, 16); registers <= 40
//   ds_kernel1       dS = P ∘ (dP − rowsum(dP ∘ P)): the gradient through the softmax, exactly 0
//                    where the mask hid a key (P = 0 there)   (H,L,S),(H,L,S) -> (H,L,S)
//                    one warp per row; grid (ceil(L/rows), 1, H), block (32, rows); registers <= 40
//   dq_kernel1       dQ = scale · dS · K (av_kernel1's product) (H,L,S),(H_kv,S,d_k) -> (H,L,d_k)
//                    grid (ceil(d_k/16), ceil(L/16), H), block (16, 16); registers <= 40
//   dk_kernel1       dK = scale · dS^T · Q (dv_kernel1's product) (H,L,S),(H,L,d_k) -> (H_kv,S,d_k)
//                    grid (ceil(d_k/16), ceil(S/16), H_kv), block (16, 16); registers <= 40
//   dv_kernel2, dq_kernel2, dk_kernel2   the same dV, dQ, dK, 64x64 outputs per block, 8x8 per
//                    thread (av_kernel2's tile; dV and dK read P and dS transposed): 4 float4
//                    shared loads feed 64 FMAs, 16x fewer loads per FMA than kernel1; the
//                    register prefetch (dV, dK: a whole slice, 16 registers; dQ: halves, 8).
//                    The Mask's ranges, as kernel1's (dQ from key 0, as av_kernel2). dQ stacks
//                    a group's query heads as av_kernel2; dV, dK one k range over its stacked rows.
//                    grid dV, dK (ceil(d/64), ceil(S/64), H_kv); dQ (ceil(d/64), ceil(group·L/64),
//                    H_kv); block (64)
//                    (__launch_bounds__(64, 8)); registers <= 128, <= 128, <= 128
//   dp_kernel2       the same dP, scores_kernel2's tile: 128x128 outputs per block.
//                    grid (ceil(S/128), ceil(group·L/128), H_kv), block (256) (__launch_bounds__(256, 2));
//                    registers <= 128
//
// Fused backward, FlashAttention-2 style: P recomputed from Q, K and the saved lse, no L×S matrix
// (so training memory grows with T, not T^2); d_k, d_v <= 128; L != S and grouped heads as above:
//
//   attention_backward_delta_kernel1   delta_i = dO[i] · O[i] = rowsum(dP ∘ P)[i]
//                    (H,L,d_v),(H,L,d_v) -> (H,L); one warp per row, grid (ceil(L/rows), 1, H),
//                    block (32, rows); registers <= 40
//   attention_backward_dkdv_kernel1    dK, dV for a tile of 32 keys per block, walking the query
//                    rows that see them in each query head of its K/V head's group in turn; dK,
//                    dV accumulate in registers. -> (H_kv,S,d_k),(H_kv,S,d_v)
//                    grid (ceil(S/32), 1, H_kv), block (32, 8) (8 rows exactly: the register budget),
//                    shared_mem = 4 * (32 * ((d_k | 1) + (d_v | 1)) + 8 * (d_k + d_v) + 2 * 8 * 32)
//                    registers <= 128
//   attention_backward_dq_kernel1      dQ, one warp per query row, walking its key tiles like the
//                    forward. -> (H,L,d_k); grid (ceil(L/rows), 1, H), block (32, rows),
//                    shared_mem = 4 * (rows * (d_k + d_v) + 32 * ((d_k | 1) + (d_v | 1))); registers <= 64
//                    (56 before the causal block order: its division by H moves the head's
//                    pointers off the uniform registers on sm_80)
//
// Backward on tensor cores, FlashAttention-2's on mma.sync (bf16 operands, fp32 sums; sm_80+),
// after the rowsum term by attention_backward_delta_kernel1; d_k = d_v = d = 64 or 128; L != S
// and grouped heads as above (dkdv: a block walks its group's query heads' tiles as one pipeline):
//
//   attention_fused_lse_kernel4_d64, attention_fused_lse_kernel4_d128   kernel4, also writing
//                    each row's logsumexp (H, T) for the backward; kernel4's geometry; at d = 128
//                    the flavoured copy holds 209 registers (kernel4's: 182), still 2 blocks an
//                    SM, as its 87,040 bytes of shared memory allow. registers <= 144, <= 216
//   attention_backward_dkdv_kernel2_d64, attention_backward_dkdv_kernel2_d128   dK, dV from the
//                    forward's bf16 Q (pre-scaled), K, V, a bf16 dO, lse and delta. 4 warps x 16
//                    keys per block, walking the query tiles that see them (QT = 64 queries at
//                    d = 64, 32 at d = 128), double-buffered with cp.async. S^T = K·Q^T and
//                    dP^T = V·dO^T by mma, so P^T and dS^T sit in the A-fragment layout of
//                    dV += P^T·dO and dK += dS^T·Q (ldmatrix.trans for dO and Q): rounded to bf16,
//                    never stored; dK, dV in fp32 registers. Against dkdv_kernel1: tensor cores,
//                    and each Q/dO value read from shared memory feeds 16 keys (kernel1: 1).
//                    grid (ceil(S/64), 1, H_kv), block (128), shared_mem = 2 * (128 + 4 * QT) * (d + 8)
//                    + 16 * QT bytes (56,320; 70,144: the launcher opts in); registers <= 200, <= 255
//   attention_backward_dq_kernel2_d64, attention_backward_dq_kernel2_d128   dQ: 4 warps x 16
//                    queries per block walking their key tiles as kernel4 does; S, dP by mma, dS
//                    rounded to bf16 as dQ += dS·K's A operand. A pass of its own, not atomics: the
//                    same bits on every run. grid (ceil(L/64), 1, H), block (128),
//                    shared_mem = 768 * (d + 8) bytes (55,296; 104,448); registers <= 176, <= 236
//                    (232 before ALiBi's bias, on sm_90: still two blocks per SM, as its shared memory allows)
//
// Every kernel is correct for any T >= 1 (the FP32 ones for any d >= 1): partial tiles are padded
// with zeros on load and threads outside the matrix skip the store but still reach every
// __syncthreads().
// No host code lives here: the Python launchers (andrea_cli/backends/launch/) load this file
// with cupy.RawModule on a GPU, or compile it for the CPU with cuda/cuda_cpu_runtime.h.

#define TILE 16

// NVRTC compiles without the C headers, so INFINITY is ours to define: the float with all
// exponent bits set and a zero mantissa. (The CPU build gets it from <cmath>.)
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
// ================================================================================================
// BUILDING BLOCKS
//
// The device functions the FP32 kernels are built from, each in one place: warp reductions,
// the fused kernels' block order, the Mask (which keys a query sees) and the register-tiled 8x8
// GEMM tile of the staged kernels. No kernel here: the stages follow, in the order of the
// equation. (The tensor-core instructions' wrappers come later, just before the first kernel
// that uses them: TENSOR-CORE BUILDING BLOCKS.)
// ------------------------------------------------------------------------------------------------

// Warp reductions: every lane ends with the warp's max or sum, by xor-shuffles.

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

// ------------------------------------------------------------------------------------------------
// Block order for the fused kernels: which query (or key) tile and which head a block computes.
//
// A GPU hands blocks out in the order of blockIdx.x + gridDim.x · blockIdx.z (x fastest). Under a
// causal mask a head's blocks differ in length (the last query tile walks every key tile, the
// first one tile), and if each head's blocks went out together the first wave would mix long and
// short blocks and a long one would run alone at the end. So a causal launch numbers its blocks
// longest first across all heads: the first gridDim.z blocks to start are every head's longest
// tile, the next gridDim.z the second longest, and so on; the short ones fill the tail. Without
// a causal mask every block costs the same (a window's first blocks are shorter only by a few
// tiles): tile blockIdx.x of head blockIdx.z. `longest_last`: the highest tile index is the
// longest (query tiles); false for key tiles, whose first tile sees the most query rows.
struct BlockWork {
    int tile;
    int head;
};

__device__ __forceinline__ BlockWork causal_block_order(int causal, bool longest_last) {
    if (!causal) return {(int)blockIdx.x, (int)blockIdx.z};
    const int n = (int)(blockIdx.z * gridDim.x + blockIdx.x);  // this block's place in the launch order
    const int rank = n / (int)gridDim.z;                       // 0: among the longest
    return {longest_last ? (int)gridDim.x - 1 - rank : rank, n % (int)gridDim.z};
}

// ------------------------------------------------------------------------------------------------
// MASK: which keys a query row may see. Every kernel asks one Mask, for the test of a single pair
// and for the ranges of tiles it visits; no kernel writes the rule out itself.
//
// Query row i sits at key position p = i + offset (offset 0 while queries and keys are one
// sequence; S - L when the L queries are the last L of S keys, bottom-right causal). Key j is
// visible from row i when neither of two bounds hides it:
//   the right bound, under causal:    j <= p + right   (right 0: no key past the row's own)
//   the left bound, when window > 0:  p - j < window   (p sees p-window+1 .. p); the first `sinks`
//                                                      keys pass it however far back they lie
// Causal is a local window of (infinity, 0), FlashAttention's reading: a mask flavour is a pair
// of bounds (and the sinks), not another copy of the test. window:L,R (--mask) is window = L + 1,
// right = R. ALiBi hides nothing: alibi = H gives head h its slope (slope), whose bias
// -m_h · (p - j) the kernels add to the visible scores (bias_at).
//
// The kernels build their Mask with from_args: the staged kernels, the fused fp32 and
// tensor-core forward kernels (the bf16 backward's forward, lse_kernel4, too), the backward and
// decode from all six fields; kernel5's plain copy from (causal, window, offset), right, sinks and
// alibi then the constant 0, whose terms fold away, so that code compiles as before the fields
// were runtime. The offset is added to a row once, by the methods, before a rule sees it (so a
// rule reads positions p, not rows i). How the rules are written is measured, not taste (NVVM,
// kernel4's masked key tiles, 976 instructions a trip): a rule that adds a 0, a method that reads
// its fields through `this` before it is inlined, or a bound test (j < T) left outside the call
// compiles them to 8-28% more. So every method hands its fields as values to one of the rules of
// plain ints at the end of the struct, the caller's own test comes in as `inside` (or `beyond`)
// and is the rule's first term, and a kernel that builds a Mask reads causal and window only
// through it. The kernels then compile as with the rule written out in each (the same
// instruction counts; a comparison's operands may come out swapped).
//
// The ranges: a block of query rows visits the key tiles key_tiles names (every key any of its
// rows sees lies in them); a block of keys, in the key-major backward kernels, walks the query
// rows query_rows names. Within a tile, sees_any (may the warp skip it?) and hides_some (must it
// test pairs one by one?) decide; edge_tiles splits a block's tiles into the masked and the
// unmasked ones, for the kernels whose hot loop holds no mask code.

// The key tiles a block of query rows [row0, row0 + rows) visits, KEYS keys each from j_begin.
struct KeyTiles {
    int row0, last_row;  // the block's first row, and its last inside T
    int j_begin, j_end;  // j_begin (a multiple of KEYS) .. j_end - 1 hold every key a row of the block sees
    int n_tiles;         // tiles from j_begin that reach j_end
};

// The keys the last query row sees (decode's one query, at position S - 1), in key order: the
// first n_sinks keys (the sinks before its window's far end), then first .. S - 1; key(n) is
// the n-th of the count.
struct SeenKeys {
    int n_sinks, first, count;
    __device__ __forceinline__ int key(int n) const { return n < n_sinks ? n : first + n - n_sinks; }
};

// The query rows that see some key of a block of keys: i_begin .. i_end - 1.
struct QueryRows {
    int i_begin, i_end;
};

// A block's tiles (KeyTiles) by what crosses them: a mask edge or T crosses the first n_first and
// those from n_last on (for some row of the block); the tiles between need no test of any pair.
struct EdgeTiles {
    int n_first, n_last;
};

struct Mask {
    int causal;  // != 0: the right bound holds
    int window;  // > 0: the left bound holds, window keys wide
    int offset;  // key position of query row 0: 0 (one sequence, or top-left), S - L (bottom-right)
    int right;   // keys past the row's own position the right bound still shows (0: causal's)
    int sinks;   // the first keys the left bound never hides (0: none)
    int alibi;   // > 0: ALiBi over this many query heads (slope(h)); 0: no bias

    // The two bounds and the offset alone, for kernel4's and kernel5's copies without the flavours:
    // right, sinks and ALiBi are 0, constants, so that code compiles as before the fields existed.
    static __device__ __forceinline__ Mask from_args(int causal, int window, int offset) {
        return {causal, window, offset, 0, 0, 0};
    }
    // Whether a launch needs the flavoured copy: the entry points of kernel4 and kernel5 pick it.
    static __device__ __forceinline__ bool flavoured(int right, int sinks, int alibi) {
        return right != 0 || sinks != 0 || alibi != 0;
    }
    // Every field, for the kernels that take the whole Mask (MaskSpec.kernel_args(L, S, heads=H)):
    // (causal, window, offset, right, sinks, alibi).
    static __device__ __forceinline__ Mask from_args(int causal, int window, int offset, int right, int sinks,
                                                     int alibi) {
        return {causal, window, offset, right, sinks, alibi};
    }

    // ALiBi's slope for query head h of alibi heads (Press et al. 2022): for H a power of two
    // m_h = 2^(-8(h+1)/H); otherwise, with n the largest power of two below H, the n slopes of
    // n heads, then every other slope of 2n heads (2^(-4(2k+1)/n), k = 0..H-n-1), as the
    // paper's code (get_slopes). 0 without ALiBi. Once per block: exp2f of a small int ratio.
    __device__ __forceinline__ float slope(int h) const {
        if (alibi <= 0) return 0.0f;
        int n = 1;
        while (2 * n <= alibi) n *= 2;
        return h < n ? exp2f(-8.0f * (h + 1) / n) : exp2f(-4.0f * (2 * (h - n) + 1) / n);
    }
    // The bias ALiBi adds to a scaled score, key j d = p - j positions behind the row's position:
    // -m_h · d (slope_h: slope(h), times log2 e where the kernel's scores are in base 2).
    static __device__ __forceinline__ float bias_at(float slope_h, int d) { return -slope_h * (float)d; }

    // Is key j visible from query row i? inside: the caller's test that the pair lies in the matrix.
    __device__ __forceinline__ bool visible(int i, int j, bool inside = true) const {
        return pair_at(causal, window, right, sinks, inside, i - j + offset, j);
    }
    // The same from the row's position less the key, p - j = i + offset - j (kernel5 and kernel6
    // keep it in one register, the offset folded in once).
    __device__ __forceinline__ bool visible_at(int p_minus_j, int j, bool inside) const {
        return pair_at(causal, window, right, sinks, inside, p_minus_j, j);
    }
    // Does some row of [i_first, i_last] see some key of [j_first, j_last]? (inside: there are such rows and keys)
    __device__ __forceinline__ bool sees_any(int i_first, int i_last, int j_first, int j_last, bool inside) const {
        return any_pair(causal, window, right, sinks, inside, i_first + offset, i_last + offset, j_first, j_last);
    }
    // Does the mask hide some pair of the rectangle, so that its pairs must be tested one by one?
    __device__ __forceinline__ bool hides_some(int i_first, int i_last, int j_first, int j_last, bool beyond) const {
        return some_hidden(causal, window, right, beyond, i_first + offset, i_last + offset, j_first, j_last);
    }

    // The key tiles a block of query rows [row0, row0 + rows) visits (L rows, S keys). Sinks keep
    // the first tile at key 0; the tiles between them and the window come out wholly masked (the
    // kernels skip them by sees_any). A block whose rows see no key at all (bottom-right with
    // L > S: rows before L - S) gets none.
    template <int KEYS>
    __device__ __forceinline__ KeyTiles key_tiles(int row0, int rows, int L, int S) const {
        const int last_row = min(row0 + rows, L) - 1;
        // one past the last key the block's last row sees (its right bound: + right); from the
        // first key its first row's window reaches, in whole tiles
        // (a block whose rows see no key gets j_end <= j_begin: no tile, n_tiles <= 0). The plain
        // last_row + 1 where it is the same (no offset, no right, L <= S): a constant test in the kernels
        // that take one sequence, so they compile as before the offset
        const int j_end = causal ? (offset + right == 0 && L <= S ? last_row + 1 : min(S, last_row + offset + right + 1)) : S;
        const int j_begin = window > 0 && sinks <= 0 ? max(0, row0 + offset - window + 1) / KEYS * KEYS : 0;
        return {row0, last_row, j_begin, j_end, (j_end - j_begin + KEYS - 1) / KEYS};
    }
    template <int KEYS>
    __device__ __forceinline__ KeyTiles key_tiles(int row0, int rows, int T) const { return key_tiles<KEYS>(row0, rows, T, T); }

    // The keys the row at position S - 1 (offset 0) sees: its window's, from S - window (all of
    // them without one), and the sinks before that; the right bound hides none (none lie past it).
    __device__ __forceinline__ SeenKeys last_row_keys(int S) const {
        const int first = window > 0 ? max(0, S - window) : 0;
        const int n_sinks = min(max(sinks, 0), first);
        return {n_sinks, first, n_sinks + S - first};
    }

    // The query rows (of L) that see some key of [j0, j0 + keys): under causal none before the
    // row whose right bound reaches the first key, under a window none from the last key's
    // position + window on (unless a sink lies among the keys: then every row from i_begin).
    __device__ __forceinline__ QueryRows query_rows(int j0, int keys, int L) const {
        const int i_begin = causal ? (offset + right == 0 ? j0 : max(0, j0 - offset - right)) : 0;
        const bool far_end = window > 0 && j0 >= sinks;
        return {i_begin, far_end ? min(L, j0 + keys - 1 - offset + window) : L};
    }

    // Which of a block's key tiles a mask edge (or S) crosses: the first n_first (the window's far
    // end, for some row: last_row + offset - j0 >= window) and those from n_last on (keys past the
    // block's first row's position + right under causal, or past S).
    template <int KEYS>
    __device__ __forceinline__ EdgeTiles edge_tiles(const KeyTiles& kt, int S) const {
        return tile_edges<KEYS>(causal, window, right, kt.row0 + offset, kt.last_row + offset, kt.j_begin, kt.n_tiles, S);
    }

    // The rules, on plain ints: p = i + offset, a row's key position, already added by the
    // methods above (one add where a kernel tests many pairs of the same rows). Where right and
    // sinks are the constant 0 (from_args with three arguments or two) their terms fold away.
    // THE rule: key j, d = p - j positions behind row i's position, against both bounds.
    static __device__ __forceinline__ bool pair_at(int causal, int window, int right, int sinks, bool inside, int d,
                                                   int j) {
        return inside && (!causal || d + right >= 0) && (window <= 0 || d < window || j < sinks);
    }
    template <int KEYS>
    static __device__ __forceinline__ EdgeTiles tile_edges(int causal, int window, int right, int p0, int p_last,
                                                           int j_begin, int n_tiles, int S) {
        int n_first = 0;
        if (window > 0 && p_last - window >= j_begin)
            n_first = min(n_tiles, (p_last - window - j_begin) / KEYS + 1);
        // the last tile's j0 that no row's right bound cuts, nor S
        const int j0_max = causal ? min(S - KEYS, p0 + right - KEYS + 1) : S - KEYS;
        const int n_last = j0_max < j_begin ? n_first : max(n_first, min(n_tiles, (j0_max - j_begin) / KEYS + 1));
        return {n_first, n_last};
    }
    // Over a rectangle of positions [p_first, p_last] x keys the difference j - p fills one
    // interval: its two ends decide. A sink among the keys (j_first < sinks) passes the left bound.
    static __device__ __forceinline__ bool any_pair(int causal, int window, int right, int sinks, bool inside,
                                                    int p_first, int p_last, int j_first, int j_last) {
        return inside && (!causal || j_first <= p_last + right)
               && (window <= 0 || j_last > p_first - window || j_first < sinks);
    }
    // (A sink among the keys can only make a pair visible: "some hidden" stays a safe answer.)
    static __device__ __forceinline__ bool some_hidden(int causal, int window, int right, bool beyond, int p_first,
                                                       int p_last, int j_first, int j_last) {
        return beyond || (causal && j_last > p_first + right) || (window > 0 && j_first <= p_last - window);
    }
};

// ------------------------------------------------------------------------------------------------
// The 8x8 GEMM tile, for scores_kernel2 and av_kernel2 (and the staged backward's kernel2s).
//
// scores_kernel1 and av_kernel1 compute one output per thread, so every FMA needs two shared
// loads (one of each operand) and shared memory, not arithmetic, bounds them. Here each thread
// computes an 8x8 block of outputs: per step along k it loads 8 values of A and 8 of B (four
// 16-byte loads) and does 64 FMAs with them, a 16x better ratio of shared loads to FMAs. The
// stages stay separate launches: `attend` shows each one.
//
// The copy from global memory is a register prefetch, the classic pipeline of register-tiled
// GEMMs: the loads of slice s+1 go out into registers before the 512 FMAs of slice s and are
// stored to shared memory after them. A load that went straight to shared memory would stall
// its warp until the data came back (a few hundred cycles from DRAM), before any FMA of the
// slice, and only other warps could fill that time; held in registers, it is in flight while
// the warp's own FMAs run. What it costs is registers: 8 (128x128 tile) or 16 (64x64) more live
// across the FMAs, beside 64 accumulators and 16-32 of fragments, under a launch bound that
// gives 128 (two blocks of 256, or eight of 64, per SM); the copy keeps its own share down with
// float4 loads (four elements per load, one address) and one running pointer per operand, and
// av/dq_kernel2 hold half a slice at a time. Summation order is unchanged: same bits as a copy
// that stores before the FMAs.

#define GEMM_BK 8  // k-slice per shared-memory tile

// Four consecutive floats from p, of which the first `count` are wanted (count <= 0: none),
// zeros in place of the rest. VEC: one 16-byte load, for a caller whose p is 16-byte aligned and
// whose count is a multiple of 4; otherwise four loads, each predicated on its element.
template <bool VEC>
__device__ __forceinline__ float4 load4_or_zero(const float* p, int count) {
    if (VEC) return count > 0 ? *(const float4*)p : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    return make_float4(count > 0 ? p[0] : 0.0f, count > 1 ? p[1] : 0.0f, count > 2 ? p[2] : 0.0f,
                       count > 3 ? p[3] : 0.0f);
}

// The k loop of gemm_tile_8x8 (below), into acc. VEC: every copied row segment is 16-byte
// aligned and the tile's edges (M, N, k_end) cut no float4 in two, so the copy moves one float4
// per load instruction; gemm_tile_8x8 decides for the block, the same for all its threads.
template <int BM, int BN, bool B_NK, bool A_KM, bool VEC>
__device__ __forceinline__ void gemm_tile_8x8_k_loop(float (&a_s)[2][GEMM_BK][BM + 4], float (&b_s)[2][GEMM_BK][BN + 4],
                                                     float (&acc)[8][8], const float* __restrict__ A, int lda,
                                                     const float* __restrict__ B, int ldb, int M, int N, int k_end,
                                                     int row0, int col0, int k_begin) {
    constexpr int THREADS = (BM / 8) * (BN / 8);
    const int tid = threadIdx.x, tx = tid % (BN / 8), ty = tid / (BN / 8);

    // The copy of a k-slice moves float4s: four consecutive elements of a row of A or B as
    // stored in memory. Where an operand is read along k (A unless A_KM, B if B_NK) a row holds
    // two of them per slice (k0..k0+3 and k0+4..k0+7), two threads per row, and the four values
    // go down a column of the transposed tile (a_s[kq + c][i]); a thread's vectors are THREADS/2
    // rows apart. Where it is read along its rows (A_KM, !B_NK) a tile row segment is one float4,
    // stored as one; a thread's vectors lie in one k row, THREADS/2 elements apart, so one
    // pointer and one bound on k serve them all. Vectors per thread and operand: 1 at 128x128
    // (256 threads), 2 at 64x64 (64 threads).
    constexpr int A_VECS = BM * GEMM_BK / 4 / THREADS, B_VECS = BN * GEMM_BK / 4 / THREADS;
    static_assert(A_VECS * 4 * THREADS == BM * GEMM_BK && B_VECS * 4 * THREADS == BN * GEMM_BK, "whole float4s");
    constexpr int VEC_STEP = THREADS / 2;  // tile rows (along k) or elements (along a row) between a thread's vectors
    constexpr int ROW_THREADS = THREADS / GEMM_BK;  // threads per k row, along a row
    // along k: tile row tid/2, k's 4·(tid%2) ..; along a row: k row tid/ROW_THREADS, elements 4·(tid%ROW_THREADS) ..
    const int a_i = A_KM ? 4 * (tid % ROW_THREADS) : tid / 2, a_k = A_KM ? tid / ROW_THREADS : 4 * (tid % 2);
    const int b_j = B_NK ? tid / 2 : 4 * (tid % ROW_THREADS), b_k = B_NK ? 4 * (tid % 2) : tid / ROW_THREADS;
    // this thread's first vector of slice k_begin, advanced a slice at a time
    const float* a_src = A_KM ? A + (long)(k_begin + a_k) * lda + row0 + a_i : A + (long)(row0 + a_i) * lda + k_begin + a_k;
    const float* b_src = B_NK ? B + (long)(col0 + b_j) * ldb + k_begin + b_k : B + (long)(k_begin + b_k) * ldb + col0 + b_j;
    const long a_slice = A_KM ? (long)GEMM_BK * lda : GEMM_BK, b_slice = B_NK ? GEMM_BK : (long)GEMM_BK * ldb;
    // what is left of the thread's k range (along k: counted from its first k in the slice), or of its rows
    const int a_left = A_KM ? M - (row0 + a_i) : k_end - (k_begin + a_k);
    const int b_left = B_NK ? k_end - (k_begin + b_k) : N - (col0 + b_j);

    // The register prefetch (see above): fetch() loads a slice into a_next/b_next, stash() stores
    // them to a shared stage. PARTS > 1 splits a slice's copy: part p is fetched before the FMAs
    // of k-steps p·GEMM_BK/PARTS .. and stashed after them, so only its share is held at a time
    // (still 256 FMAs ahead of its use). Where to split was settled by compiling for sm_80 and
    // sm_90 (tests/backends/launch/test_kernel_compile.py): whole slices spill in av/dq_kernel2 (A read along k,
    // its copy transposed), halves spill in dv_kernel2 (A_KM), so av and dq take halves, the
    // rest whole slices.
    constexpr int PARTS = THREADS == 64 && !A_KM ? 2 : 1;
    auto in_part = [](int v, int part) { return v * PARTS / (A_VECS + B_VECS) == part; };  // v: A's vectors, then B's
    float4 a_next[A_VECS], b_next[B_VECS];
    // slice s (k0 = k_begin + s·GEMM_BK); a fetch past k_end loads nothing and holds zeros
    auto fetch = [&](int s, int part) {
        const int dk = s * GEMM_BK;
#pragma unroll
        for (int n = 0; n < A_VECS; ++n) {
            if (!in_part(n, part)) continue;
            if (A_KM)  // k row k0 + a_k, elements a_i + n·VEC_STEP ..: rows of C
                a_next[n] = load4_or_zero<VEC>(a_src + n * VEC_STEP, a_k + dk < k_end - k_begin ? a_left - n * VEC_STEP : 0);
            else       // tile row a_i + n·VEC_STEP, k's k0 + a_k ..
                a_next[n] = load4_or_zero<VEC>(a_src + (long)n * VEC_STEP * lda,
                                               row0 + a_i + n * VEC_STEP < M ? a_left - dk : 0);
        }
#pragma unroll
        for (int n = 0; n < B_VECS; ++n) {
            if (!in_part(A_VECS + n, part)) continue;
            if (B_NK)  // like A: row j of B is column j of the tile
                b_next[n] = load4_or_zero<VEC>(b_src + (long)n * VEC_STEP * ldb,
                                               col0 + b_j + n * VEC_STEP < N ? b_left - dk : 0);
            else       // row k of B is row k of the tile
                b_next[n] = load4_or_zero<VEC>(b_src + n * VEC_STEP, b_k + dk < k_end - k_begin ? b_left - n * VEC_STEP : 0);
        }
        if (part == PARTS - 1) a_src += a_slice, b_src += b_slice;
    };
    auto stash = [&](int stage, int part) {
#pragma unroll
        for (int n = 0; n < A_VECS; ++n) {
            if (!in_part(n, part)) continue;
            if (A_KM) {
                *(float4*)&a_s[stage][a_k][a_i + n * VEC_STEP] = a_next[n];
            } else {
                const int i = a_i + n * VEC_STEP;
                a_s[stage][a_k][i] = a_next[n].x, a_s[stage][a_k + 1][i] = a_next[n].y;
                a_s[stage][a_k + 2][i] = a_next[n].z, a_s[stage][a_k + 3][i] = a_next[n].w;
            }
        }
#pragma unroll
        for (int n = 0; n < B_VECS; ++n) {
            if (!in_part(A_VECS + n, part)) continue;
            if (B_NK) {
                const int j = b_j + n * VEC_STEP;
                b_s[stage][b_k][j] = b_next[n].x, b_s[stage][b_k + 1][j] = b_next[n].y;
                b_s[stage][b_k + 2][j] = b_next[n].z, b_s[stage][b_k + 3][j] = b_next[n].w;
            } else {
                *(float4*)&b_s[stage][b_k][b_j + n * VEC_STEP] = b_next[n];
            }
        }
    };

#pragma unroll
    for (int part = 0; part < PARTS; ++part) fetch(0, part), stash(0, part);
    int stage = 0;
    for (int s = 1; k_begin + (s - 1) * GEMM_BK < k_end; ++s, stage ^= 1) {
        __syncthreads();  // slice `stage` is complete, and everyone is done reading the other one
#pragma unroll
        for (int kk = 0; kk < GEMM_BK; ++kk) {
            if (kk % (GEMM_BK / PARTS) == 0) {
                if (kk > 0) stash(stage ^ 1, kk / (GEMM_BK / PARTS) - 1);
                fetch(s, kk / (GEMM_BK / PARTS));  // in flight during the FMAs below (zeros after the last slice: no branch)
            }
            const float4 a_lo = *(const float4*)&a_s[stage][kk][4 * ty];
            const float4 a_hi = *(const float4*)&a_s[stage][kk][BM / 2 + 4 * ty];
            const float4 b_lo = *(const float4*)&b_s[stage][kk][4 * tx];
            const float4 b_hi = *(const float4*)&b_s[stage][kk][BN / 2 + 4 * tx];
            const float a[8] = {a_lo.x, a_lo.y, a_lo.z, a_lo.w, a_hi.x, a_hi.y, a_hi.z, a_hi.w};
            const float b[8] = {b_lo.x, b_lo.y, b_lo.z, b_lo.w, b_hi.x, b_hi.y, b_hi.z, b_hi.w};
#pragma unroll
            for (int r = 0; r < 8; ++r)
#pragma unroll
                for (int c = 0; c < 8; ++c) acc[r][c] += a[r] * b[c];
        }
        stash(stage ^ 1, PARTS - 1);  // the other stage: nobody reads it before the next barrier
    }
}

// One output tile C[row0 .. row0+BM) x [col0 .. col0+BN) of C = A · B, for a block of
// (BM/8)·(BN/8) threads, each owning rows {4ty..4ty+3, BM/2+4ty..} x cols {4tx..4tx+3, BN/2+4tx..}:
// two groups of four, so that a quarter warp's 16-byte loads fall on consecutive addresses
// (no bank conflicts) where eight adjacent columns per thread would collide two by two.
//   A: (M, k_end..) row-major with row stride lda
//   B_NK:  B is given as (N, K) row-major (K^T in Q·K^T: both operands are read along k)
//   !B_NK: B is given as (K, N) row-major (V in P·V)
//   A_KM:  A is given as (K, M) row-major: C = A^T·B (P^T·dO and dS^T·Q in the backward)
// k runs from k_begin (a causal backward skips the rows that see none of the tile) to k_end;
// C = scale · (A·B) on the store.
// Two shared-memory stages: the next k-slice is copied into one while the FMAs read the other,
// so one barrier per slice suffices.
template <int BM, int BN, bool B_NK, bool A_KM = false>
__device__ __forceinline__ void gemm_tile_8x8(const float* __restrict__ A, int lda,
                                              const float* __restrict__ B, int ldb,
                                              float* __restrict__ C, int ldc,
                                              int M, int N, int k_end, int row0, int col0,
                                              int k_begin = 0, float scale = 1.0f) {
    // a_s[stage][k][i] = A[row0 + i][k0 + k] (transposed, so a thread's rows are one float4);
    // b_s[stage][k][j] = B(k0 + k, col0 + j). The +4 keeps the transposing stores off shared
    // bank conflicts while rows stay 16-byte aligned for the float4 reads.
    __shared__ __align__(16) float a_s[2][GEMM_BK][BM + 4];
    __shared__ __align__(16) float b_s[2][GEMM_BK][BN + 4];
    const int tx = threadIdx.x % (BN / 8), ty = threadIdx.x / (BN / 8);

    float acc[8][8];  // acc[r][c]: row (r < 4 ? 4ty + r : BM/2 + 4ty + r - 4), likewise columns
#pragma unroll
    for (int r = 0; r < 8; ++r)
#pragma unroll
        for (int c = 0; c < 8; ++c) acc[r][c] = 0.0f;

    // float4 copies where every row segment the block copies starts on 16 bytes (the operands'
    // first elements, row strides, k_begin, row0, col0) and the edges M, N, k_end fall on
    // multiples of 4 (in practice d and T multiples of 4); element by element otherwise
    const bool vec = ((size_t)A | (size_t)B) % 16 == 0 && (lda | ldb | k_begin | row0 | col0 | k_end) % 4 == 0 &&
                     (A_KM ? M : 0) % 4 == 0 && (B_NK ? 0 : N) % 4 == 0;
    if (vec)
        gemm_tile_8x8_k_loop<BM, BN, B_NK, A_KM, true>(a_s, b_s, acc, A, lda, B, ldb, M, N, k_end, row0, col0, k_begin);
    else
        gemm_tile_8x8_k_loop<BM, BN, B_NK, A_KM, false>(a_s, b_s, acc, A, lda, B, ldb, M, N, k_end, row0, col0, k_begin);

    const bool aligned = ldc % 4 == 0;  // every row of C starts on 16 bytes: float4 stores
#pragma unroll
    for (int r = 0; r < 8; ++r) {
        const int i = row0 + (r < 4 ? 4 * ty + r : BM / 2 + 4 * ty + r - 4);
        if (i >= M) continue;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int j = col0 + half * (BN / 2) + 4 * tx;
            const float v[4] = {acc[r][4 * half] * scale, acc[r][4 * half + 1] * scale, acc[r][4 * half + 2] * scale,
                                acc[r][4 * half + 3] * scale};
            float* dst = C + (long)i * ldc + j;
            if (aligned && j + 3 < N) {
                *(float4*)dst = make_float4(v[0], v[1], v[2], v[3]);
            } else {
                for (int c = 0; c < 4; ++c)
                    if (j + c < N) dst[c] = v[c];
            }
        }
    }
}

// ================================================================================================
// STAGED ATTENTION: one launch per stage of the equation, each writing its (H, T, T) or (H, T, d)
// result to memory, every variant of a stage next to the others.
// ------------------------------------------------------------------------------------------------

// ------------------------------------------------------------------------------------------------
// scores: S = Q · K^T

extern "C" __global__ void scores_kernel1(const float* __restrict__ q,  // (H, L, d_k)
                                          const float* __restrict__ k,  // (H / group, S, d_k)
                                          float* __restrict__ scores,   // (H, L, S)
                                          int L, int S, int d_k, int group) {
    // q_tile[r][c] = Q[row0 + r][c0 + c]; k_tile[r][c] = K[col0 + r][c0 + c]. The +1 column
    // keeps threads of one warp on different shared-memory banks when they read k_tile[tx][c].
    __shared__ float q_tile[TILE][TILE + 1];
    __shared__ float k_tile[TILE][TILE + 1];

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;
    const long head = blockIdx.z;
    q += head * L * d_k;
    k += head / group * S * d_k;  // query head h reads K/V head h / group (grouped-query attention)
    scores += head * L * S;

    const int i = row0 + ty;  // query row of this thread's output
    const int j = col0 + tx;  // key of this thread's output
    float acc = 0.0f;
    for (int c0 = 0; c0 < d_k; c0 += TILE) {
        // Each thread loads one element of each tile; outside the matrices it loads 0, which
        // adds nothing to the dot product.
        const int qr = row0 + ty, kr = col0 + ty, c = c0 + tx;
        q_tile[ty][tx] = (qr < L && c < d_k) ? q[(long)qr * d_k + c] : 0.0f;
        k_tile[ty][tx] = (kr < S && c < d_k) ? k[(long)kr * d_k + c] : 0.0f;
        __syncthreads();  // the tiles are complete before anyone reads them
        for (int cc = 0; cc < TILE; ++cc) acc += q_tile[ty][cc] * k_tile[tx][cc];
        __syncthreads();  // everyone is done reading before the next tiles overwrite them
    }
    if (i < L && j < S) scores[(long)i * S + j] = acc;
}

// scores_kernel2: S = Q · K^T, 128x128 outputs per block of 256 threads, 8x8 per thread.
extern "C" __global__ void __launch_bounds__(256, 2) scores_kernel2(const float* __restrict__ q,  // (H, L, d_k)
                                                                 const float* __restrict__ k,  // (H / group, S, d_k)
                                                                 float* __restrict__ scores,   // (H, L, S)
                                                                 int L, int S, int d_k, int group) {
    const long head = blockIdx.z;
    gemm_tile_8x8<128, 128, true>(q + head * L * d_k, d_k, k + head / group * S * d_k, d_k, scores + head * L * S, S,
                                  L, S, d_k, blockIdx.y * 128, blockIdx.x * 128);
}

// ------------------------------------------------------------------------------------------------
// scale: S' = S / sqrt(d_k), as the course writes it: every score times (1.0f / sqrtf(d_k)), one
// float multiply per score, the factor worked out here from d_k. Out of place, so the unscaled
// scores stay available for statistics.
// `given` is 0 for the course's factor, or a factor of the caller's own (the Python API's
// scale=, as PyTorch's SDPA takes it), used as given. A sentinel rather than a second flag: a
// factor is positive (andrea refuses 0 and below before any launch), so 0 can mean nothing else,
// and the kernel keeps its one float. --no-scale launches no scale stage at all.

extern "C" __global__ void scale_kernel1(const float* __restrict__ in,  // (n)
                                         float* __restrict__ out,       // (n)
                                         long n, int d_k, float given) {
    const float scale = given != 0.0f ? given : 1.0f / sqrtf((float)d_k);  // the course's 1/sqrt(d_k)
    const long stride = (long)gridDim.x * blockDim.x;
    for (long idx = (long)blockIdx.x * blockDim.x + threadIdx.x; idx < n; idx += stride)
        out[idx] = in[idx] * scale;
}

// ------------------------------------------------------------------------------------------------
// mask: every score the Mask hides (the future under causal; with a window, the distant past)
// gets -inf. Not -1e9: exp(-inf) is exactly 0, so masked weights are exactly 0 and a fully masked
// row is detectable (its max is -inf) instead of silently becoming a uniform distribution.

extern "C" __global__ void mask_kernel1(const float* __restrict__ in,  // (H, L, S)
                                        float* __restrict__ out,       // (H, L, S)
                                        int L, int S, int causal, int window, int offset, int right, int sinks, int alibi) {
    const Mask mask = Mask::from_args(causal, window, offset, right, sinks, alibi);
    const int j = blockIdx.x * TILE + threadIdx.x;  // key
    const int i = blockIdx.y * TILE + threadIdx.y;  // query
    if (i >= L || j >= S) return;
    const long idx = (long)blockIdx.z * L * S + (long)i * S + j;
    // ALiBi: the visible score less m_h times how far the key lies behind the query (0 without:
    // x + -0.0f is x, bit for bit)
    const float bias = Mask::bias_at(mask.slope(blockIdx.z), i + offset - j);
    out[idx] = mask.visible(i, j) ? in[idx] + bias : -INFINITY;
}

// mask_kernel2: a mask given as an array, added to the scaled scores. -inf hides a key (a bool
// mask arrives as 0 where True, -inf where False); a row whose every entry is -inf gets zeros
// from the softmax, as under mask_kernel1. bias_heads 1: one (L, S) array broadcast over the
// heads; H: a (L, S) array per head.
extern "C" __global__ void mask_kernel2(const float* __restrict__ in,    // (H, L, S)
                                        const float* __restrict__ bias,  // (bias_heads, L, S)
                                        float* __restrict__ out,         // (H, L, S)
                                        int L, int S, int bias_heads) {
    const int j = blockIdx.x * TILE + threadIdx.x;  // key
    const int i = blockIdx.y * TILE + threadIdx.y;  // query
    if (i >= L || j >= S) return;
    const long cell = (long)i * S + j;
    const long head = blockIdx.z;
    out[head * L * S + cell] = in[head * L * S + cell] + bias[(bias_heads == 1 ? 0 : head) * L * S + cell];
}

// ------------------------------------------------------------------------------------------------
// softmax: P[i][j] = exp(S'[i][j] - m_i) / sum_j exp(S'[i][j] - m_i), m_i = max_j S'[i][j].
// Subtracting the row max changes nothing mathematically and keeps exp() from overflowing:
// unscaled scores at d_k = 4096 reach 200+, and expf(89) is already inf in float32.

extern "C" __global__ void softmax_kernel1(const float* __restrict__ in,  // (H, L, S)
                                           float* __restrict__ out,       // (H, L, S)
                                           int L, int S) {
    extern __shared__ float warp_results[];  // (blockDim.x / 32)
    const long row = ((long)blockIdx.z * L + blockIdx.x) * S;
    const float* x = in + row;
    float* p = out + row;

    float m = -INFINITY;
    for (int j = threadIdx.x; j < S; j += blockDim.x) m = fmaxf(m, x[j]);
    m = block_reduce(m, warp_results, true);

    // A row whose every entry is masked has m = -inf; exp(-inf - -inf) would be NaN. Such a row
    // attends to nothing: give it zeros rather than NaNs (the Python side reports it).
    if (m == -INFINITY) {
        for (int j = threadIdx.x; j < S; j += blockDim.x) p[j] = 0.0f;
        return;  // every thread of the block takes this branch: m is the same for all
    }

    float sum = 0.0f;
    for (int j = threadIdx.x; j < S; j += blockDim.x) sum += expf(x[j] - m);
    sum = block_reduce(sum, warp_results, false);

    const float inv_sum = 1.0f / sum;
    for (int j = threadIdx.x; j < S; j += blockDim.x) p[j] = expf(x[j] - m) * inv_sum;
}

extern "C" __global__ void softmax_kernel2(const float* __restrict__ in,  // (H, L, S)
                                           float* __restrict__ out,       // (H, L, S)
                                           int L, int S) {
    // One warp per row: for short rows a whole block per row leaves most threads idle.
    const int i = blockIdx.x * blockDim.y + threadIdx.y;
    const int lane = threadIdx.x;
    if (i >= L) return;  // the whole warp leaves together, so no shuffle loses a partner
    const long row = ((long)blockIdx.z * L + i) * S;
    const float* x = in + row;
    float* p = out + row;

    float m = -INFINITY;
    for (int j = lane; j < S; j += 32) m = fmaxf(m, x[j]);
    m = warp_max(m);
    if (m == -INFINITY) {
        for (int j = lane; j < S; j += 32) p[j] = 0.0f;
        return;
    }
    float sum = 0.0f;
    for (int j = lane; j < S; j += 32) sum += expf(x[j] - m);
    const float inv_sum = 1.0f / warp_sum(sum);
    for (int j = lane; j < S; j += 32) p[j] = expf(x[j] - m) * inv_sum;
}

#define LOG2E 1.4426950408889634f  // exp(x) = exp2(x · log2 e): exp2 is one MUFU.EX2 on a GPU
#define SOFTMAX3_VEC 4             // float4s per thread: a block of n threads holds 16·n values

// softmax_kernel3: one block per row with the whole row in registers, 16 values per thread:
// one read and one write of the row (kernel1 reads it three times), 16-byte loads where S % 4
// == 0, and exp2 of a pre-multiplied exponent. The launcher picks blockDim.x >= S / 16.
extern "C" __global__ void softmax_kernel3(const float* __restrict__ in,  // (H, L, S)
                                           float* __restrict__ out,       // (H, L, S)
                                           int L, int S) {
    __shared__ float warp_results[32];
    const long row = ((long)blockIdx.z * L + blockIdx.x) * S;
    const float* x = in + row;
    float* p = out + row;
    const bool vec = S % 4 == 0;  // the row starts on 16 bytes

    float e[4 * SOFTMAX3_VEC];  // e[4n + c] = x[4 (threadIdx.x + n blockDim.x) + c]: coalesced
    float m = -INFINITY;
#pragma unroll
    for (int n = 0; n < SOFTMAX3_VEC; ++n) {
        const int j = 4 * (threadIdx.x + n * blockDim.x);
        if (vec && j < S) {
            const float4 a = *(const float4*)(x + j);
            e[4 * n] = a.x; e[4 * n + 1] = a.y; e[4 * n + 2] = a.z; e[4 * n + 3] = a.w;
        } else {
#pragma unroll
            for (int c = 0; c < 4; ++c) e[4 * n + c] = j + c < S ? x[j + c] : -INFINITY;
        }
#pragma unroll
        for (int c = 0; c < 4; ++c) m = fmaxf(m, e[4 * n + c]);
    }
    m = block_reduce(m, warp_results, true);

    const bool empty = m == -INFINITY;  // a fully masked row gets zeros (see softmax_kernel1)
    float sum = 0.0f;
#pragma unroll
    for (int n = 0; n < 4 * SOFTMAX3_VEC; ++n) {
        // (x - m) first, then the log2 e factor: the subtraction is exact near the max, and
        // exp2's argument carries one more rounding than exp's, not an error of |m|
        e[n] = empty ? 0.0f : exp2f((e[n] - m) * LOG2E);  // masked: exp2(-inf) = 0
        sum += e[n];
    }
    sum = block_reduce(sum, warp_results, false);
    const float inv_sum = empty ? 0.0f : 1.0f / sum;

#pragma unroll
    for (int n = 0; n < SOFTMAX3_VEC; ++n) {
        const int j = 4 * (threadIdx.x + n * blockDim.x);
        if (vec && j < S) {
            *(float4*)(p + j) = make_float4(e[4 * n] * inv_sum, e[4 * n + 1] * inv_sum, e[4 * n + 2] * inv_sum,
                                            e[4 * n + 3] * inv_sum);
        } else {
#pragma unroll
            for (int c = 0; c < 4; ++c)
                if (j + c < S) p[j + c] = e[4 * n + c] * inv_sum;
        }
    }
}

// ------------------------------------------------------------------------------------------------
// av: O = P · V, output[i] = sum_j P[i][j] · V[j].

extern "C" __global__ void av_kernel1(const float* __restrict__ weights,  // (H, L, S)
                                      const float* __restrict__ v,        // (H / group, S, d_v)
                                      float* __restrict__ out,            // (H, L, d_v)
                                      int L, int S, int d_v, int group, int causal, int window, int offset, int right, int sinks, int alibi) {
    __shared__ float p_tile[TILE][TILE + 1];  // p_tile[r][c] = P[row0 + r][j0 + c]
    __shared__ float v_tile[TILE][TILE + 1];  // v_tile[r][c] = V[j0 + r][col0 + c]

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;
    const long head = blockIdx.z;
    weights += head * L * S;
    v += head / group * S * d_v;  // query head h reads K/V head h / group
    out += head * L * d_v;

    // P[i][j] = 0 wherever the Mask hides key j from row i, so only the key tiles this block's
    // rows can see contribute (causal: none past its last row; a window: none before its first
    // row's window): skipping the rest halves the causal work without changing a bit of the result.
    const KeyTiles kt = Mask::from_args(causal, window, offset, right, sinks, alibi).key_tiles<TILE>(row0, TILE, L, S);

    const int i = row0 + ty, c = col0 + tx;
    float acc = 0.0f;
    for (int j0 = kt.j_begin; j0 < kt.j_end; j0 += TILE) {
        const int pj = j0 + tx, vj = j0 + ty;
        p_tile[ty][tx] = (i < L && pj < S) ? weights[(long)i * S + pj] : 0.0f;
        v_tile[ty][tx] = (vj < S && c < d_v) ? v[(long)vj * d_v + c] : 0.0f;
        __syncthreads();
        for (int jj = 0; jj < TILE; ++jj) acc += p_tile[ty][jj] * v_tile[jj][tx];
        __syncthreads();
    }
    if (i < L && c < d_v) out[(long)i * d_v + c] = acc;
}

// av_kernel2: O = P · V, 64x64 outputs per block of 64 threads, 8x8 per thread (d_v is 64 or
// 128 in practice: a 128-wide tile would leave half of it idle). The k loop stops where the Mask
// says the block's rows see no more keys, as in av_kernel1. It starts at key 0 even under a
// window: k_begin = kt.j_begin costs it 168 bytes of spill on sm_80 (its 128 registers are full).
extern "C" __global__ void __launch_bounds__(64, 8) av_kernel2(const float* __restrict__ weights,  // (H, L, S)
                                                            const float* __restrict__ v,        // (H / group, S, d_v)
                                                            float* __restrict__ out,            // (H, L, d_v)
                                                            int L, int S, int d_v, int group, int causal, int window,
                                                            int offset, int right, int sinks, int alibi) {
    // Grouped heads as one taller product: the `group` query heads that read K/V head blockIdx.z
    // lie one after the other in P and O, so their P rows stacked, (group·L, S), times the one V
    // give their O rows, (group·L, d_v); grid (ceil(d_v/64), ceil(group·L/64), H / group). (Query
    // head h / group computed per block instead spills 112 bytes on sm_80: 128 registers are full.)
    // A block's rows run over query positions row0 % L .. and, past L, on into the next head's
    // first rows, which see fewer keys: the keys row0 % L .. L - 1 see bound the block's.
    const long kv_head = blockIdx.z;
    const int row0 = blockIdx.y * 64;
    const KeyTiles kt = Mask::from_args(causal, window, offset, right, sinks, alibi).key_tiles<GEMM_BK>(row0 % L, 64, L, S);
    gemm_tile_8x8<64, 64, false>(weights + kv_head * group * L * S, S, v + kv_head * S * d_v, d_v,
                                 out + kv_head * group * L * d_v, d_v, group * L, d_v, kt.j_end, row0, blockIdx.x * 64);
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

// Q·K^T in fours. The fused fp32 kernels add each score's products four at a time (the four of a
// float4) and then add that to the running sum, rather than all d_k of them into one chain. On
// huge scores (Q, K of 100, d 128: scores near 1e4) a score's float32 error is its running sum's
// roundings, each up to half an ulp of a sum ~|s|: one chain makes d_k of them, fours d_k / 4 at
// the running sum and three at a sum four times smaller. RMS score errors over torch's, whose
// CPU matmul is one FMA chain (scripts/extreme_scores.py --orders, T 400, d 128, 3 seeds): one
// chain 1.02 (kernels 1 and 3 before), fours 0.58 (kernel3), rounded once from the exact score
// 0.12; Q times scale·log2 e before the sum or the scale after it changes nothing (1.01). Kernel3
// stops at fours: one more instruction per four products (an add), no register. Kernels 1 and 2,
// one score per lane, also keep what each addition to s rounds away and give it back on the next
// (Kahan: one register, three more adds per four products): 0.32, the products' own roundings left.
__device__ __forceinline__ void kahan_add(float& s, float& lost, float x) {
    const float y = x - lost;  // what the last addition rounded away, given back
    const float t = s + y;
    lost = (t - s) - y;  // t's rounding (exact while |s| >= |y|): no fast-math, so no reassociation
    s = t;
}

// The row's logsumexp, log(sum_j exp(s_j)) = m + log(l), saved by the _lse kernels for the fused
// backward, which recomputes P[i][j] = exp(s_ij - lse_i) from it. A row that saw no key (l = 0)
// gets +inf, so the recomputed P is exp(s - inf) = 0 there, as in the forward.
__device__ __forceinline__ float row_logsumexp(float m, float l) { return l > 0.0f ? m + logf(l) : INFINITY; }

// The fused fp32 kernels' scores take two additive terms beside the Mask's -inf: ALiBi's
// -m_h · (p - j) (slope_h = mask.slope(head); kernel3 adds it itself, in base 2) and, in
// kernels 1 and 2, a mask array's entry (bool masks arrive as 0 / -inf), its row bias_row of one (L, S) array
// broadcast over the heads (bias_heads 1) or of the head's own (bias_heads H). Each entry is
// used once, by the one thread that holds its score, so it is read straight from global memory
// beside the K tile (a warp's 32 keys of a row: one coalesced 128-byte line), with no copy in
// shared memory. Both are skipped by block-uniform tests when absent.
__device__ __forceinline__ const float* bias_row_of(const float* __restrict__ bias, int bias_heads, long head, int i,
                                                    int L, int S) {
    if (bias == nullptr || i >= L) return nullptr;
    return bias + ((bias_heads == 1 ? 0 : head) * L + i) * (long)S;
}
__device__ __forceinline__ float score_bias(const Mask& mask, float slope_h, const float* __restrict__ bias_row, int p,
                                            int j, bool inside) {
    float add = mask.alibi > 0 ? Mask::bias_at(slope_h, p - j) : 0.0f;
    if (bias_row != nullptr && inside) add += bias_row[j];
    return add;
}

// The body of attention_fused_kernel1 and attention_fused_lse_kernel1: lse is nullptr for the
// first (a constant after inlining, so the plain kernel carries no trace of it).
__device__ __forceinline__ void attention_fused1(const float* __restrict__ q,  // (H, L, d_k)
                                                 const float* __restrict__ k,  // (H / group, S, d_k)
                                                 const float* __restrict__ v,  // (H / group, S, d_v)
                                                 float* __restrict__ out,      // (H, L, d_v)
                                                 float* __restrict__ lse,      // (H, L) or nullptr
                                                 int L, int S, int d_k, int d_v, int group, float scale,
                                                 int causal, int window, int offset, int right, int sinks, int alibi,
                                                 const float* __restrict__ bias, int bias_heads) {
    // One warp per query row, blockDim.y rows per block, all of them sharing each K/V tile.
    // grid (ceil(L / blockDim.y), 1, H), block (32, rows). Dynamic shared memory, in floats:
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

    // Under a causal mask the last query tiles have the most key tiles: they go out first.
    const Mask mask = Mask::from_args(causal, window, offset, right, sinks, alibi);
    const BlockWork work = causal_block_order(mask.causal, true);
    const int row0 = work.tile * rows;
    const int i = row0 + r;  // this warp's query row (may be >= L in the last tile)
    const long head = work.head;
    q += head * L * d_k;
    k += head / group * S * d_k;  // query head h reads K/V head h / group
    v += head / group * S * d_v;
    out += head * L * d_v;

    for (int idx = tid; idx < rows * d_k; idx += n_threads) {
        const int rr = idx / d_k, c = idx % d_k;
        q_s[idx] = (row0 + rr < L) ? q[(long)(row0 + rr) * d_k + c] : 0.0f;
    }

    // The key tiles any row of this block can see (the Mask's); the others are skipped entirely.
    const KeyTiles kt = mask.key_tiles<FUSED_KEYS>(row0, rows, L, S);

    float m = -INFINITY;  // running max of this row's visible scores
    float l = 0.0f;       // running sum of exp(s - m)
    float acc[FUSED_MAX_D / 32];  // acc[t] = output column lane + 32 t, unnormalised
#pragma unroll
    for (int t = 0; t < FUSED_MAX_D / 32; ++t) acc[t] = 0.0f;

    for (int j0 = kt.j_begin; j0 < kt.j_end; j0 += FUSED_KEYS) {
        __syncthreads();  // the previous tile is fully read (and, first time, q_s is written)
        for (int idx = tid; idx < FUSED_KEYS * d_k; idx += n_threads) {
            const int jj = idx / d_k, c = idx % d_k;
            k_s[jj * ks + c] = (j0 + jj < S) ? k[(long)(j0 + jj) * d_k + c] : 0.0f;
        }
        for (int idx = tid; idx < FUSED_KEYS * d_v; idx += n_threads) {
            const int jj = idx / d_v;
            v_s[idx] = (j0 + jj < S) ? v[(long)j0 * d_v + idx] : 0.0f;
        }
        __syncthreads();

        // Does this row see any key of the tile? The same answer for the whole warp (one row
        // per warp), so skipping keeps the warp converged for the shuffles below.
        const bool any = mask.sees_any(i, i, j0, j0 + FUSED_KEYS - 1, i < L);
        if (!any) continue;

        // S tile: lane owns key j = j0 + lane.
        const int j = j0 + lane;
        const float* qi = q_s + r * d_k;
        const float* kj = k_s + lane * ks;
        float s = 0.0f, lost = 0.0f;  // Q·K^T in fours, compensated: see "Q·K^T in fours" above
        int c = 0;
        for (; c + 4 <= d_k; c += 4)
            kahan_add(s, lost, qi[c] * kj[c] + qi[c + 1] * kj[c + 1] + qi[c + 2] * kj[c + 2] + qi[c + 3] * kj[c + 3]);
        for (; c < d_k; ++c) kahan_add(s, lost, qi[c] * kj[c]);
        s *= scale;
        const bool visible = mask.visible(i, j, j < S);
        // ALiBi's slope and the row of a mask array, worked out here from the kernel's arguments
        // rather than held across the loop: two more live registers cost kernel1 a block per SM
        s = visible ? s + score_bias(mask, mask.slope(head), bias_row_of(bias, bias_heads, head, i, L, S), i + offset, j,
                                     j < S)
                    : -INFINITY;  // -inf, not -1e9: exp gives exactly 0

        // Online softmax. `any` guarantees one visible key in the tile, but a mask array may
        // still hide it (-inf): a row with no finite score yet subtracts 0, not -inf - -inf = NaN.
        const float m_new = fmaxf(m, warp_max(s));
        const float m_use = m_new == -INFINITY ? 0.0f : m_new;
        const float alpha = expf(m - m_use);  // m = -inf on the first visible tile: alpha = 0
        const float p = expf(s - m_use);      // masked: exp(-inf) = 0
        l = l * alpha + warp_sum(p);
        m = m_new;

        // acc = acc * alpha + P_tile · V_tile; p of key jj is broadcast from lane jj.
#pragma unroll
        for (int t = 0; t < FUSED_MAX_D / 32; ++t) acc[t] *= alpha;
        const int n_keys = min(FUSED_KEYS, S - j0);
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

    if (i >= L) return;
    if (lse != nullptr && lane == 0) lse[head * L + i] = row_logsumexp(m, l);
    // l = 0 only if the row saw no key at all: it attends to nothing and gets zeros, like the
    // staged softmax, rather than 0/0 = NaN.
    const float inv_l = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
    for (int t = 0; t < FUSED_MAX_D / 32; ++t) {
        const int c = lane + 32 * t;
        if (c < d_v) out[(long)i * d_v + c] = acc[t] * inv_l;
    }
}

extern "C" __global__ void attention_fused_kernel1(const float* __restrict__ q,  // (H, L, d_k)
                                                   const float* __restrict__ k,  // (H / group, S, d_k)
                                                   const float* __restrict__ v,  // (H / group, S, d_v)
                                                   float* __restrict__ out,      // (H, L, d_v)
                                                   int L, int S, int d_k, int d_v, int group, float scale,
                                                   int causal, int window, int offset, int right, int sinks, int alibi,
                                                   const float* __restrict__ bias, int bias_heads) {
    attention_fused1(q, k, v, out, nullptr, L, S, d_k, d_v, group, scale, causal, window, offset, right, sinks, alibi,
                     bias, bias_heads);
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
__device__ __forceinline__ void attention_fused2(const float* __restrict__ q,  // (H, L, d_k)
                                                 const float* __restrict__ k,  // (H / group, S, d_k)
                                                 const float* __restrict__ v,  // (H / group, S, d_v)
                                                 float* __restrict__ out,      // (H, L, d_v)
                                                 float* __restrict__ lse,      // (H, L) or nullptr
                                                 int L, int S, int d_k, int d_v, int group, float scale,
                                                 int causal, int window, int offset, int right, int sinks, int alibi,
                                                 const float* __restrict__ bias, int bias_heads) {
    extern __shared__ float4 fused_smem4[];  // float4: the array is 16-byte aligned
    const int rows = blockDim.y, lane = threadIdx.x, r = threadIdx.y;
    const int tid = r * 32 + lane, n_threads = rows * 32;
    const int ks = d_k + 4, dk4 = d_k / 4, dv4 = d_v / 4;
    float* q_s = (float*)fused_smem4;
    float* k_s = q_s + rows * d_k;
    float* v_s = k_s + FUSED_KEYS * ks;

    const Mask mask = Mask::from_args(causal, window, offset, right, sinks, alibi);
    const BlockWork work = causal_block_order(mask.causal, true);
    const int row0 = work.tile * rows;
    const int i = row0 + r;
    const long head = work.head;
    const float4* q4 = (const float4*)(q + head * L * d_k);  // d_k % 4 == 0: rows stay aligned
    const float4* k4 = (const float4*)(k + head / group * S * d_k);  // query head h reads K/V head h / group
    const float4* v4 = (const float4*)(v + head / group * S * d_v);
    out += head * L * d_v;
    // held across the loop here (kernel1 works them out per tile: its registers are full)
    const float slope_h = mask.slope(head);
    const float* bias_row = bias_row_of(bias, bias_heads, head, i, L, S);

    const float4 zero4 = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int idx = tid; idx < rows * dk4; idx += n_threads) {
        const int rr = idx / dk4;
        ((float4*)q_s)[idx] = (row0 + rr < L) ? q4[(long)row0 * dk4 + idx] : zero4;
    }

    const KeyTiles kt = mask.key_tiles<FUSED_KEYS>(row0, rows, L, S);

    float m = -INFINITY, l = 0.0f;
    float4 acc = zero4;  // output columns 4·lane .. 4·lane+3, unnormalised
    const bool owns_columns = 4 * lane < d_v;

    for (int j0 = kt.j_begin; j0 < kt.j_end; j0 += FUSED_KEYS) {
        __syncthreads();
        for (int idx = tid; idx < FUSED_KEYS * dk4; idx += n_threads) {
            const int jj = idx / dk4, c4 = idx % dk4;
            *(float4*)(k_s + jj * ks + 4 * c4) = (j0 + jj < S) ? k4[(long)(j0 + jj) * dk4 + c4] : zero4;
        }
        for (int idx = tid; idx < FUSED_KEYS * dv4; idx += n_threads) {
            const int jj = idx / dv4;
            ((float4*)v_s)[idx] = (j0 + jj < S) ? v4[(long)j0 * dv4 + idx] : zero4;
        }
        __syncthreads();

        const bool any = mask.sees_any(i, i, j0, j0 + FUSED_KEYS - 1, i < L);
        if (!any) continue;

        const int j = j0 + lane;
        const float4* qi = (const float4*)(q_s + r * d_k);
        const float4* kj = (const float4*)(k_s + lane * ks);
        float s = 0.0f, lost = 0.0f;  // in fours, compensated (as kernel1)
        for (int c4 = 0; c4 < dk4; ++c4) {
            const float4 a = qi[c4], b = kj[c4];
            kahan_add(s, lost, a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w);
        }
        s *= scale;
        const bool visible = mask.visible(i, j, j < S);
        s = visible ? s + score_bias(mask, slope_h, bias_row, i + offset, j, j < S) : -INFINITY;

        const float m_new = fmaxf(m, warp_max(s));
        const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // as in kernel1
        const float alpha = expf(m - m_use);
        const float p = expf(s - m_use);
        l = l * alpha + warp_sum(p);
        m = m_new;

        acc.x *= alpha; acc.y *= alpha; acc.z *= alpha; acc.w *= alpha;
        const int n_keys = min(FUSED_KEYS, S - j0);
        for (int jj = 0; jj < n_keys; ++jj) {
            const float pj = __shfl_sync(0xffffffff, p, jj);
            if (owns_columns) {
                const float4 b = ((const float4*)(v_s + jj * d_v))[lane];
                acc.x += pj * b.x; acc.y += pj * b.y; acc.z += pj * b.z; acc.w += pj * b.w;
            }
        }
    }

    if (lse != nullptr && i < L && lane == 0) lse[head * L + i] = row_logsumexp(m, l);
    if (i >= L || !owns_columns) return;
    const float inv_l = l > 0.0f ? 1.0f / l : 0.0f;
    ((float4*)(out + (long)i * d_v))[lane] = make_float4(acc.x * inv_l, acc.y * inv_l, acc.z * inv_l, acc.w * inv_l);
}

extern "C" __global__ void attention_fused_kernel2(const float* __restrict__ q,  // (H, L, d_k)
                                                   const float* __restrict__ k,  // (H / group, S, d_k)
                                                   const float* __restrict__ v,  // (H / group, S, d_v)
                                                   float* __restrict__ out,      // (H, L, d_v)
                                                   int L, int S, int d_k, int d_v, int group, float scale,
                                                   int causal, int window, int offset, int right, int sinks, int alibi,
                                                   const float* __restrict__ bias, int bias_heads) {
    attention_fused2(q, k, v, out, nullptr, L, S, d_k, d_v, group, scale, causal, window, offset, right, sinks, alibi,
                     bias, bias_heads);
}

// ------------------------------------------------------------------------------------------------
// FUSED ATTENTION, REGISTER-TILED (attention_fused_kernel3_d64, attention_fused_kernel3_d128)
//
// Kernels 1 and 2 give each query row a warp, so every K and V value read from shared memory
// feeds one query: one shared load per FMA or so, and shared memory is the limit. Here 128
// threads share a block of 64 query rows and tiles of 64 keys; thread (rg, cg) = (tid / 16,
// tid % 16) holds an 8x4 block of the score tile S (rows 8rg .. 8rg+7, keys cg + 16n) and an
// 8 x d/16 block of the output (the same rows, columns 4cg + 64t .. +3), so each value it loads
// feeds 4 or 8 FMAs. Other changes from kernel2:
//   the head size is a template parameter (the _d64 and _d128 entry points): loops unroll and
//     no index is divided by a runtime d
//   Q is multiplied by scale · log2(e) once, as it is loaded, so the softmax runs in base 2:
//     p = exp2(s - m) is one MUFU.EX2, with no multiply per score
//   a row's 64 scores live in the 16 lanes of one half warp: its max takes 4 xor-shuffles; its
//     sum stays split across them (each lane rescales its own part) until the very end
//   P goes through shared memory transposed (p_s[key][row]), so the P·V loop reads a thread's
//     8 rows of P for one key as two float4s and the key's V columns as d/64 float4s
//   key tiles the mask hides from the whole block are skipped; the mask is tested per element
//     only in tiles that straddle its edge (the diagonal, the window's far end, T)
//   a mask array comes in through shared memory: its (64 rows, 64 keys) slice for the block and
//     tile, loaded beside the K tile (a row's 64 biases one coalesced 256-byte read), each thread
//     then reading its 8 x 4 from there in the element pass. Read from global memory per score
//     there, as kernels 1 and 2 read theirs, it took d = 128 to 242 registers (budget 232) and
//     spilled at d = 64; from the tile, 188 and 154 (NVRTC, sm_80)
// The K/V tiles are copied with plain loads, one tile at a time (no cp.async: it needs sm_80, and
// kernel3 runs on any GPU; with it, the next K tile would load into a buffer of its own while P·V
// runs, as in kernel4).
// ------------------------------------------------------------------------------------------------

#define FUSED3_ROWS 64    // query rows per block
#define FUSED3_KEYS 64    // keys per tile
#define FUSED3_THREADS 128
#define FUSED3_P_STRIDE (FUSED3_ROWS + 4)  // p_s row stride: lane cg's stores land 4 banks apart

// The bias tile b_s (64 rows, 64 keys), row-major, unpadded (64 · 64 floats: at d = 128 two
// blocks still fit in an H100's 228 KiB, 2 · (99,328 + 16,384 + 1,024 reserved) bytes exactly).
// A warp's two half warps read rows 8 apart at the same keys: with 64-float rows, the same 16
// banks. So a row of an odd group of 8 keeps its keys with bit 4 flipped (key ^ 16), the other
// 16 banks; a warp's store of 32 adjacent keys of one row stays on 32 banks.
__device__ __forceinline__ int fused3_bias_at(int row, int key) {
    return row * FUSED3_KEYS + (key ^ (16 * ((row >> 3) & 1)));
}

template <int D>
__device__ __forceinline__ void attention_fused3(const float* __restrict__ q,  // (H, L, D)
                                                 const float* __restrict__ k,  // (H / group, S, D)
                                                 const float* __restrict__ v,  // (H / group, S, D)
                                                 float* __restrict__ out,      // (H, L, D)
                                                 int L, int S, int group, float scale, int causal, int window, int offset,
                                                 int right, int sinks, int alibi,
                                                 const float* __restrict__ bias,  // (1 or H, L, S) or nullptr
                                                 int bias_heads, float* smem) {
    // Dynamic shared memory (the entry point's extern array), in floats; shared_mem =
    // 4 · (192 D + 256) bytes: 50,176 at d = 64, 99,328 at d = 128, over the 48 KiB a block gets
    // without opting in, so the launcher opts in; with a mask array 16,384 more:
    //   q_s (64, D)       the block's query rows, times scale · log2 e
    //   k_s (64, D + 4)   the key tile; the +4 puts lane cg's float4 of row cg on banks 4cg..4cg+3
    //   v_s (64, D)       the value tile
    //   p_s (64, 68)      P of the tile, transposed (p_s[key][row]), in k_s's place once S is
    //                     done: at d = 128 two blocks then fit in an H100's shared memory
    //   b_s (64, 64)      the mask array's tile times log2 e, swizzled (fused3_bias_at); only
    //                     with one: it is read before P is written, but loaded while k_s is live
    constexpr int KS = D + 4, D4 = D / 4, COLS = D / 16;
    float* q_s = smem;
    float* k_s = q_s + FUSED3_ROWS * D;
    float* v_s = k_s + FUSED3_KEYS * KS;
    float* p_s = k_s;
    float* b_s = v_s + FUSED3_KEYS * D;

    const int tid = threadIdx.x, rg = tid / 16, cg = tid % 16;
    const Mask mask = Mask::from_args(causal, window, offset, right, sinks, alibi);
    const BlockWork work = causal_block_order(mask.causal, true);  // longest blocks first
    const int row0 = work.tile * FUSED3_ROWS;
    const long head = work.head;
    const float4* q4 = (const float4*)(q + head * L * D);
    const float4* k4 = (const float4*)(k + head / group * S * D);  // query head h reads K/V head h / group
    const float4* v4 = (const float4*)(v + head / group * S * D);
    out += head * L * D;
    // ALiBi's slope, in base 2 as the scores (times log2 e); with it, or a mask array (whose
    // Mask is none), every tile takes the element pass below, not only those a mask edge crosses.
    const float slope_h = mask.slope(head) * LOG2E;
    const bool every_tile = mask.alibi > 0 || bias != nullptr;

    const float4 zero4 = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const float q_factor = scale * LOG2E;  // scores come out in base 2: s·log2 e
#pragma unroll 4
    for (int n = 0; n < FUSED3_ROWS * D4 / FUSED3_THREADS; ++n) {
        const int idx = tid + n * FUSED3_THREADS, r = idx / D4;
        float4 a = row0 + r < L ? q4[(long)row0 * D4 + idx] : zero4;
        a.x *= q_factor; a.y *= q_factor; a.z *= q_factor; a.w *= q_factor;
        ((float4*)q_s)[idx] = a;
    }

    // The key tiles any row of this block sees (as in kernel1).
    const KeyTiles kt = mask.key_tiles<FUSED3_KEYS>(row0, FUSED3_ROWS, L, S);

    float m[8], l[8], o[8][COLS];  // per row: running max (base 2), this lane's part of the sum
#pragma unroll
    for (int r = 0; r < 8; ++r) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
#pragma unroll
        for (int c = 0; c < COLS; ++c) o[r][c] = 0.0f;
    }

    for (int j0 = kt.j_begin; j0 < kt.j_end; j0 += FUSED3_KEYS) {
        __syncthreads();  // the previous tile (v_s, and P in k_s) is fully read; q_s is written
#pragma unroll 4
        for (int n = 0; n < FUSED3_KEYS * D4 / FUSED3_THREADS; ++n) {  // 4 loads in flight per thread
            const int idx = tid + n * FUSED3_THREADS, jj = idx / D4, c4 = idx % D4;
            const bool in = j0 + jj < S;
            *(float4*)(k_s + jj * KS + 4 * c4) = in ? k4[(long)j0 * D4 + idx] : zero4;
            ((float4*)v_s)[idx] = in ? v4[(long)j0 * D4 + idx] : zero4;
        }
        if (bias != nullptr) {  // the array's (64, 64) slice: a warp reads 32 adjacent keys of a row
            const float* b = bias + ((bias_heads == 1 ? 0 : head) * L + row0) * (long)S + j0;
#pragma unroll 4
            for (int n = 0; n < FUSED3_ROWS * FUSED3_KEYS / FUSED3_THREADS; ++n) {
                const int idx = tid + n * FUSED3_THREADS, rr = idx / FUSED3_KEYS, jj = idx % FUSED3_KEYS;
                // 0 outside the array: rows past L are never written, keys past S are masked
                b_s[fused3_bias_at(rr, jj)] = row0 + rr < L && j0 + jj < S ? b[(long)rr * S + jj] * LOG2E : 0.0f;
            }
        }
        __syncthreads();

        // S = Q · K^T for this thread's 8 rows x 4 keys, four steps of k per float4.
        float s[8][4];
#pragma unroll
        for (int r = 0; r < 8; ++r)
#pragma unroll
            for (int n = 0; n < 4; ++n) s[r][n] = 0.0f;
#pragma unroll 4
        for (int c = 0; c < D; c += 4) {
            float4 kv[4];
#pragma unroll
            for (int n = 0; n < 4; ++n) kv[n] = *(const float4*)(k_s + (cg + 16 * n) * KS + c);
#pragma unroll
            for (int r = 0; r < 8; ++r) {
                const float4 qv = *(const float4*)(q_s + (8 * rg + r) * D + c);  // a broadcast
#pragma unroll
                for (int n = 0; n < 4; ++n)  // a float4's products summed, then added: see "Q·K^T in fours"
                    s[r][n] += qv.x * kv[n].x + qv.y * kv[n].y + qv.z * kv[n].z + qv.w * kv[n].w;
            }
        }

        // The mask, element by element, only where the tile crosses one of its edges.
        const bool edge = mask.hides_some(row0, row0 + FUSED3_ROWS - 1, j0, j0 + FUSED3_KEYS - 1, j0 + FUSED3_KEYS > S);
        if (edge || every_tile) {
#pragma unroll
            for (int r = 0; r < 8; ++r) {
                const int i = row0 + 8 * rg + r;
#pragma unroll
                for (int n = 0; n < 4; ++n) {
                    const int j = j0 + cg + 16 * n;
                    const bool visible = mask.visible(i, j, j < S);
                    const float add = (mask.alibi > 0 ? Mask::bias_at(slope_h, i + offset - j) : 0.0f) +
                                      (bias != nullptr ? b_s[fused3_bias_at(8 * rg + r, cg + 16 * n)] : 0.0f);
                    s[r][n] = visible ? s[r][n] + add : -INFINITY;
                }
            }
        }

        // Online softmax in base 2, row by row; the 16 lanes of a row agree on m after the shuffles.
#pragma unroll
        for (int r = 0; r < 8; ++r) {
            float mx = fmaxf(fmaxf(s[r][0], s[r][1]), fmaxf(s[r][2], s[r][3]));
#pragma unroll
            for (int offset = 8; offset > 0; offset >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, offset));
            const float m_new = fmaxf(m[r], mx);
            // A row that has seen no visible key yet (m_new = -inf: the window's far edge, or a
            // row past L, or one before the first key under bottom-right causal) subtracts 0 instead, so it gets exp2(-inf) = 0, not -inf - -inf = NaN.
            const float m_use = m_new == -INFINITY ? 0.0f : m_new;
            const float alpha = exp2f(m[r] - m_use);  // first visible tile: exp2(-inf) = 0
            m[r] = m_new;
            float part = 0.0f;
#pragma unroll
            for (int n = 0; n < 4; ++n) {
                s[r][n] = exp2f(s[r][n] - m_use);  // now P, unnormalised
                part += s[r][n];
            }
            l[r] = l[r] * alpha + part;
#pragma unroll
            for (int c = 0; c < COLS; ++c) o[r][c] *= alpha;
        }
        __syncthreads();  // every thread is done reading k_s: P may overwrite it
#pragma unroll
        for (int n = 0; n < 4; ++n) {
            float* dst = p_s + (cg + 16 * n) * FUSED3_P_STRIDE + 8 * rg;
            *(float4*)dst = make_float4(s[0][n], s[1][n], s[2][n], s[3][n]);
            *(float4*)(dst + 4) = make_float4(s[4][n], s[5][n], s[6][n], s[7][n]);
        }
        __syncthreads();  // all of P is in p_s

        // O += P · V: per key, 8 values of P (two broadcast float4s) and COLS values of V.
#pragma unroll 4
        for (int jj = 0; jj < FUSED3_KEYS; ++jj) {
            const float4 pa = *(const float4*)(p_s + jj * FUSED3_P_STRIDE + 8 * rg);
            const float4 pb = *(const float4*)(p_s + jj * FUSED3_P_STRIDE + 8 * rg + 4);
            const float p[8] = {pa.x, pa.y, pa.z, pa.w, pb.x, pb.y, pb.z, pb.w};
#pragma unroll
            for (int t = 0; t < D / 64; ++t) {
                const float4 vv = *(const float4*)(v_s + jj * D + 64 * t + 4 * cg);
#pragma unroll
                for (int r = 0; r < 8; ++r) {
                    o[r][4 * t] += p[r] * vv.x;
                    o[r][4 * t + 1] += p[r] * vv.y;
                    o[r][4 * t + 2] += p[r] * vv.z;
                    o[r][4 * t + 3] += p[r] * vv.w;
                }
            }
        }
    }

    // Each row's sum, whole at last: the 16 lanes' parts added by xor-shuffles.
#pragma unroll
    for (int r = 0; r < 8; ++r) {
        float sum = l[r];
#pragma unroll
        for (int offset = 8; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffff, sum, offset);
        const int i = row0 + 8 * rg + r;
        if (i >= L) continue;
        const float inv_l = sum > 0.0f ? 1.0f / sum : 0.0f;  // a row that saw no key: zeros
#pragma unroll
        for (int t = 0; t < D / 64; ++t)
            *(float4*)(out + (long)i * D + 64 * t + 4 * cg) =
                make_float4(o[r][4 * t] * inv_l, o[r][4 * t + 1] * inv_l, o[r][4 * t + 2] * inv_l, o[r][4 * t + 3] * inv_l);
    }
}

// grid (ceil(L / 64), 1, H), block (128), shared_mem = 4 · (192 d + 256) bytes (+ 16,384 with a mask
// array: bias, bias_heads as kernels 1 and 2 take them; nullptr, 0 without); d_k = d_v = d.
extern "C" __global__ void __launch_bounds__(128, 3) attention_fused_kernel3_d64(
    const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v, float* __restrict__ out,
    int L, int S, int group, float scale, int causal, int window, int offset, int right, int sinks, int alibi,
    const float* __restrict__ bias, int bias_heads) {
    extern __shared__ float4 fused3_smem4[];  // float4: 16-byte aligned
    attention_fused3<64>(q, k, v, out, L, S, group, scale, causal, window, offset, right, sinks, alibi, bias, bias_heads,
                         (float*)fused3_smem4);
}

extern "C" __global__ void __launch_bounds__(128, 2) attention_fused_kernel3_d128(
    const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v, float* __restrict__ out,
    int L, int S, int group, float scale, int causal, int window, int offset, int right, int sinks, int alibi,
    const float* __restrict__ bias, int bias_heads) {
    extern __shared__ float4 fused3_smem4[];  // float4: 16-byte aligned
    attention_fused3<128>(q, k, v, out, L, S, group, scale, causal, window, offset, right, sinks, alibi, bias, bias_heads,
                         (float*)fused3_smem4);
}

// ------------------------------------------------------------------------------------------------
// attention_fused_lse_kernel1, attention_fused_lse_kernel2: kernels 1 and 2 that also write each
// row's logsumexp for the fused backward (the bodies above, with lse not nullptr).

extern "C" __global__ void attention_fused_lse_kernel1(const float* __restrict__ q,  // (H, L, d_k)
                                                       const float* __restrict__ k,  // (H / group, S, d_k)
                                                       const float* __restrict__ v,  // (H / group, S, d_v)
                                                       float* __restrict__ out,      // (H, L, d_v)
                                                       float* __restrict__ lse,      // (H, L)
                                                       int L, int S, int d_k, int d_v, int group, float scale,
                                                       int causal, int window, int offset, int right, int sinks,
                                                       int alibi, const float* __restrict__ bias, int bias_heads) {
    attention_fused1(q, k, v, out, lse, L, S, d_k, d_v, group, scale, causal, window, offset, right, sinks, alibi,
                     bias, bias_heads);
}

extern "C" __global__ void attention_fused_lse_kernel2(const float* __restrict__ q,  // (H, L, d_k)
                                                       const float* __restrict__ k,  // (H / group, S, d_k)
                                                       const float* __restrict__ v,  // (H / group, S, d_v)
                                                       float* __restrict__ out,      // (H, L, d_v)
                                                       float* __restrict__ lse,      // (H, L)
                                                       int L, int S, int d_k, int d_v, int group, float scale,
                                                       int causal, int window, int offset, int right, int sinks,
                                                       int alibi, const float* __restrict__ bias, int bias_heads) {
    attention_fused2(q, k, v, out, lse, L, S, d_k, d_v, group, scale, causal, window, offset, right, sinks, alibi,
                     bias, bias_heads);
}

// ================================================================================================
// TENSOR-CORE BUILDING BLOCKS
//
// The wrappers the tensor-core kernels below are built from, each one instruction on a GPU and
// an emulation in the CPU build: mma.sync and its fragments, ldmatrix, cp.async, the bf16/tf32
// conversions, Hopper's wgmma, and ex2.approx. Every kernel above this section runs on the FP32
// CUDA cores and needs none of them.
// ------------------------------------------------------------------------------------------------
// Tensor cores: mma.sync, ldmatrix, cp.async and the bf16/tf32 conversions.
//
// Every kernel before the TENSOR-CORE ATTENTION section runs on the FP32 CUDA cores. A tensor
// core multiplies small matrices in one warp-wide instruction: mma.sync.m16n8k16 with bf16
// inputs and fp32 accumulation computes a 16x8 tile of D = A(16x16)·B(16x8) + C, 4096 flops,
// spread over the 32 lanes' registers in the "fragment" layouts the PTX ISA documents. The
// wrappers below are the only places that know those layouts' instructions; each is one PTX
// instruction on a GPU (__CUDA_ARCH__) and, in the CPU build, an emulation in
// cuda/cpu_runtime/tensor_cores.h (namespace ptx_emulated) that checks what a GPU would not
// (the whole warp at an .aligned instruction, shared and aligned ldmatrix rows, cp.async data
// unreadable before its wait, tf32 operands that skipped their conversion).
//
// Fragments (g = lane / 4, t = lane % 4; "lo" = bits 15:0 of a .b32 holding two bf16):
//   A (16x16, row-major)  a0 = A[g][2t, 2t+1]  a1 = A[g+8][2t, 2t+1]  a2 = A[g][2t+8, +9]  a3 = A[g+8][2t+8, +9]
//   B (16x8, "col")       b0 = B[2t, 2t+1][g]  b1 = B[2t+8, 2t+9][g]
//   C, D (16x8, fp32)     c0, c1 = C[g][2t, 2t+1]  c2, c3 = C[g+8][2t, 2t+1]
// Two adjacent n8 accumulator tiles (keys 0-7 and 8-15) hold exactly the A fragment of one k16
// step over those keys: that is why P never leaves the registers between S = Q·K^T and O = P·V.
// ------------------------------------------------------------------------------------------------

// The PTX bodies need Ampere or newer (bf16 mma.sync, cvt.rn.bf16x2, cp.async: sm_80). The
// file still compiles for older GPUs, where these bodies trap: andrea refuses the tensor-core
// kernels on such a GPU before any launch (andrea_cli/backends/toolchain/cuda_arch.py).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define TC_PTX 1
#else
#define TC_PTX 0  // the CPU build (emulated bodies) or a GPU older than Ampere
#endif

typedef unsigned int u32;

// Two floats -> one .b32 of two bf16, rounded to nearest even; `lo` lands in bits 15:0 (the
// lower-indexed element of a fragment pair). cvt.rn.bf16x2.f32 d, a, b puts a in the UPPER half.
__device__ __forceinline__ u32 pack_bf16x2(float lo, float hi) {
#if TC_PTX
    u32 r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
#elif defined(__CUDA_ARCH__)
    __trap();  // never launched on a GPU older than Ampere: andrea refuses it first
    return 0;
#else
    return ptx_emulated::cvt_rn_bf16x2_f32(hi, lo);
#endif
}

// fp32 -> tf32 (round to nearest, ties away): the value in a .b32 with its low 13 bits zero.
__device__ __forceinline__ u32 f32_to_tf32(float x) {
#if TC_PTX
    u32 r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
#elif defined(__CUDA_ARCH__)
    __trap();  // never launched on a GPU older than Ampere: andrea refuses it first
    return 0;
#else
    return ptx_emulated::cvt_rna_tf32_f32(x);
#endif
}

// D = A·B + C: A 16x16 bf16 (a[4]), B 16x8 bf16 (b[2]), C and D 16x8 fp32 (4 per lane).
__device__ __forceinline__ void mma_bf16_m16n8k16(float d[4], const u32 a[4], const u32 b[2], const float c[4]) {
#if TC_PTX
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                   "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#elif defined(__CUDA_ARCH__)
    __trap();  // never launched on a GPU older than Ampere: andrea refuses it first
#else
    ptx_emulated::mma_m16n8k16_bf16(d, a, b, c);
#endif
}

// D = A·B + C with tf32: A 16x8 (a0 = A[g][t], a1 = A[g+8][t], a2 = A[g][t+4], a3 = A[g+8][t+4]),
// B 8x8 (b0 = B[t][g], b1 = B[t+4][g]); operands from f32_to_tf32 (raw fp32 gets truncated).
__device__ __forceinline__ void mma_tf32_m16n8k8(float d[4], const u32 a[4], const u32 b[2], const float c[4]) {
#if TC_PTX
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                   "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#elif defined(__CUDA_ARCH__)
    __trap();  // never launched on a GPU older than Ampere: andrea refuses it first
#else
    ptx_emulated::mma_m16n8k8_tf32(d, a, b, c);
#endif
}

// ldmatrix: N (1, 2, 4) 8x8 matrices of 16-bit values from shared memory, one register each.
// Lanes 8i..8i+7 pass the addresses of matrix i's eight rows (16 bytes each, 16-byte aligned).
// Lane L receives row L/4, elements 2(L%4), 2(L%4)+1 of each matrix: an A or B fragment piece.
// TRANS: column L/4, rows 2(L%4) and 2(L%4)+1 instead, so a row-major V tile gives B fragments.
template <int N, bool TRANS>
__device__ __forceinline__ void ldmatrix(u32* r, const void* row) {
#if TC_PTX
    const u32 s = (u32)__cvta_generic_to_shared(row);
    if (N == 4 && !TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
    else if (N == 4 && TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
    else if (N == 2 && !TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                     : "=r"(r[0]), "=r"(r[1]) : "r"(s));
    else if (N == 2 && TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                     : "=r"(r[0]), "=r"(r[1]) : "r"(s));
    else if (N == 1 && !TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(s));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(s));
#elif defined(__CUDA_ARCH__)
    __trap();  // never launched on a GPU older than Ampere: andrea refuses it first
#else
    ptx_emulated::ldmatrix<N, TRANS>(r, row);
#endif
}

// cp.async: 16 bytes global -> shared without passing through registers, while the thread goes
// on computing. `valid` false reads nothing and fills the 16 bytes with zeros (rows past T).
// The data may be read only after cp_async_wait and a barrier (other threads' copies).
__device__ __forceinline__ void cp_async16(void* smem_dst, const void* gmem_src, bool valid) {
#if TC_PTX
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"((u32)__cvta_generic_to_shared(smem_dst)), "l"(gmem_src), "r"(valid ? 16 : 0));
#elif defined(__CUDA_ARCH__)
    __trap();  // never launched on a GPU older than Ampere: andrea refuses it first
#else
    ptx_emulated::cp_async_cg_16(smem_dst, gmem_src, valid ? 16 : 0);
#endif
}

// The copies issued since the last commit become one group.
__device__ __forceinline__ void cp_async_commit() {
#if TC_PTX
    asm volatile("cp.async.commit_group;\n" ::);
#elif defined(__CUDA_ARCH__)
    __trap();  // never launched on a GPU older than Ampere: andrea refuses it first
#else
    ptx_emulated::cp_async_commit_group();
#endif
}

// Wait until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if TC_PTX
    asm volatile("cp.async.wait_group %0;\n" :: "n"(N));
#elif defined(__CUDA_ARCH__)
    __trap();  // never launched on a GPU older than Ampere: andrea refuses it first
#else
    ptx_emulated::cp_async_wait_group(N);
#endif
}

// ------------------------------------------------------------------------------------------------
// wgmma (Hopper, sm_90a only): one warpGROUP (4 consecutive warps, 128 threads, the first warp a
// multiple of 4) computes D (64 x N, fp32) = A (64 x 16, bf16) · B (16 x N, bf16) (+ D), each
// warp w % 4 its own 16 rows 16(w % 4) .. +15. A comes from registers: each warp's a[4] is the
// mma.m16n8k16 A fragment of its 16 rows (above). B is read by the tensor cores from shared
// memory, described by a 64-bit matrix descriptor (wgmma_desc), never through the registers:
// what mma.sync's ldmatrix costs every warp, the four warps' tensor cores are fed once.
// D per thread: N/2 floats, n8 tile c in d[4c .. 4c+3] laid out as mma's C: d[4c], d[4c+1] =
// D[g][8c+2t, +1], d[4c+2], d[4c+3] = D[g+8][8c+2t, +1] of the warp's 16 rows.
// The instruction is asynchronous: wgmma_fence() before the first wgmma that reads registers
// written since (A, and D when accumulating), wgmma_commit() closes a group, wgmma_wait<n>()
// returns once at most n groups are in flight; only then may D be read, or B's shared memory be
// written. Wgmmas of one shape accumulating into the same D chain without a fence or a wait
// between them (the hardware orders them). Shared memory written by ordinary stores or cp.async
// must be published to the tensor cores' (async) proxy with fence_proxy_async() before the
// barrier that precedes the wgmma. ptxas pipelines the wgmmas of a stage only if no other
// instruction reads or writes their D between issue and wait, the k-steps are unrolled (a
// constant trip count) and no wgmma sits under a divergent branch; otherwise it waits after each
// one ("C7514/C7515/C7519 ... serialized" in its log).
//
// B's layout without swizzling (the PTX ISA's canonical "interleaved" layout): B is cut into
// "core matrices" of 8 rows x 16 bytes (8 bf16), each 128 contiguous bytes, row r at 16r.
//   K-major (TRANS_B false; K^T in Q·K^T: a key's d values contiguous): a core matrix holds 8
//     n (keys) x 8 k (d); element (k, n) at (n / 8)·SBO + (k / 8)·LBO + (n % 8)·16 + (k % 8)·2.
//   MN-major (TRANS_B true; V in P·V: a key's d values contiguous, keys are k): a core matrix
//     holds 8 k x 8 n; element (k, n) at (n / 8)·SBO + (k / 8)·LBO + (k % 8)·16 + (n % 8)·2.
// LBO (leading byte offset) steps between core matrices along K, SBO (stride) along N.
// Descriptor (PTX ISA, "Matrix Descriptor Format"): bits 0-13 start address >> 4 (the shared
// window's address), 16-29 LBO >> 4, 32-45 SBO >> 4, 49-51 base offset (0), 62-63 swizzle (0: none).
// The CPU build (cuda/cpu_runtime/tensor_cores.h) emulates all of it, descriptors of dynamic
// shared memory only: D reads as NaN until the wait, B changed before the wait is reported;
// scripts/tensor_core_check.py holds the emulation to the hardware (on an H100/H200).
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define WGMMA_PTX 1
#else
#define WGMMA_PTX 0  // the CPU build (emulated), or a GPU / an arch without sm_90a's features
#endif

__device__ __forceinline__ unsigned long long wgmma_desc(const void* smem, u32 lbo_bytes, u32 sbo_bytes) {
#if WGMMA_PTX
    const u32 addr = (u32)__cvta_generic_to_shared(smem);
#elif defined(__CUDA_ARCH__)
    const u32 addr = 0;  // never launched: andrea refuses the wgmma kernels on a GPU other than sm_90
#else
    const u32 addr = ptx_emulated::wgmma_descriptor_address(smem, lbo_bytes, sbo_bytes);  // checks the alignment
#endif
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | (unsigned long long)((lbo_bytes & 0x3FFFF) >> 4) << 16 |
           (unsigned long long)((sbo_bytes & 0x3FFFF) >> 4) << 32;
}

// The same descriptor, its start address `bytes` further on (a multiple of 16): the start field
// is the low 14 bits and an address inside the shared window never carries out of it, so one
// 64-bit add; a kernel builds each descriptor once and walks it, as CUTLASS's iterators do.
__device__ __forceinline__ unsigned long long wgmma_desc_advance(unsigned long long desc, u32 bytes) {
    return desc + (bytes >> 4);
}

// D (N/2 floats per thread) = A·B (+ D when accumulate); N 64 or 128 (64 keys of S; d of O).
template <int N, bool TRANS_B>
__device__ __forceinline__ void wgmma_bf16_m64nNk16(float* d, const u32 a[4], unsigned long long desc_b, bool accumulate) {
    static_assert(N == 64 || N == 128, "the kernels use N = 64 and 128");
#if WGMMA_PTX
    if constexpr (N == 64) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %36, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
                     "{%32, %33, %34, %35}, %37, p, 1, 1, %38;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"((u32)accumulate), "l"(desc_b), "n"((int)TRANS_B));
    }
    if constexpr (N == 128) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %68, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
                     "{%64, %65, %66, %67}, %69, p, 1, 1, %70;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"((u32)accumulate), "l"(desc_b), "n"((int)TRANS_B));
    }
#elif defined(__CUDA_ARCH__)
    __trap();  // never launched: andrea refuses the wgmma kernels on a GPU other than sm_90
#else
    ptx_emulated::wgmma_m64nNk16_bf16(N, TRANS_B, d, a, desc_b, accumulate);
#endif
}

__device__ __forceinline__ void wgmma_fence() {
#if WGMMA_PTX
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#elif defined(__CUDA_ARCH__)
    __trap();
#else
    ptx_emulated::wgmma_fence();
#endif
}

__device__ __forceinline__ void wgmma_commit() {
#if WGMMA_PTX
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#elif defined(__CUDA_ARCH__)
    __trap();
#else
    ptx_emulated::wgmma_commit_group();
#endif
}

template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if WGMMA_PTX
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory");
#elif defined(__CUDA_ARCH__)
    __trap();
#else
    ptx_emulated::wgmma_wait_group(N);
#endif
}

// The registers a wgmma in flight writes: the compiler must neither read them early nor keep a
// copy across the wait (an empty asm that "changes" them, CUTLASS's warpgroup_fence_operand).
__device__ __forceinline__ void wgmma_hold(float& r) {
#if WGMMA_PTX
    asm volatile("" : "+f"(r)::"memory");
#endif
}

// The same for the A registers a wgmma in flight reads (held after its wait): they stay live,
// unchanged, until then, so nothing the compiler places between issue and wait reuses them.
__device__ __forceinline__ void wgmma_hold(u32& r) {
#if WGMMA_PTX
    asm volatile("" : "+r"(r)::"memory");
#endif
}

// Generic-proxy writes to shared memory (stores, cp.async) made visible to the async proxy wgmma reads through.
__device__ __forceinline__ void fence_proxy_async() {
#if WGMMA_PTX
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#elif !defined(__CUDA_ARCH__)
    ptx_emulated::fence_proxy_async_shared();
#endif
}

// ------------------------------------------------------------------------------------------------
// ex2.approx.ftz.f32: 2^x in one MUFU.EX2. The PTX manual bounds it at 2 ulp from the correctly
// rounded result over the whole range; subnormal inputs and results are flushed to zero. exp2f
// adds an IEEE denormal guard around the same MUFU (a compare and two predicated multiplies per
// call); a softmax weight below 2^-126 changes no output, so the tensor-core kernel5 drops it.
// Needs no particular GPU generation; the CPU build emulates it (cuda/cpu_runtime/tensor_cores.h).
__device__ __forceinline__ float exp2_approx_ftz(float x) {
#if defined(__CUDA_ARCH__)
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#else
    return ptx_emulated::ex2_approx_ftz_f32(x);
#endif
}

// ================================================================================================
// TENSOR-CORE ATTENTION
//
// Every kernel before the TENSOR-CORE BUILDING BLOCKS runs on the FP32 CUDA cores; kernel4, 5 and
// 6 run the fused forward on tensor cores (the TENSOR-CORE BUILDING BLOCKS just above explain
// mma.sync, its fragments, ldmatrix, cp.async and wgmma), from the bf16 copies to_bf16_kernel1 makes.
// ------------------------------------------------------------------------------------------------

// ------------------------------------------------------------------------------------------------
// to_bf16: the tensor-core kernels read bf16 copies of Q, K and V; the file stays float32 at its
// edges. out = bf16(in * multiplier), rounded to nearest even; the multiplier lets Q arrive
// pre-scaled by scale·log2(e) (see below). Two values per thread and step: one cvt.rn.bf16x2.

extern "C" __global__ void to_bf16_kernel1(const float* __restrict__ in,     // (n)
                                           unsigned short* __restrict__ out, // (n) bf16 bits
                                           long n, float multiplier) {
    const long pairs = (n + 1) / 2, stride = (long)gridDim.x * blockDim.x;
    for (long p = (long)blockIdx.x * blockDim.x + threadIdx.x; p < pairs; p += stride) {
        const long i = 2 * p;
        const bool two = i + 1 < n;
        const u32 packed = pack_bf16x2(in[i] * multiplier, two ? in[i + 1] * multiplier : 0.0f);
        if (two) *(u32*)(out + i) = packed;  // i is even: 4-byte aligned
        else out[i] = (unsigned short)(packed & 0xffffu);
    }
}

// ------------------------------------------------------------------------------------------------
// attention_fused_kernel4: FlashAttention-2 on tensor cores, bf16 inputs, fp32 accumulation.
//
// 4 warps per block, 16 query rows per warp (one m16 tile), 64 rows per block; K and V tiles of
// 64 keys. Per key tile, each warp computes its 16x64 slice of S = Q·K^T with 8·(d/16) mma (Q
// fragments loaded once into registers, K fragments by ldmatrix), masks it, updates the online
// softmax and accumulates O += P·V with 4·(d/8) mma, P straight from S's registers (a bf16
// pack), V fragments by ldmatrix.trans from the row-major tile. What makes it fast:
//   - tensor cores: one mma does 16·8·16 multiply-adds; the FP32 kernels above need 4096 FMAs
//   - every K/V value read from shared memory feeds 16 query rows (kernel2: one)
//   - cp.async double buffering: tile n+1 streams into shared memory while tile n is computed
//   - Q pre-scaled by scale·log2(e) when converted, so the softmax is exp2(s - m): one FMUL less
//     per score and the hardware's native ex2
//   - whole key tiles outside the mask are never loaded; warps with no visible key in a tile
//     skip it; only tiles crossing a mask edge (or T) test keys one by one
//   - shared-memory rows padded by 16 bytes: the 8 rows one ldmatrix phase reads start on 8
//     different 4-bank groups, so no bank conflicts
// Shared memory (dynamic, bf16): q_s (64, d+8), k_s (2, 64, d+8), v_s (2, 64, d+8).

#define TC_WARPS 4
#define TC_LN2 0.6931471805599453f  // log2 units -> natural log (the lse kernels, dK)
#define TC_LOG2E 1.4426950408889634f
#define TC_ROWS (16 * TC_WARPS)  // query rows per block
#define TC_KEYS 64               // keys per K/V tile
#define TC_PAD 8                 // bf16 of padding per shared-memory row (16 bytes)

// rows [row0, row0 + n) of a (T, D) bf16 matrix -> a (n, D + TC_PAD) shared tile, rows past T
// zero-filled; 16-byte cp.async by all 128 threads.
template <int D>
__device__ __forceinline__ void tc_load_rows(unsigned short* dst, const unsigned short* src, int row0, int n,
                                             int T) {
    constexpr int chunks = D / 8;  // 16-byte pieces per row
    for (int idx = threadIdx.x; idx < n * chunks; idx += 32 * TC_WARPS) {
        const int r = idx / chunks, c = idx % chunks;
        const bool valid = row0 + r < T;
        cp_async16(dst + r * (D + TC_PAD) + 8 * c, src + (long)(valid ? row0 + r : 0) * D + 8 * c, valid);
    }
}

// FLAVOURS: the instantiation for right, sinks or ALiBi, picked at run time by the entry points, as
// kernel5's: without them they are the constant 0, so the plain copy's element pass is the mask
// edge's test alone and ALiBi's bias (an FFMA per score, on every tile) is not in its loop.
template <int D, bool FLAVOURS>
__device__ __forceinline__ void attention_fused_kernel4(const unsigned short* __restrict__ q,  // (H, L, D), scaled
                                                        const unsigned short* __restrict__ k,  // (H_kv, S, D)
                                                        const unsigned short* __restrict__ v,  // (H_kv, S, D)
                                                        float* __restrict__ out,               // (H, L, D)
                                                        int L, int Sk, int group, int causal, int window, int offset,
                                                        int right, int sinks, int alibi, unsigned short* smem,
                                                        float* __restrict__ lse = nullptr) {   // (H, L)
    constexpr int S = D + TC_PAD;  // row stride of every shared tile, in bf16
    unsigned short* q_s = smem;                   // (TC_ROWS, S)
    unsigned short* k_s = q_s + TC_ROWS * S;      // (2, TC_KEYS, S)
    unsigned short* v_s = k_s + 2 * TC_KEYS * S;  // (2, TC_KEYS, S)
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;

    // Causal: the last query tiles have the most key tiles; they go out first.
    const Mask mask = FLAVOURS ? Mask::from_args(causal, window, offset, right, sinks, alibi)
                               : Mask::from_args(causal, window, offset);
    const BlockWork work = causal_block_order(mask.causal, true);
    const int row0 = work.tile * TC_ROWS;
    const long head = work.head;
    q += head * L * D;
    k += head / group * Sk * D;  // query head h reads K/V head h / group, in place
    v += head / group * Sk * D;
    out += head * L * D;
    // ALiBi's slope in base 2, as Q's pre-scaled scores; with it every tile takes the element
    // pass below (its bias per pair), not only those a mask edge crosses (kernel3's way)
    const float slope_h = mask.slope(head) * TC_LOG2E;
    const bool every_tile = mask.alibi > 0;

    // Key tiles any row of the block can see; the others are never loaded.
    const KeyTiles kt = mask.key_tiles<TC_KEYS>(row0, TC_ROWS, L, Sk);
    const int j_begin = kt.j_begin, n_tiles = kt.n_tiles;

    tc_load_rows<D>(q_s, q, row0, TC_ROWS, L);
    tc_load_rows<D>(k_s, k, j_begin, TC_KEYS, Sk);
    tc_load_rows<D>(v_s, v, j_begin, TC_KEYS, Sk);
    cp_async_commit();

    const int w_row0 = row0 + 16 * warp;         // this warp's first query row
    const int w_last = min(w_row0 + 15, L - 1);  // and its last inside L (< w_row0: none)
    const int rows[2] = {w_row0 + g, w_row0 + g + 8};  // the rows of this lane's accumulators

    u32 qf[D / 16][4];     // Q's A fragments, one per k16 step
    float acc[D / 8][4];   // O, unnormalised: n8 tile c holds columns 8c .. 8c+7
    float m[2] = {-INFINITY, -INFINITY};  // running max of rows[r], in log2 units
    float l[2] = {0.0f, 0.0f};            // this lane's share of the running sum of exp2(s - m)
#pragma unroll
    for (int c = 0; c < D / 8; ++c) acc[c][0] = acc[c][1] = acc[c][2] = acc[c][3] = 0.0f;

    for (int n = 0; n < n_tiles; ++n) {
        const int j0 = j_begin + n * TC_KEYS, stage = n & 1;
        if (n + 1 < n_tiles) {  // start the next tile's copy, then wait for this one's
            tc_load_rows<D>(k_s + (stage ^ 1) * TC_KEYS * S, k, j0 + TC_KEYS, TC_KEYS, Sk);
            tc_load_rows<D>(v_s + (stage ^ 1) * TC_KEYS * S, v, j0 + TC_KEYS, TC_KEYS, Sk);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();  // every thread's copies of this tile (and, first, of Q) are visible
        if (n == 0) {
#pragma unroll
            for (int kk = 0; kk < D / 16; ++kk)
                ldmatrix<4, false>(qf[kk], q_s + (16 * warp + (lane / 8 % 2) * 8 + lane % 8) * S
                                               + 16 * kk + (lane / 16) * 8);
        }
        const unsigned short* ks = k_s + stage * TC_KEYS * S;
        const unsigned short* vs = v_s + stage * TC_KEYS * S;

        // Whole-warp decisions (so the warp stays converged at every .aligned instruction):
        // does any of its rows see a key of this tile, and must keys be tested one by one?
        const int j_last = min(j0 + TC_KEYS, Sk) - 1;
        const bool any = mask.sees_any(w_row0, w_last, j0, j_last, w_row0 <= w_last);
        const bool edge = mask.hides_some(w_row0, w_last, j0, j0 + TC_KEYS - 1, j0 + TC_KEYS > Sk);
        if (any) {
            float s[TC_KEYS / 8][4];  // S slice: n8 tile nt holds keys j0 + 8nt .. j0 + 8nt + 7
#pragma unroll
            for (int nt = 0; nt < TC_KEYS / 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
                for (int nt = 0; nt < TC_KEYS / 8; nt += 2) {  // one ldmatrix.x4: two n8 tiles of K
                    u32 kf[4];
                    ldmatrix<4, false>(kf, ks + (8 * nt + (lane / 16) * 8 + lane % 8) * S
                                               + 16 * kk + (lane / 8 % 2) * 8);
                    mma_bf16_m16n8k16(s[nt], qf[kk], kf, s[nt]);
                    mma_bf16_m16n8k16(s[nt + 1], qf[kk], kf + 2, s[nt + 1]);
                }
            if (edge || every_tile) {  // -inf, not -1e9: exp2 gives exactly 0
#pragma unroll
                for (int nt = 0; nt < TC_KEYS / 8; ++nt)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int i = rows[e / 2], j = j0 + 8 * nt + 2 * t + e % 2;
                        const bool visible = mask.visible(i, j, j < Sk);
                        const float bias = every_tile ? Mask::bias_at(slope_h, i + mask.offset - j) : 0.0f;
                        s[nt][e] = visible ? s[nt][e] + bias : -INFINITY;
                    }
            }
            // Online softmax, per row: the 4 lanes of a quad share a row (xor 1, 2).
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                float mx = m[r];
#pragma unroll
                for (int nt = 0; nt < TC_KEYS / 8; ++nt) mx = fmaxf(mx, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
                // A row that has seen no key yet keeps m = -inf; 0 stands in so that
                // exp2(-inf - 0) = 0 instead of exp2(-inf + inf) = NaN.
                const float m_use = mx == -INFINITY ? 0.0f : mx;
                const float alpha = exp2f(m[r] - m_use);  // rescales what was summed so far
                m[r] = mx;
                float sum = 0.0f;
#pragma unroll
                for (int nt = 0; nt < TC_KEYS / 8; ++nt) {
                    s[nt][2 * r] = exp2f(s[nt][2 * r] - m_use);
                    s[nt][2 * r + 1] = exp2f(s[nt][2 * r + 1] - m_use);
                    sum += s[nt][2 * r] + s[nt][2 * r + 1];
                }
                l[r] = l[r] * alpha + sum;
#pragma unroll
                for (int c = 0; c < D / 8; ++c) {
                    acc[c][2 * r] *= alpha;
                    acc[c][2 * r + 1] *= alpha;
                }
            }
            // O += P·V, 16 keys per step: S tiles 2kk and 2kk+1 are P's A fragment, as bf16.
#pragma unroll
            for (int kk = 0; kk < TC_KEYS / 16; ++kk) {
                const u32 pf[4] = {pack_bf16x2(s[2 * kk][0], s[2 * kk][1]), pack_bf16x2(s[2 * kk][2], s[2 * kk][3]),
                                   pack_bf16x2(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                   pack_bf16x2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
                for (int c = 0; c < D / 8; c += 2) {  // one ldmatrix.x4.trans: two n8 column tiles of V
                    u32 vf[4];
                    ldmatrix<4, true>(vf, vs + (16 * kk + (lane / 8 % 2) * 8 + lane % 8) * S
                                              + 8 * c + (lane / 16) * 8);
                    mma_bf16_m16n8k16(acc[c], pf, vf, acc[c]);
                    mma_bf16_m16n8k16(acc[c + 1], pf, vf + 2, acc[c + 1]);
                }
            }
        }
        __syncthreads();  // every warp is done with this stage before it is refilled
    }

#pragma unroll
    for (int r = 0; r < 2; ++r) {
        float sum = l[r];
        sum += __shfl_xor_sync(0xffffffff, sum, 1);
        sum += __shfl_xor_sync(0xffffffff, sum, 2);
        if (rows[r] >= L) continue;
        // the lse kernels' logsumexp, natural log like row_logsumexp: m and the sum are in log2 units
        if (lse != nullptr && t == 0) lse[head * L + rows[r]] = sum > 0.0f ? (m[r] + log2f(sum)) * TC_LN2 : INFINITY;
        // sum = 0 only for a row that saw no key: zeros, like the other kernels, not 0/0
        const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
        float* o = out + (long)rows[r] * D + 2 * t;
#pragma unroll
        for (int c = 0; c < D / 8; ++c)
            *(float2*)(o + 8 * c) = make_float2(acc[c][2 * r] * inv, acc[c][2 * r + 1] * inv);
    }
}

// The entry points: the head size is a compile-time constant, so every loop above unrolls and
// every fragment array lives in registers. grid (ceil(T / 64), 1, H), block (128),
// shared_mem = 2 * 5 * 64 * (d + 8) bytes (d = 64: 46,080; d = 128: 87,040, above the 48 KiB
// default: the launcher opts in).
extern "C" __global__ void __launch_bounds__(32 * TC_WARPS)
attention_fused_kernel4_d64(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
                            const unsigned short* __restrict__ v, float* __restrict__ out,
                            int L, int S, int group, int causal, int window, int offset, int right,
                            int sinks, int alibi) {
    extern __shared__ __align__(16) unsigned short tc_smem[];
    if (Mask::flavoured(right, sinks, alibi))
        attention_fused_kernel4<64, true>(q, k, v, out, L, S, group, causal, window, offset, right, sinks, alibi, tc_smem);
    else
        attention_fused_kernel4<64, false>(q, k, v, out, L, S, group, causal, window, offset, 0, 0, 0, tc_smem);
}

extern "C" __global__ void __launch_bounds__(32 * TC_WARPS)
attention_fused_kernel4_d128(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
                             const unsigned short* __restrict__ v, float* __restrict__ out,
                             int L, int S, int group, int causal, int window, int offset, int right,
                             int sinks, int alibi) {
    extern __shared__ __align__(16) unsigned short tc_smem[];
    if (Mask::flavoured(right, sinks, alibi))
        attention_fused_kernel4<128, true>(q, k, v, out, L, S, group, causal, window, offset, right, sinks, alibi, tc_smem);
    else
        attention_fused_kernel4<128, false>(q, k, v, out, L, S, group, causal, window, offset, 0, 0, 0, tc_smem);
}

// ------------------------------------------------------------------------------------------------
// attention_fused_kernel5: kernel4 in FlashAttention-2's proportions; the same inputs, outputs
// and masks, the same bf16 roundings (of Q, K, V and P), so the same verify family checks both.
//
// What makes it faster than kernel4:
//   - 32 query rows per warp (two m16 tiles), 128 per block: each K or V fragment ldmatrix reads
//     feeds two mma instead of one, 4 HMMA per LDSM.x4 where kernel4 has 1.78, so the tile's
//     bound moves from shared-memory bandwidth towards the tensor pipe (see "What bounds it")
//   - Q's fragments are read once and stay in registers. At d = 128 (Q 64 + O 128 registers)
//     that leaves room for the scores of 16 keys: the online softmax steps through each 64-key
//     tile 16 keys at a time (32 at a time spills on sm_80 and sm_90; re-reading Q from shared
//     memory, FlashAttention-2's way, gives 3.2 HMMA per LDSM); at d = 64 one step covers the
//     tile (Q 32 + O 64 + S 64). The price at d = 128: O is rescaled 4 times per tile, not once
//   - no warp skips a masked step whose keys its rows cannot see (its weights come out 0): the
//     test cost the registers d = 128 does not have
//   - each thread's cp.async pieces are the same (row, column) of every tile: their addresses
//     are computed once, the source advances by 64 rows per tile and the rest are immediates;
//     only a tile that crosses T tests its rows. At d = 64 the hot loop stops one tile before
//     the last tile wholly below T, so its copies are never tested and its code holds one copy
//     path (8 LDGSTS per tile; two paths put 16 in its SASS). At d = 128 that extra copy of the
//     tile costs the 4 bytes of spill the registers have no room for: one tested path there.
//   - exp2 as ex2.approx.ftz, one MUFU.EX2 (exp2_approx_ftz above)
//   - the key tiles a mask edge crosses (the window's far end first, the diagonal and T last)
//     run in loops of their own that test keys one by one; the loop over the tiles between
//     them, the hot one, holds no mask code
//   - causal blocks ordered longest first across all heads (causal_block_order)
// Shared memory (dynamic, bf16): q_s (128, d+8), k_s (2, 64, d+8), v_s (2, 64, d+8).
//
// What bounds it (bench --bound --gpu h200: static, from the sm_90 SASS, not a measurement). Per
// warp and 64-key tile at d = 64 the hot loop issues 128 HMMA, 138 SM clocks of tensor pipe at
// the datasheet's 989 TFLOP/s; 32 LDSM.x4, 128 clocks of shared-memory bandwidth on their own;
// 8 LDGSTS, 32 more; 68 MUFU.EX2, 136 clocks; 596 instructions, 149 clocks of issue. With
// mma.sync every warp brings all of K and V through ldmatrix into its own registers, so at 32
// rows per warp shared memory is 92% of the tensor pipe before cp.async writes a byte, and the
// exponentials are 98% of it (one per score whatever the tiling: H100's 16 MUFU results per
// clock against 4,096 flops). 48 rows per warp would tip shared memory below the tensor pipe
// at d = 64, but the issue slots would then bound it (about 9 instructions per score for the
// softmax), and at d = 128 O alone would take 192 of the 255 registers. The bound stays shared
// memory: 816 TFLOP/s at d = 64, 779 at d = 128 (kernel4: 413 / 469). FlashAttention-3's step
// past it is Hopper's wgmma, whose tensor cores read K and V from shared memory themselves.

#define K5_WARP_ROWS 32                      // query rows per warp: two m16 tiles
#define K5_ROWS (K5_WARP_ROWS * TC_WARPS)   // query rows per block

// A compile-time bool a generic lambda can take: the masked and unmasked copies of a step, the
// whole and row-tested copies of a tile's loads, the hot loop's tile and the others.
template <bool B>
struct StaticFlag {
    static constexpr bool value = B;
};

// Run tile(masked, hot, n) over the block's key tiles (mask.key_tiles), each loop a copy of the
// tile's code of its own: the first n_first tiles and those from n_last on cross a mask edge or
// T (mask.edge_tiles); the ones between see no mask. HOT: the hot loop, the unmasked tiles but
// the last tile wholly below T and those after it, copies tile n + 1 as a whole tile (no row
// tests, one copy path in its code); without HOT the unmasked loop is the tested copy. (Computed
// here, after the kernel's set-up, so the loop bounds hold no registers while Q's fragments are
// loaded.) Kernel5 and kernel6 run their tiles through it.
template <bool HOT, typename Tile>
__device__ __forceinline__ void for_each_key_tile(const Mask& mask, const KeyTiles& kt, int T, Tile&& tile) {
    // ALiBi biases every pair: every tile takes the masked copy, whose element pass adds the bias
    const EdgeTiles et = mask.alibi > 0 ? EdgeTiles{kt.n_tiles, kt.n_tiles} : mask.edge_tiles<TC_KEYS>(kt, T);
    const int n_first = et.n_first, n_last = et.n_last;
    const int n_hot = HOT ? min(n_last, (T - kt.j_begin) / TC_KEYS - 1) : n_first;
    int n = 0;
    for (; n < n_first; ++n) tile(StaticFlag<true>(), StaticFlag<false>(), n);
    for (; n < n_hot; ++n) tile(StaticFlag<false>(), StaticFlag<true>(), n);  // the hot loop
    for (; n < n_last; ++n) tile(StaticFlag<false>(), StaticFlag<false>(), n);
    for (; n < kt.n_tiles; ++n) tile(StaticFlag<true>(), StaticFlag<false>(), n);
}

// FLAVOURS: the instantiation for right, sinks or ALiBi (the entry points pick it at run time);
// without, they are the constant 0 and the code is what it was before they existed. At d = 128 the
// flavoured copy re-reads Q's fragments from q_s at every k16 step (FlashAttention-2's way) where
// the plain one holds them: the flavours' tests, one register or two, spill at the 255-register edge.
template <int D, bool FLAVOURS>
__device__ __forceinline__ void attention_fused5(const unsigned short* __restrict__ q,  // (H, L, D), scaled
                                                 const unsigned short* __restrict__ k,  // (H_kv, S, D)
                                                 const unsigned short* __restrict__ v,  // (H_kv, S, D)
                                                 float* __restrict__ out,               // (H, L, D)
                                                 int L, int Sk, int group, int causal, int window, int offset,
                                                 int right, int sinks, int alibi, unsigned short* smem) {
    constexpr int S = D + TC_PAD;                     // row stride of every shared tile, in bf16
    constexpr int STEP = D == 64 ? 64 : 16;           // keys per softmax step (S's registers)
    constexpr int CHUNKS = D / 8;                     // 16-byte pieces per row
    constexpr int ROW_STEP = 32 * TC_WARPS / CHUNKS;  // rows the block's threads copy in one pass
    unsigned short* q_s = smem;                   // (K5_ROWS, S)
    unsigned short* k_s = q_s + K5_ROWS * S;      // (2, TC_KEYS, S)
    unsigned short* v_s = k_s + 2 * TC_KEYS * S;  // (2, TC_KEYS, S)
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;

    const Mask mask = FLAVOURS ? Mask::from_args(causal, window, offset, right, sinks, alibi)
                               : Mask::from_args(causal, window, offset);
    const BlockWork work = causal_block_order(mask.causal, true);
    const int row0 = work.tile * K5_ROWS;
    const long head = work.head;
    q += head * L * D;
    k += head / group * Sk * D;  // query head h reads K/V head h / group, in place
    v += head / group * Sk * D;
    out += head * L * D;

    // Key tiles any row of the block can see; the others are never loaded.
    const KeyTiles kt = mask.key_tiles<TC_KEYS>(row0, K5_ROWS, L, Sk);
    const int j_begin = kt.j_begin, n_tiles = kt.n_tiles;
    const float slope_h = mask.slope(head) * TC_LOG2E;  // ALiBi's, in base 2 as the scores (0 without)

    // This thread's 16-byte pieces of every copy: rows cp_row + p·ROW_STEP, columns cp_col..+7.
    const int cp_row = threadIdx.x / CHUNKS, cp_col = 8 * (threadIdx.x % CHUNKS);
    const int cp_dst = cp_row * S + cp_col;
    {
        const unsigned short* src = q + (long)(row0 + cp_row) * D + cp_col;
#pragma unroll
        for (int p = 0; p < K5_ROWS / ROW_STEP; ++p)  // rows past T: zeros (src is not read)
            cp_async16(q_s + cp_dst + p * ROW_STEP * S, src + p * ROW_STEP * D, row0 + cp_row + p * ROW_STEP < L);
        cp_async_commit();
    }
    // K and V share one layout: one offset (in bf16, within the head) addresses both tiles' rows
    int kv_src = (j_begin + cp_row) * D + cp_col;
    // Key tile n into stage n & 1, one commit group; the source then moves on to tile n + 1.
    // WHOLE: the tile lies below T, no row is tested (the hot loop's copies: 8 LDGSTS at d = 64 and
    // nothing else but their addresses); otherwise a row past T reads nothing and lands as zeros.
    auto load_kv = [&](auto whole, int n) {
        constexpr bool WHOLE = decltype(whole)::value;
        const int rows_left = Sk - (j_begin + n * TC_KEYS) - cp_row;  // this thread's rows still < S
        unsigned short* kd = k_s + (n & 1) * TC_KEYS * S + cp_dst;
        unsigned short* vd = v_s + (n & 1) * TC_KEYS * S + cp_dst;
#pragma unroll
        for (int p = 0; p < TC_KEYS / ROW_STEP; ++p) {
            const bool valid = WHOLE || p * ROW_STEP < rows_left;
            cp_async16(kd + p * ROW_STEP * S, k + kv_src + p * ROW_STEP * D, valid);
            cp_async16(vd + p * ROW_STEP * S, v + kv_src + p * ROW_STEP * D, valid);
        }
        cp_async_commit();
        kv_src += TC_KEYS * D;
    };
    load_kv(StaticFlag<false>(), 0);
    cp_async_wait<1>();  // Q has landed (tile 0 may still be in flight)
    __syncthreads();     // every thread's share of Q

    const int w_row0 = row0 + K5_WARP_ROWS * warp;  // this warp's first query row
    // Q's A fragments, m16 tile mt (rows w_row0 + 16mt ..), k16 step kk: read once, kept
    const int q_ld = (K5_WARP_ROWS * warp + (lane / 8 % 2) * 8 + lane % 8) * S + (lane / 16) * 8;
    constexpr bool Q_HELD = !(FLAVOURS && D == 128);  // else re-read each k16 step (FLAVOURS above)
    u32 qf[2][Q_HELD ? D / 16 : 1][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
            if (Q_HELD) ldmatrix<4, false>(qf[mt][kk], q_s + q_ld + 16 * mt * S + 16 * kk);
    // The same lane offsets into every K and V tile, for ldmatrix (K) and ldmatrix.trans (V)
    const int k_ld = ((lane / 16) * 8 + lane % 8) * S + (lane / 8 % 2) * 8;
    const int v_ld = ((lane / 8 % 2) * 8 + lane % 8) * S + (lane / 16) * 8;

    float acc[2][D / 8][4];  // O, unnormalised: m16 tile mt, n8 tile c holds columns 8c .. 8c+7
    float m[4], l[4];        // row r = rows w_row0 + 16 (r / 2) + 8 (r % 2) + g: running max, this lane's sum
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
    }
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int c = 0; c < D / 8; ++c) acc[mt][c][0] = acc[mt][c][1] = acc[mt][c][2] = acc[mt][c][3] = 0.0f;

    // One softmax step: keys js .. js + STEP - 1, from ks and vs (their rows). MASKED: the step
    // may cross a mask edge or T, so the warp may have nothing to do and keys are tested.
    auto step = [&](auto masked, const unsigned short* ks, const unsigned short* vs, int js) {
        constexpr bool MASKED = decltype(masked)::value;
        float s[2][STEP / 8][4];  // S: m16 tile mt, n8 tile nt holds keys js + 8nt .. js + 8nt + 7
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int nt = 0; nt < STEP / 8; ++nt) s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
            const int qk = Q_HELD ? kk : 0;
            if (!Q_HELD)
#pragma unroll
                for (int mt = 0; mt < 2; ++mt) ldmatrix<4, false>(qf[mt][0], q_s + q_ld + 16 * mt * S + 16 * kk);
#pragma unroll
            for (int nt = 0; nt < STEP / 8; nt += 2) {  // one ldmatrix.x4: two n8 tiles of K, for both m16 tiles
                u32 kf[4];
                ldmatrix<4, false>(kf, ks + k_ld + 8 * nt * S + 16 * kk);
#pragma unroll
                for (int mt = 0; mt < 2; ++mt) {
                    mma_bf16_m16n8k16(s[mt][nt], qf[mt][qk], kf, s[mt][nt]);
                    mma_bf16_m16n8k16(s[mt][nt + 1], qf[mt][qk], kf + 2, s[mt][nt + 1]);
                }
            }
        }
        if (MASKED) {  // -inf, not -1e9: exp2 gives exactly 0
            // element e of tile (mt, nt): query i = w_row0 + 16mt + 8(e/2) + g, key j = js + 8nt + 2t + e%2;
            // p - j (p = i + offset), S - j and sinks - j from three registers and constants
            const int diff0 = w_row0 + mask.offset + g - js - 2 * t, keys_left = Sk - js - 2 * t;
            const int sinks_left = mask.sinks - js - 2 * t;
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                for (int nt = 0; nt < STEP / 8; ++nt)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int diff = diff0 + 16 * mt + 8 * (e / 2) - 8 * nt - e % 2;  // p - j = i + offset - j
                        // mask.visible_at(diff, j, 8 * nt + e % 2 < keys_left) written out, the one
                        // place outside the Mask: called, it spills 412 bytes at d = 128 on sm_90 (444
                        // on sm_80), NVVM keeping more of the step's 64 tests live at the 255-register edge
                        const bool visible = 8 * nt + e % 2 < keys_left && (!mask.causal || diff + mask.right >= 0)
                                             && (mask.window <= 0 || diff < mask.window || 8 * nt + e % 2 < sinks_left);
                        const float bias = mask.alibi > 0 ? Mask::bias_at(slope_h, diff) : 0.0f;
                        s[mt][nt][e] = visible ? s[mt][nt][e] + bias : -INFINITY;
                    }
        }
        // Online softmax, per row: the 4 lanes of a quad share a row (xor 1, 2).
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int mt = r / 2, h = r % 2;
            float mx = m[r];
#pragma unroll
            for (int nt = 0; nt < STEP / 8; ++nt) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * h], s[mt][nt][2 * h + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
            // A row that has seen no key yet keeps m = -inf; 0 stands in so that
            // exp2(-inf - 0) = 0 instead of exp2(-inf + inf) = NaN.
            const float m_use = mx == -INFINITY ? 0.0f : mx;
            const float alpha = exp2_approx_ftz(m[r] - m_use);  // exactly 1 where the max did not move
            m[r] = mx;
            float sum = 0.0f;
#pragma unroll
            for (int nt = 0; nt < STEP / 8; ++nt) {
                s[mt][nt][2 * h] = exp2_approx_ftz(s[mt][nt][2 * h] - m_use);
                s[mt][nt][2 * h + 1] = exp2_approx_ftz(s[mt][nt][2 * h + 1] - m_use);
                sum += s[mt][nt][2 * h] + s[mt][nt][2 * h + 1];
            }
            l[r] = l[r] * alpha + sum;
#pragma unroll
            for (int c = 0; c < D / 8; ++c) {
                acc[mt][c][2 * h] *= alpha;
                acc[mt][c][2 * h + 1] *= alpha;
            }
        }
        // O += P·V, 16 keys per step: S tiles 2kk and 2kk+1 are P's A fragment, as bf16.
#pragma unroll
        for (int kk = 0; kk < STEP / 16; ++kk) {
            u32 pf[2][4];
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) {
                pf[mt][0] = pack_bf16x2(s[mt][2 * kk][0], s[mt][2 * kk][1]);
                pf[mt][1] = pack_bf16x2(s[mt][2 * kk][2], s[mt][2 * kk][3]);
                pf[mt][2] = pack_bf16x2(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
                pf[mt][3] = pack_bf16x2(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
            }
#pragma unroll
            for (int c = 0; c < D / 8; c += 2) {  // one ldmatrix.x4.trans: two n8 column tiles of V, both m16 tiles
                u32 vf[4];
                ldmatrix<4, true>(vf, vs + v_ld + 16 * kk * S + 8 * c);
#pragma unroll
                for (int mt = 0; mt < 2; ++mt) {
                    mma_bf16_m16n8k16(acc[mt][c], pf[mt], vf, acc[mt][c]);
                    mma_bf16_m16n8k16(acc[mt][c + 1], pf[mt], vf + 2, acc[mt][c + 1]);
                }
            }
        }
    };
    // Key tile n: start tile n + 1's copy, wait for n's, run its steps. HOT: tile n + 1 exists and
    // lies below T, so its copy needs neither the test for a next tile nor row tests: the hot
    // loop's code holds one copy path (two would put both paths' LDGSTS in its SASS).
    auto tile = [&](auto masked, auto hot, int n) {
        if (decltype(hot)::value) {
            load_kv(StaticFlag<true>(), n + 1);
            cp_async_wait<1>();
        } else if (n + 1 < n_tiles) {
            load_kv(StaticFlag<false>(), n + 1);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();  // every thread's copies of this tile are visible
        const unsigned short* ks = k_s + (n & 1) * TC_KEYS * S;
        const unsigned short* vs = v_s + (n & 1) * TC_KEYS * S;
        if (FLAVOURS) {  // the steps one at a time: unrolled, the copy spills (FLAVOURS above)
#pragma unroll 1
            for (int h = 0; h < TC_KEYS / STEP; ++h)
                step(masked, ks + h * STEP * S, vs + h * STEP * S, j_begin + n * TC_KEYS + h * STEP);
        } else {
#pragma unroll
            for (int h = 0; h < TC_KEYS / STEP; ++h)
                step(masked, ks + h * STEP * S, vs + h * STEP * S, j_begin + n * TC_KEYS + h * STEP);
        }
        __syncthreads();  // every warp is done with this stage before it is refilled
    };

    // The tiles a mask edge (or T) crosses in loops of their own, the ones between without a test;
    // at d = 64 the hot loop stops one tile short of the last tile wholly below T: its next copy
    // is whole (at d = 128 that second copy path is the 4 bytes of spill: one tested path there).
    for_each_key_tile<D == 64>(mask, kt, Sk, tile);

#pragma unroll
    for (int r = 0; r < 4; ++r) {
        const int mt = r / 2, h = r % 2, row = w_row0 + 16 * mt + 8 * h + g;
        float sum = l[r];
        sum += __shfl_xor_sync(0xffffffff, sum, 1);
        sum += __shfl_xor_sync(0xffffffff, sum, 2);
        if (row >= L) continue;
        // sum = 0 only for a row that saw no key: zeros, like the other kernels, not 0/0
        const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
        float* o = out + (long)row * D + 2 * t;
#pragma unroll
        for (int c = 0; c < D / 8; ++c)
            *(float2*)(o + 8 * c) = make_float2(acc[mt][c][2 * h] * inv, acc[mt][c][2 * h + 1] * inv);
    }
}

// grid (ceil(T / 128), 1, H), block (128), shared_mem = 2 · (128 + 4 · 64) · (d + 8) bytes
// (d = 64: 55,296; d = 128: 104,448; both above the 48 KiB default: the launcher opts in).
extern "C" __global__ void __launch_bounds__(32 * TC_WARPS)
attention_fused_kernel5_d64(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
                            const unsigned short* __restrict__ v, float* __restrict__ out,
                            int L, int S, int group, int causal, int window, int offset, int right,
                            int sinks, int alibi) {
    extern __shared__ __align__(16) unsigned short tc_smem[];
    if (Mask::flavoured(right, sinks, alibi))
        attention_fused5<64, true>(q, k, v, out, L, S, group, causal, window, offset, right, sinks, alibi, tc_smem);
    else
        attention_fused5<64, false>(q, k, v, out, L, S, group, causal, window, offset, 0, 0, 0, tc_smem);
}

extern "C" __global__ void __launch_bounds__(32 * TC_WARPS)
attention_fused_kernel5_d128(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
                             const unsigned short* __restrict__ v, float* __restrict__ out,
                             int L, int S, int group, int causal, int window, int offset, int right,
                             int sinks, int alibi) {
    extern __shared__ __align__(16) unsigned short tc_smem[];
    if (Mask::flavoured(right, sinks, alibi))
        attention_fused5<128, true>(q, k, v, out, L, S, group, causal, window, offset, right, sinks, alibi, tc_smem);
    else
        attention_fused5<128, false>(q, k, v, out, L, S, group, causal, window, offset, 0, 0, 0, tc_smem);
}

// ------------------------------------------------------------------------------------------------
// attention_fused_kernel6: FlashAttention-3's step past kernel5 on Hopper (sm_90a only): the same
// inputs, outputs, masks and bf16 roundings, so the same verify family checks it.
//
// What makes it faster than kernel5:
//   - S = Q·K^T and O += P·V by wgmma, one instruction per 16 of the reduction for the whole
//     warpgroup's 64 rows: the tensor cores read K and V from shared memory themselves, through a
//     matrix descriptor, where kernel5's every warp copies all of K and V into its registers with
//     ldmatrix (128 of a 64-key tile's shared-memory clocks at d = 64 against 138 of tensor pipe).
//     Q (A of Q·K^T) and P (A of P·V) stay in registers: kernel5's fragments, 16 rows per warp.
//   - 8 warps, two warpgroups of 64 query rows, 128 rows per block: one copy of each K and V
//     tile serves twice the rows per warp that kernel5's does, in registers half its size (16
//     rows per warp: O 32 or 64 floats, S 32)
//   - K and V tiles in the descriptor's canonical layout (no swizzle): 8-key x 8-column core
//     matrices of 128 contiguous bytes; the one layout serves K (K-major B: the reduction over d
//     runs along a core matrix's rows) and V (MN-major, transposed B: the reduction over keys runs
//     across its rows), only the descriptor's two strides differ
//   - the softmax steps a whole 64-key tile at both head sizes (S is 32 floats per thread)
//   - the overlap (FlashAttention-3's intra-warpgroup pipelining): S of tile n and O += P·V of tile
//     n - 1 issued back to back, S waited for alone (WARPGROUP.DEPBAR.LE gsb0, 0x1 in the SASS), so
//     the tensor cores run the P·V while the warpgroup does tile n's softmax; three K/V stages
//     (stage 2 over q_s, free once Q is in registers) leave one barrier per tile, not two
// What it keeps from kernel5: cp.async with offsets computed once, ex2.approx.ftz, mask-edge
// tiles in loops of their own, causal blocks longest first across all heads.
// What bounds it (bench --bound --gpu h200, static, not a measurement; wgmma's shared-memory
// operand counted once per warpgroup, the assumption andrea_cli/bench/bound/model.py argues):
// at d = 64 the exponentials and conversions, 633 TFLOP/s (34 MUFU.EX2 and 16 F2FP per warp and
// tile on the 16-a-clock pipe against 8 HGMMA), as in FlashAttention-3's paper; at d = 128 the
// tensor pipe, 989, the peak only under the bound's assumptions (no latency, all pipes at the
// 1.83 GHz tensor clock). Hot loop: 275 and 329 instructions per warp and 64-key tile (259 and 315
// with synchronous waits: the rescale and second wgmma fence, the stage offsets). The
// K/V copies take 4 shared-memory wavefronts per cp.async (the least), by the bound's bank count.
// The bound models no waits, so the overlap leaves it where it was; what it buys is latency.
// Its price: registers (S, P, O and Q's fragments live together: 144 at d = 64, so one block of
// 8 warps per SM where the synchronous form fitted two in 128). ptxas still waits for S before
// P·V in the first loop of masked tiles (a window's far edge): "C7517 warpgroup.wait injected".
// Not (yet) FlashAttention-3's: warp specialisation (a producer warp issuing TMA copies) and the
// ping-pong that overlaps one warpgroup's softmax with the other's wgmma (kernel7 has both).
// Shared memory (dynamic, bf16): stages 0 and 1, each a tile's K then its V (64·d each), in the
// canonical layout: key r, columns 8c..8c+7 at (r / 8)·16d + 128c + 16(r % 8) bytes; then q_s
// (128, d+8) padded for ldmatrix, whose first 2·64·d elements are stage 2 after Q is loaded.

#define K6_THREADS 256  // two warpgroups
#define K6_ROWS 128     // query rows per block: 16 per warp

// The mask pass of a wgmma warp's S over one 64-key tile (kernel6 and kernel7): element (c, e) of
// s, s[4c + e], is query w_row0 + g + 8(e/2) against key js + 8c + 2t + e%2. diff0 = p - j of
// element (0, 0) (p = w_row0 + g + offset), j0 its key, keys_left = S - j0; slope_h ALiBi's slope
// in base 2 (the scores' units), its bias added to every pair the Mask shows.
__device__ __forceinline__ void wgmma_mask_tile(const Mask& mask, float (&s)[32], int diff0, int j0, int keys_left,
                                                float slope_h) {
#pragma unroll
    for (int c = 0; c < 8; ++c)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int diff = diff0 + 8 * (e / 2) - 8 * c - e % 2;
            const bool visible = mask.visible_at(diff, j0 + 8 * c + e % 2, 8 * c + e % 2 < keys_left);
            const float bias = mask.alibi > 0 ? Mask::bias_at(slope_h, diff) : 0.0f;
            s[4 * c + e] = visible ? s[4 * c + e] + bias : -INFINITY;  // -inf: exp2 gives exactly 0
        }
}

// The online softmax of that tile, per row (h = 0: row g, 1: row g + 8; the quad's 4 lanes share
// a row): s becomes the tile's weights exp2(s - m), m and l (this lane's share of the sum) move
// to the new max, and alpha is the factor that takes O so far to it (wgmma_rescale), which
// kernel7 applies at once and kernel6 before its next P·V (O is in flight through the softmax).
__device__ __forceinline__ void wgmma_softmax_tile(float (&s)[32], float (&m)[2], float (&l)[2], float (&alpha)[2]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float mx = m[h];
#pragma unroll
        for (int c = 0; c < 8; ++c) mx = fmaxf(mx, fmaxf(s[4 * c + 2 * h], s[4 * c + 2 * h + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
        const float m_use = mx == -INFINITY ? 0.0f : mx;  // a row with no key yet: exp2(-inf) = 0
        alpha[h] = exp2_approx_ftz(m[h] - m_use);
        m[h] = mx;
        float sum = 0.0f;
#pragma unroll
        for (int c = 0; c < 8; ++c) {
            s[4 * c + 2 * h] = exp2_approx_ftz(s[4 * c + 2 * h] - m_use);
            s[4 * c + 2 * h + 1] = exp2_approx_ftz(s[4 * c + 2 * h + 1] - m_use);
            sum += s[4 * c + 2 * h] + s[4 * c + 2 * h + 1];
        }
        l[h] = l[h] * alpha[h] + sum;
    }
}

// O (acc: n8 tile c in acc[4c .. 4c+3], rows g and g + 8) to the newest max: alpha[h] for row h.
template <int D>
__device__ __forceinline__ void wgmma_rescale(float (&acc)[D / 2], const float (&alpha)[2]) {
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int c = 0; c < D / 8; ++c) {
            acc[4 * c + 2 * h] *= alpha[h];
            acc[4 * c + 2 * h + 1] *= alpha[h];
        }
}

template <int D>
__device__ __forceinline__ void attention_fused6(const unsigned short* __restrict__ q,  // (H, L, D), scaled
                                                 const unsigned short* __restrict__ k,  // (H_kv, S, D)
                                                 const unsigned short* __restrict__ v,  // (H_kv, S, D)
                                                 float* __restrict__ out,               // (H, L, D)
                                                 int L, int Sk, int group, int causal, int window, int offset,
                                                 int right, int sinks, int alibi, unsigned short* smem) {
    constexpr int QS = D + TC_PAD;                  // q_s's row stride, in bf16
    constexpr int KV_TILE = TC_KEYS * D;            // one K or V tile, in bf16
    constexpr int STAGE = 2 * KV_TILE;              // one stage: a key tile's K, then its V
    constexpr int CHUNKS = D / 8;                   // 16-byte pieces per row
    constexpr int ROW_STEP = K6_THREADS / CHUNKS;   // rows the block's threads copy in one pass
    constexpr u32 GROUP_BYTES = 16 * D;             // 8 keys' rows: the stride between key groups
    static_assert(K6_ROWS * QS >= STAGE, "stage 2 lies over q_s");
    unsigned short* k_s = smem;                     // stage s's K at k_s + s·STAGE, s = 0, 1, 2
    unsigned short* v_s = k_s + KV_TILE;            // and its V at v_s + s·STAGE
    unsigned short* q_s = smem + 2 * STAGE;         // (K6_ROWS, QS), until Q is in registers; then stage 2
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;

    const Mask mask = Mask::from_args(causal, window, offset, right, sinks, alibi);
    const BlockWork work = causal_block_order(mask.causal, true);
    const int row0 = work.tile * K6_ROWS;
    const long head = work.head;
    q += head * L * D;
    k += head / group * Sk * D;  // query head h reads K/V head h / group, in place
    v += head / group * Sk * D;
    out += head * L * D;

    const KeyTiles kt = mask.key_tiles<TC_KEYS>(row0, K6_ROWS, L, Sk);
    const int j_begin = kt.j_begin, n_tiles = kt.n_tiles;

    // Q: thread i copies rows cp_row + p·ROW_STEP, columns cp_col..+7 (a quarter-warp one 128-byte
    // row of q_s: conflict-free in its padded layout)
    const int cp_row = threadIdx.x / CHUNKS, cp_col = 8 * (threadIdx.x % CHUNKS);
    {
        const unsigned short* src = q + (long)(row0 + cp_row) * D + cp_col;
#pragma unroll
        for (int p = 0; p < K6_ROWS / ROW_STEP; ++p)
            cp_async16(q_s + (cp_row + p * ROW_STEP) * QS + cp_col, src + p * ROW_STEP * D,
                       row0 + cp_row + p * ROW_STEP < L);
        cp_async_commit();
    }
    // K and V: thread i copies key row kv_row, columns kv_col..+7 (and every ROW_STEP rows on), the
    // 8 lanes of a quarter-warp taking 8 consecutive keys of one 8-column chunk: one 128-byte core
    // matrix, so each 16-byte cp.async phase fills all 32 banks once (4 wavefronts a warp; lanes
    // on one key's chunks, 128 bytes apart, would share banks 0-3: 32)
    const int kv_row = threadIdx.x / (8 * CHUNKS) * 8 + threadIdx.x % 8;
    const int kv_col = 8 * (threadIdx.x / 8 % CHUNKS);
    // (row r, column c) of a tile at (r / 8)·8D + 8·(c / 8)·8 + 8·(r % 8) + c % 8, in bf16; ROW_STEP
    // is a multiple of 8, so pass p adds p·ROW_STEP·D
    const int kv_dst = (kv_row / 8) * 8 * D + kv_col * 8 + (kv_row % 8) * 8;
    int kv_global = (j_begin + kv_row) * D + kv_col;
    // Key tile n into stage n % 3 in wgmma's layout, one commit group (WHOLE: no row tests, as kernel5's).
    // The tiles are copied in order, so the stage's offset steps on by an add and a select, not a
    // division (bench --bound follows it to the lanes' banks; n % 3's multiply-high it does not)
    int copy_stage = 0;  // n % 3 · STAGE for the next copy
    auto copy_kv = [&](auto whole, int n) {
        constexpr bool WHOLE = decltype(whole)::value;
        const int rows_left = Sk - (j_begin + n * TC_KEYS) - kv_row;
        unsigned short* kd = k_s + copy_stage + kv_dst;
        unsigned short* vd = v_s + copy_stage + kv_dst;
        copy_stage = copy_stage == 2 * STAGE ? 0 : copy_stage + STAGE;
#pragma unroll
        for (int p = 0; p < TC_KEYS / ROW_STEP; ++p) {
            const bool valid = WHOLE || p * ROW_STEP < rows_left;
            cp_async16(kd + p * ROW_STEP * D, k + kv_global + p * ROW_STEP * D, valid);
            cp_async16(vd + p * ROW_STEP * D, v + kv_global + p * ROW_STEP * D, valid);
        }
        cp_async_commit();
        kv_global += TC_KEYS * D;
    };
    copy_kv(StaticFlag<false>(), 0);
    cp_async_wait<1>();
    __syncthreads();

    const int w_row0 = row0 + 16 * warp;  // this warp's first query row (its warpgroup's 16·(warp % 4))
    u32 qf[D / 16][4];                    // Q's A fragments, k16 step kk
    {
        const int q_ld = (16 * warp + (lane / 8 % 2) * 8 + lane % 8) * QS + (lane / 16) * 8;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) ldmatrix<4, false>(qf[kk], q_s + q_ld + 16 * kk);
    }

    // The descriptors of stage 0's tiles, built once. K: K-major B, LBO 128 (the next 8 columns
    // of d), SBO 16d (the next 8 keys); a k16 step is 256 bytes on. V: MN-major B (transposed),
    // LBO 16d (the next 8 keys), SBO 128 (the next 8 columns); a k16 step is 2 key groups on.
    const unsigned long long k_desc = wgmma_desc(k_s, 128, GROUP_BYTES);
    const unsigned long long v_desc = wgmma_desc(v_s, GROUP_BYTES, 128);

    float acc[D / 2];  // O, unnormalised: n8 tile c in acc[4c .. 4c+3] (rows g, g + 8)
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // rows w_row0 + g, + 8
    float alpha[2] = {1.0f, 1.0f};  // O's factor to the newest max, applied before the next P·V
    float s[32];  // S of the tile (n8 tile c in s[4c .. 4c+3], as acc), then its P
    u32 pf[4][4];  // P of the tile before as bf16 A fragments (keys 16kk.. in pf[kk]), for its P·V
#pragma unroll
    for (int i = 0; i < D / 2; ++i) acc[i] = 0.0f;
#pragma unroll
    for (int i = 0; i < 32; ++i) s[i] = 0.0f;  // (the first wgmma's "+f" operands read it)

    // The tile's P, out of s into the A fragments its P·V reads, once the P·V before has retired
    // them. Never in the softmax's basic block (a branch of its own, or after the last tile): there
    // ptxas moves these conversions up among the exponentials, and the wait with them, which
    // leaves nothing of the softmax under the P·V.
    auto pack_p = [&]() {
        wgmma_wait<0>();  // the P·V before: O and P's registers are free
#pragma unroll
        for (int i = 0; i < D / 2; ++i) wgmma_hold(acc[i]);
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
            for (int i = 0; i < 4; ++i) wgmma_hold(pf[kk][i]);
            // P's A fragment for keys 16kk..: S's n8 tiles 2kk and 2kk + 1, as bf16
            pf[kk][0] = pack_bf16x2(s[8 * kk + 0], s[8 * kk + 1]);
            pf[kk][1] = pack_bf16x2(s[8 * kk + 2], s[8 * kk + 3]);
            pf[kk][2] = pack_bf16x2(s[8 * kk + 4], s[8 * kk + 5]);
            pf[kk][3] = pack_bf16x2(s[8 * kk + 6], s[8 * kk + 7]);
        }
    };
    // O += P·V of the tile before (the one in stage `stage`), its rescale first: the wgmmas only,
    // one commit group
    auto issue_pv = [&](int stage) {
        const unsigned long long vd = wgmma_desc_advance(v_desc, stage * STAGE * 2);
        wgmma_rescale<D>(acc, alpha);
#pragma unroll
        for (int i = 0; i < D / 2; ++i) wgmma_hold(acc[i]);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
            wgmma_bf16_m64nNk16<D, true>(acc, pf[kk], wgmma_desc_advance(vd, 2 * kk * GROUP_BYTES), true);
        wgmma_commit();
    };

    // Key tile n, FlashAttention-3's intra-warpgroup overlap: S(n) = Q·K(n)^T and O += P(n-1)·V(n-1)
    // issued back to back, S waited for alone (wgmma_wait<1>), so P·V runs on the tensor cores
    // while this warpgroup does tile n's softmax (O's rescale waits in alpha for the next P·V);
    // P·V's wait comes only before P(n) is packed into the registers it reads. Three stages: after
    // this tile's one barrier every warp has retired tile n - 2's wgmmas (K(n-2) in its tile, V(n-2)
    // in the next), so tile n + 1 can refill that stage while V(n-1) and K(n) are read: no
    // end-of-tile barrier.
    const float slope_h = mask.slope(head) * TC_LOG2E;  // once a block: its exp2 not in the tile loop
    auto tile = [&](auto masked, auto hot, int n) {
        constexpr bool MASKED = decltype(masked)::value;
        cp_async_wait<0>();   // tile n, this thread's copies (the only group in flight)
        fence_proxy_async();  // this thread's copies, visible to the tensor cores' reads
        __syncthreads();      // and every other thread's; every warp past tile n - 1's P·V
        if (decltype(hot)::value) copy_kv(StaticFlag<true>(), n + 1);
        else if (n + 1 < n_tiles) copy_kv(StaticFlag<false>(), n + 1);
        const unsigned long long kd = wgmma_desc_advance(k_desc, n % 3 * STAGE * 2);
        const int js = j_begin + n * TC_KEYS;

        // S = Q·K^T over the tile's 64 keys
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
            wgmma_bf16_m64nNk16<64, false>(s, qf[kk], wgmma_desc_advance(kd, 256 * kk), kk > 0);
        wgmma_commit();
        if (n > 0) {
            issue_pv((n + 2) % 3);
            wgmma_wait<1>();  // S has landed; P·V stays in flight across the softmax
        } else {
            wgmma_wait<0>();
        }
#pragma unroll
        for (int i = 0; i < 32; ++i) wgmma_hold(s[i]);

        if (MASKED)
            wgmma_mask_tile(mask, s, w_row0 + mask.offset + g - js - 2 * t, js + 2 * t, Sk - js - 2 * t, slope_h);
        // O is in flight: its factor to the new max waits in alpha for the next P·V (issue_pv)
        wgmma_softmax_tile(s, m, l, alpha);
        if (n + 1 < n_tiles) {
            pack_p();
        } else {  // the last tile: the epilogue packs it; both paths leave no wgmma in flight
            wgmma_wait<0>();
#pragma unroll
            for (int i = 0; i < D / 2; ++i) wgmma_hold(acc[i]);
        }
    };

    for_each_key_tile<true>(mask, kt, Sk, tile);
    if (n_tiles > 0) {  // the last tile's P·V
        pack_p();
        issue_pv((n_tiles - 1) % 3);
        wgmma_wait<0>();
#pragma unroll
        for (int i = 0; i < D / 2; ++i) wgmma_hold(acc[i]);
    }

#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int row = w_row0 + 8 * h + g;
        float sum = l[h];
        sum += __shfl_xor_sync(0xffffffff, sum, 1);
        sum += __shfl_xor_sync(0xffffffff, sum, 2);
        if (row >= L) continue;
        const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
        float* o = out + (long)row * D + 2 * t;
#pragma unroll
        for (int c = 0; c < D / 8; ++c)
            *(float2*)(o + 8 * c) = make_float2(acc[4 * c + 2 * h] * inv, acc[4 * c + 2 * h + 1] * inv);
    }
}

// grid (ceil(T / 128), 1, H), block (256), shared_mem = 2 · (128 · (d + 8) + 4 · 64 · d) bytes
// (d = 64: 51,200; d = 128: 100,352; both above the 48 KiB default: the launcher opts in).
// One block per SM at both head sizes: the overlap holds S, P, O and Q's fragments at once (144
// registers at d = 64, over the 128 a second block would leave: capped there it spills 56 bytes)
extern "C" __global__ void __launch_bounds__(K6_THREADS, 1)
attention_fused_kernel6_d64(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
                            const unsigned short* __restrict__ v, float* __restrict__ out,
                            int L, int S, int group, int causal, int window, int offset, int right,
                            int sinks, int alibi) {
    extern __shared__ __align__(16) unsigned short tc_smem[];
    attention_fused6<64>(q, k, v, out, L, S, group, causal, window, offset, right, sinks, alibi, tc_smem);
}

extern "C" __global__ void __launch_bounds__(K6_THREADS)
attention_fused_kernel6_d128(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
                             const unsigned short* __restrict__ v, float* __restrict__ out,
                             int L, int S, int group, int causal, int window, int offset, int right,
                             int sinks, int alibi) {
    extern __shared__ __align__(16) unsigned short tc_smem[];
    attention_fused6<128>(q, k, v, out, L, S, group, causal, window, offset, right, sinks, alibi, tc_smem);
}

// ------------------------------------------------------------------------------------------------
// attention_fused_kernel7: FlashAttention-3's structure on Hopper (sm_90a only): kernel6's wgmma
// tiles, warp-specialised. The same inputs, outputs, masks and bf16 roundings as kernel4-6, so the
// same verify family checks it.
//
// What it adds to kernel6 (whose tiles, softmax and mask code it copies):
//   - a producer warp: warpgroup 0 gives its registers away (setmaxnreg.dec 24) and one warp of it
//     streams K and V in with TMA (cp.async.bulk.tensor): one thread issues a tile's copies, the
//     copy engine moves the bytes, no consumer thread spends an instruction on a load; its other
//     three warps return. The consumers take the registers (setmaxnreg.inc 240).
//   - a ring of K7_STAGES K/V stages, each guarded by two mbarriers: full[s] (the producer's
//     arrive.expect_tx of the stage's bytes; the copies complete them) and empty[s] (every consumer
//     thread arrives once its wgmmas have read the stage), so loads run ahead of the math by the
//     ring's depth and nobody waits at a __syncthreads
//   - two consumer warpgroups of 64 query rows that ping-pong on named barriers: warpgroup c issues
//     its wgmmas (O += P·V of the tile before, S = Q·K^T of this one) only in its turn (bar.sync
//     1 + c), then hands the turn over (bar.arrive 2 - c) and does its softmax while the other's
//     wgmmas run: one's exponentials hide under the other's tensor-core work
//   - P·V of tile n runs one turn late, beside S of tile n + 1, so a turn is one batch of wgmmas
//     (FlashAttention-3's intra-warpgroup overlap, its simplest form: P held in registers across)
// The tiles in shared memory are TMA boxes of 64 keys x 8 columns (16 bytes a row, no swizzle):
// column chunk c of key r at 1024c + 16r bytes, so the core matrix (keys 8g..+7, columns 8c..+7)
// is the 128 contiguous bytes at 1024c + 128g, wgmma's canonical layout with (K: LBO 1024, SBO
// 128; V: LBO 128, SBO 1024); d / 8 boxes per tile and tensor. A tile reaching past S (the
// last, where S % 64 != 0) is copied by the producer warp's own loads, zeros past S, then fenced
// to the async proxy: the same barrier protocol (a plain arrive), no box outside the tensor.
// Q is copied by each consumer warpgroup (cp.async, kernel6's padded q_s) before its first turn.
// What bounds it (bench --bound --gpu h100, a static estimate from the SASS, not a measurement):
// d = 64 the issue slots, 591 TFLOP/s (kernel6: the exponentials, 633); d = 128 the tensor pipe,
// 989, as kernel6. The bound models no waits, so it already credits kernel6 with the overlap the
// ping-pong exists to make real; kernel7 stays selectable by name (variant 7), not the default.
// Shared memory (dynamic): q_s (128, d+8) bf16; k_s, v_s (K7_STAGES, 64·d) bf16 each; full and
// empty mbarriers (K7_STAGES each, 8 bytes); 128 bytes of slack to align the TMA destinations.
// Launch: grid (ceil(L/128), 1, H), block (384); k_map and v_map the tensor maps of K and V as
// (H_kv·S, d) bf16 matrices with a (64, 8) box, in global memory (the launcher encodes them).

#define K7_THREADS 384  // a producer warpgroup and two consumer warpgroups
#define K7_ROWS 128     // query rows per block: 64 per consumer warpgroup, 16 per warp
#define K7_STAGES 2     // K/V stages in the ring
#define K7_PRODUCER_REGS 40
#define K7_CONSUMER_REGS 232

// The shared-window address of a generic pointer to shared memory (what PTX's shared operands take).
__device__ __forceinline__ u32 smem_addr(const void* p) {
#if defined(__CUDA_ARCH__)
    return (u32)__cvta_generic_to_shared(p);
#else
    return 0;
#endif
}

// bar.sync id, n / bar.arrive id, n: a named barrier of n threads (whole warps), ids 1..15 here
__device__ __forceinline__ void named_bar_sync(int id, int n) {
#if WGMMA_PTX
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
#elif defined(__CUDA_ARCH__)
    __trap();  // never launched: andrea refuses the sm_90a kernels on any other GPU
#else
    ptx_emulated::bar_sync(id, n);
#endif
}

__device__ __forceinline__ void named_bar_arrive(int id, int n) {
#if WGMMA_PTX
    asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory");
#elif defined(__CUDA_ARCH__)
    __trap();
#else
    ptx_emulated::bar_arrive(id, n);
#endif
}

// mbarrier.init with `count` arrivals a phase; fence.mbarrier_init makes it visible to the copy
// engine before the __syncthreads that follows.
__device__ __forceinline__ void mbar_init(unsigned long long* bar, u32 count) {
#if WGMMA_PTX
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#elif defined(__CUDA_ARCH__)
    __trap();
#else
    ptx_emulated::mbarrier_init(bar, count);
#endif
}

__device__ __forceinline__ void mbar_arrive(unsigned long long* bar) {
#if WGMMA_PTX
    asm volatile("{ .reg .b64 st; mbarrier.arrive.shared::cta.b64 st, [%0]; }" ::"r"(smem_addr(bar)) : "memory");
#elif defined(__CUDA_ARCH__)
    __trap();
#else
    ptx_emulated::mbarrier_arrive(bar);
#endif
}

// An arrival that also expects `bytes` of copies to complete on this phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned long long* bar, u32 bytes) {
#if WGMMA_PTX
    asm volatile("{ .reg .b64 st; mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1; }"
                 ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
#elif defined(__CUDA_ARCH__)
    __trap();
#else
    ptx_emulated::mbarrier_arrive_expect_tx(bar, bytes);
#endif
}

// Wait until the phase of this parity has completed (try_wait in a loop: it may time out).
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, u32 parity) {
#if WGMMA_PTX
    u32 done = 0;
    while (!done)
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"(smem_addr(bar)), "r"(parity) : "memory");
#elif defined(__CUDA_ARCH__)
    __trap();
#else
    while (!ptx_emulated::mbarrier_try_wait_parity(bar, parity)) {}
#endif
}

// TMA: box {c0, c1} (elements, innermost first) of the tensor map at `map` into dst, its bytes
// completed on `bar`.
__device__ __forceinline__ void tma_load_2d(void* dst, const void* map, int c0, int c1, unsigned long long* bar) {
#if WGMMA_PTX
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 ::"r"(smem_addr(dst)), "l"(map), "r"(c0), "r"(c1), "r"(smem_addr(bar)) : "memory");
#elif defined(__CUDA_ARCH__)
    __trap();
#else
    ptx_emulated::cp_async_bulk_tensor_2d(dst, map, c0, c1, bar);
#endif
}

// setmaxnreg: the whole warpgroup's register count raised or lowered to N (an immediate)
template <int N, bool INC>
__device__ __forceinline__ void set_max_registers() {
#if WGMMA_PTX
    if (INC) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
    else asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
#elif defined(__CUDA_ARCH__)
    __trap();
#else
    if (INC) ptx_emulated::setmaxnreg_inc(N);
    else ptx_emulated::setmaxnreg_dec(N);
#endif
}

template <int D>
__device__ __forceinline__ void attention_fused7(const unsigned short* __restrict__ q,  // (H, L, D), scaled
                                                 const unsigned short* __restrict__ k,  // (H_kv, S, D)
                                                 const unsigned short* __restrict__ v,  // (H_kv, S, D)
                                                 float* __restrict__ out,               // (H, L, D)
                                                 int L, int Sk, int group, int causal, int window, int offset,
                                                 int right, int sinks, int alibi,
                                                 const unsigned char* k_map, const unsigned char* v_map,
                                                 unsigned char* raw_smem) {
    constexpr int QS = D + TC_PAD;               // q_s's row stride, in bf16
    constexpr int KV_TILE = TC_KEYS * D;         // one K or V tile, in bf16
    constexpr u32 TILE_BYTES = 2 * KV_TILE;      // its bytes
    constexpr int CHUNKS = D / 8;                // 16-byte pieces per row: TMA boxes per tile
    constexpr int BOX = TC_KEYS * 8;             // one box (64 keys x 8 columns), in bf16
    // TMA writes 128-byte aligned destinations: the window rounded up (the launcher adds 128 bytes)
    unsigned short* q_s = (unsigned short*)(((unsigned long long)raw_smem + 127) & ~127ull);  // (K7_ROWS, QS)
    unsigned short* k_s = q_s + K7_ROWS * QS;                 // (K7_STAGES, KV_TILE)
    unsigned short* v_s = k_s + K7_STAGES * KV_TILE;          // (K7_STAGES, KV_TILE)
    unsigned long long* full = (unsigned long long*)(v_s + K7_STAGES * KV_TILE);  // (K7_STAGES)
    unsigned long long* empty = full + K7_STAGES;                                 // (K7_STAGES)

    const Mask mask = Mask::from_args(causal, window, offset, right, sinks, alibi);
    const BlockWork work = causal_block_order(mask.causal, true);
    const int row0 = work.tile * K7_ROWS;
    const long head = work.head;
    const int kv_row0 = (int)(head / group) * Sk;  // this K/V head's first row in the maps' (H_kv·S, D)
    q += head * L * D;
    k += (long)kv_row0 * D;  // query head h reads K/V head h / group, in place
    v += (long)kv_row0 * D;
    out += head * L * D;
    const KeyTiles kt = mask.key_tiles<TC_KEYS>(row0, K7_ROWS, L, Sk);
    const int j_begin = kt.j_begin, n_tiles = kt.n_tiles;

    if (threadIdx.x == 0) {
        for (int s = 0; s < K7_STAGES; ++s) {
            mbar_init(&full[s], 1);                         // the producer's one arrive (+ the copies' bytes)
            mbar_init(&empty[s], K7_THREADS - 128);         // every consumer thread, once done with the stage
        }
    }
    __syncthreads();  // the barriers exist before anyone uses them (the last block-wide barrier)

    const int wg = threadIdx.x / 128;
    if (wg == 0) {  // ---- the producer ----
        set_max_registers<K7_PRODUCER_REGS, false>();
        if (threadIdx.x >= 32) return;  // one warp streams; the other three have nothing to do
#ifndef __CUDA_ARCH__
        // The CPU build: a launch worker (racecheck, sanitize) runs on copies of the arrays, so the map
        // the host encoded names the caller's K and V: each block takes a copy of the maps whose
        // address is its own k and v (tensormap.replace's emulation). A GPU's maps are the driver's,
        // encoded with the device arrays' addresses, and read as they are.
        alignas(64) unsigned char maps[2][128];
        std::memcpy(maps[0], k_map, 128);
        std::memcpy(maps[1], v_map, 128);
        ptx_emulated::tensormap_replace_global_address(maps[0], k - (long)kv_row0 * D);
        ptx_emulated::tensormap_replace_global_address(maps[1], v - (long)kv_row0 * D);
        k_map = maps[0];
        v_map = maps[1];
#endif
        const int lane = threadIdx.x;
        for (int n = 0; n < n_tiles; ++n) {
            const int s = n % K7_STAGES, js = j_begin + n * TC_KEYS;
            mbar_wait(&empty[s], ((n / K7_STAGES) & 1) ^ 1);  // the first pass through a stage does not wait
            unsigned short* kd = k_s + s * KV_TILE;
            unsigned short* vd = v_s + s * KV_TILE;
            if (js + TC_KEYS <= Sk) {  // a whole tile: d/8 boxes of K and of V, one thread issues them
                if (lane == 0) {
                    mbar_arrive_expect_tx(&full[s], 2 * TILE_BYTES);
#pragma unroll
                    for (int c = 0; c < CHUNKS; ++c) {
                        tma_load_2d(kd + c * BOX, k_map, 8 * c, kv_row0 + js, &full[s]);
                        tma_load_2d(vd + c * BOX, v_map, 8 * c, kv_row0 + js, &full[s]);
                    }
                }
            } else {  // the last tile reaches past S: the warp copies it, zeros past S (as TMA fills)
                for (int i = lane; i < 2 * TC_KEYS * CHUNKS; i += 32) {
                    const int tensor = i / (TC_KEYS * CHUNKS), c = i / TC_KEYS % CHUNKS, r = i % TC_KEYS;
                    const unsigned short* src = (tensor ? v : k) + (long)(js + r) * D + 8 * c;
                    const uint4 piece = js + r < Sk ? *(const uint4*)src : make_uint4(0, 0, 0, 0);
                    *(uint4*)((tensor ? vd : kd) + c * BOX + 8 * r) = piece;
                }
                fence_proxy_async();  // the warp's stores, visible to the wgmmas' async-proxy reads
                __syncwarp();
                if (lane == 0) mbar_arrive(&full[s]);
            }
        }
        return;
    }

    // ---- the consumers: warpgroup c = wg - 1 owns query rows 64c .. 64c + 63 of the block ----
    set_max_registers<K7_CONSUMER_REGS, true>();
    const int c = wg - 1, ct = threadIdx.x - 128 * wg;  // ct: the thread within its warpgroup
    const int warp = threadIdx.x / 32 - 4, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    {   // Q: the warpgroup's 64 rows, kernel6's copy pattern over 128 threads
        constexpr int ROW_STEP = 128 / CHUNKS;
        const int cp_row = 64 * c + ct / CHUNKS, cp_col = 8 * (ct % CHUNKS);
        const unsigned short* src = q + (long)(row0 + cp_row) * D + cp_col;
#pragma unroll
        for (int p = 0; p < 64 / ROW_STEP; ++p)
            cp_async16(q_s + (cp_row + p * ROW_STEP) * QS + cp_col, src + p * ROW_STEP * D,
                       row0 + cp_row + p * ROW_STEP < L);
        cp_async_commit();
        cp_async_wait<0>();
        named_bar_sync(3 + c, 128);  // the warpgroup's copies, visible to all its threads
    }
    const int w_row0 = row0 + 16 * warp;  // this warp's first query row
    u32 qf[D / 16][4];                    // Q's A fragments, k16 step kk
    {
        const int q_ld = (16 * warp + (lane / 8 % 2) * 8 + lane % 8) * QS + (lane / 16) * 8;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) ldmatrix<4, false>(qf[kk], q_s + q_ld + 16 * kk);
    }
    // Stage 0's descriptors, built once: K K-major (LBO 1024: the next 8 columns, a box on; SBO
    // 128: the next 8 keys), a k16 step two boxes on; V MN-major (LBO 128: the next 8 keys; SBO
    // 1024: the next 8 columns), a k16 step 16 keys (256 bytes) on.
    const unsigned long long k_desc = wgmma_desc(k_s, 1024, 128);
    const unsigned long long v_desc = wgmma_desc(v_s, 128, 1024);

    float acc[D / 2];  // O, unnormalised: n8 tile c in acc[4c .. 4c+3] (rows g, g + 8)
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // rows w_row0 + g, + 8
#pragma unroll
    for (int i = 0; i < D / 2; ++i) acc[i] = 0.0f;
    u32 pf[4][4];  // P of the tile before, as bf16 A fragments: its P·V runs in the next turn

    // O += P·V of the tile in stage s (the wgmmas only: committed with what follows)
    auto issue_pv = [&](int s) {
        const unsigned long long vd = wgmma_desc_advance(v_desc, s * TILE_BYTES);
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
            wgmma_bf16_m64nNk16<D, true>(acc, pf[kk], wgmma_desc_advance(vd, 256 * kk), true);
    };
    if (c == 1) named_bar_arrive(1, 256);  // warpgroup 0 takes the first turn

    auto tile = [&](auto masked, auto hot, int n) {
        constexpr bool MASKED = decltype(masked)::value;
        (void)hot;
        const int s = n % K7_STAGES;
        mbar_wait(&full[s], (n / K7_STAGES) & 1);  // the stage's K and V have landed
        const unsigned long long kd = wgmma_desc_advance(k_desc, s * TILE_BYTES);
        const int js = j_begin + n * TC_KEYS;

        float sc[32];
        named_bar_sync(1 + c, 256);  // this warpgroup's turn at the tensor cores
#pragma unroll
        for (int i = 0; i < D / 2; ++i) wgmma_hold(acc[i]);
        wgmma_fence();
        if (n > 0) issue_pv((n - 1) % K7_STAGES);
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
            wgmma_bf16_m64nNk16<64, false>(sc, qf[kk], wgmma_desc_advance(kd, 2048 * kk), kk > 0);
        wgmma_commit();
        named_bar_arrive(2 - c, 256);  // the other warpgroup's turn: its wgmmas run during this softmax
        wgmma_wait<0>();
#pragma unroll
        for (int i = 0; i < 32; ++i) wgmma_hold(sc[i]);
#pragma unroll
        for (int i = 0; i < D / 2; ++i) wgmma_hold(acc[i]);
        if (n > 0) mbar_arrive(&empty[(n - 1) % K7_STAGES]);  // the tile before is read: its stage may refill

        if (MASKED)
            wgmma_mask_tile(mask, sc, w_row0 + mask.offset + g - js - 2 * t, js + 2 * t, Sk - js - 2 * t,
                            mask.slope(head) * TC_LOG2E);
        float alpha[2];
        wgmma_softmax_tile(sc, m, l, alpha);
        wgmma_rescale<D>(acc, alpha);  // O through the tile before, to the new max
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {  // P's A fragment for keys 16kk..: S's n8 tiles 2kk, 2kk + 1
            pf[kk][0] = pack_bf16x2(sc[8 * kk + 0], sc[8 * kk + 1]);
            pf[kk][1] = pack_bf16x2(sc[8 * kk + 2], sc[8 * kk + 3]);
            pf[kk][2] = pack_bf16x2(sc[8 * kk + 4], sc[8 * kk + 5]);
            pf[kk][3] = pack_bf16x2(sc[8 * kk + 6], sc[8 * kk + 7]);
        }
    };

    for_each_key_tile<false>(mask, kt, Sk, tile);

    if (n_tiles > 0) {  // the last tile's P·V, in a last turn (warpgroup 1 hands back no turn after it)
        named_bar_sync(1 + c, 256);
#pragma unroll
        for (int i = 0; i < D / 2; ++i) wgmma_hold(acc[i]);
        wgmma_fence();
        issue_pv((n_tiles - 1) % K7_STAGES);
        wgmma_commit();
        if (c == 0) named_bar_arrive(2, 256);
        wgmma_wait<0>();
#pragma unroll
        for (int i = 0; i < D / 2; ++i) wgmma_hold(acc[i]);
    } else if (c == 0) {
        named_bar_sync(1, 256);  // no tile: warpgroup 1's opening arrival still closes its round
    }

#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int row = w_row0 + 8 * h + g;
        float sum = l[h];
        sum += __shfl_xor_sync(0xffffffff, sum, 1);
        sum += __shfl_xor_sync(0xffffffff, sum, 2);
        if (row >= L) continue;
        const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
        float* o = out + (long)row * D + 2 * t;
#pragma unroll
        for (int c8 = 0; c8 < D / 8; ++c8)
            *(float2*)(o + 8 * c8) = make_float2(acc[4 * c8 + 2 * h] * inv, acc[4 * c8 + 2 * h + 1] * inv);
    }
}

// grid (ceil(T / 128), 1, H), block (384), shared_mem = 2 · (128 · (d + 8) + 2 · K7_STAGES · 64 · d)
// + 16 · K7_STAGES + 128 bytes (d = 64: 51,360; d = 128: 100,512 at 2 stages: opt-ins).
extern "C" __global__ void __launch_bounds__(K7_THREADS, 1)
attention_fused_kernel7_d64(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
                            const unsigned short* __restrict__ v, float* __restrict__ out,
                            int L, int S, int group, int causal, int window, int offset, int right,
                            int sinks, int alibi, const unsigned char* k_map, const unsigned char* v_map) {
    extern __shared__ __align__(16) unsigned char k7_smem[];
    attention_fused7<64>(q, k, v, out, L, S, group, causal, window, offset, right, sinks, alibi, k_map, v_map,
                          k7_smem);
}

extern "C" __global__ void __launch_bounds__(K7_THREADS, 1)
attention_fused_kernel7_d128(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
                             const unsigned short* __restrict__ v, float* __restrict__ out,
                             int L, int S, int group, int causal, int window, int offset, int right,
                             int sinks, int alibi, const unsigned char* k_map, const unsigned char* v_map) {
    extern __shared__ __align__(16) unsigned char k7_smem[];
    attention_fused7<128>(q, k, v, out, L, S, group, causal, window, offset, right, sinks, alibi, k_map, v_map,
                          k7_smem);
}

// ================================================================================================
// DECODE: generation, one new query at a time against a KV cache
//
// A decoder generates one token per step. At step t the new position's query attends to the keys
// and values of positions 0..t, which the earlier steps left in a cache (the KV cache): the step
// appends its own k and v (kv_append_kernel), then reads the whole cache for one output row per
// head. Nothing is T×T: a step is one pass over K and V, 2·S·(d_k + d_v) flops against
// S·(d_k + d_v) numbers read, so it is bound by memory bandwidth, and what counts is that the
// cache streams at full speed. One block per head would leave most of a GPU idle (12 heads,
// 132 SMs), so the cache is split across blocks (flash-decoding): each block softmaxes its own
// slice of keys and writes the slice's output, normalised, with its logsumexp; a second kernel
// merges the slices of a head, weighting each by exp(lse_slice - lse_row), which is exactly the
// softmax over all the keys: sum_j e^{s_j} v_j / sum_j e^{s_j}, regrouped by slice.
//
// The query is the newest position, S - 1, and its own key is in the cache: causal hides nothing
// there, a window the keys before S - window (all but its sinks). The Mask says which keys
// (last_row_keys: the sinks, then the window, numbered as one run that the slices cut).
// Grouped K/V heads (as Llama's): query head h reads K/V head h / group, never a copy.
// ------------------------------------------------------------------------------------------------

#define DECODE_THREADS 128  // 4 warps per block
#define DECODE_MAX_D 128    // the widest row: each lane holds d / DECODE_LANES columns of q and of the output
#define DECODE_LANES 8      // lanes reading one key row together (a warp: 4 rows at once)
#define DECODE_KEYS 4       // key rows each group of DECODE_LANES lanes reduces per step
#define DECODE_GROUPS (DECODE_THREADS / DECODE_LANES)  // online softmaxes per block, merged at its end

// A row of the cache in the units a lane loads: a float (float32 cache) or a 32-bit word of two
// bf16 values (pack_bf16x2's order: element 2u in the low half). A bf16 value is the top half of
// a float32, so widening is one shift or one mask.
template <bool BF16>
struct CacheRow {
    static constexpr int PER_UNIT = BF16 ? 2 : 1;                         // elements per unit
    static constexpr int UNITS = DECODE_MAX_D / PER_UNIT / DECODE_LANES;  // units per lane, at most
    // Unit idx of a cache, widened (x, and y for bf16's high half); ok false: zeros, nothing read.
    __device__ __forceinline__ static float2 load(const void* __restrict__ cache, long idx, bool ok) {
        if (BF16) {
            const u32 word = ok ? ((const u32*)cache)[idx] : 0u;
            return make_float2(__uint_as_float(word << 16), __uint_as_float(word & 0xffff0000u));
        }
        return make_float2(ok ? ((const float*)cache)[idx] : 0.0f, 0.0f);
    }
};

// kv_append_kernel1 (float32 cache) and kv_append_kernel2 (bf16 cache): write position
// `position`'s k and v, one row per K/V head, into the cache. grid (1, 1, H_kv), block (128).
extern "C" __global__ void kv_append_kernel1(const float* __restrict__ k_new,  // (H_kv, d_k)
                                             const float* __restrict__ v_new,  // (H_kv, d_v)
                                             float* __restrict__ k_cache,      // (H_kv, capacity, d_k)
                                             float* __restrict__ v_cache,      // (H_kv, capacity, d_v)
                                             int position, int capacity, int d_k, int d_v) {
    const long h = blockIdx.z, row = h * capacity + position;
    for (int c = threadIdx.x; c < d_k; c += blockDim.x) k_cache[row * d_k + c] = k_new[h * d_k + c];
    for (int c = threadIdx.x; c < d_v; c += blockDim.x) v_cache[row * d_v + c] = v_new[h * d_v + c];
}

// The bf16 cache holds d / 2 words a row (d_k, d_v even), rounded to nearest even as the
// tensor-core kernels round their operands; half the bytes of kernel1's cache to read per step.
extern "C" __global__ void kv_append_kernel2(const float* __restrict__ k_new,  // (H_kv, d_k)
                                             const float* __restrict__ v_new,  // (H_kv, d_v)
                                             u32* __restrict__ k_cache,        // (H_kv, capacity, d_k / 2)
                                             u32* __restrict__ v_cache,        // (H_kv, capacity, d_v / 2)
                                             int position, int capacity, int d_k, int d_v) {
    const long h = blockIdx.z, row = h * capacity + position;
    for (int p = threadIdx.x; p < d_k / 2; p += blockDim.x)
        k_cache[row * (d_k / 2) + p] = pack_bf16x2(k_new[h * d_k + 2 * p], k_new[h * d_k + 2 * p + 1]);
    for (int p = threadIdx.x; p < d_v / 2; p += blockDim.x)
        v_cache[row * (d_v / 2) + p] = pack_bf16x2(v_new[h * d_v + 2 * p], v_new[h * d_v + 2 * p + 1]);
}

// One slice of one head's cache, each lane holding UNITS units of a row (attention_decode below
// picks UNITS for the widths: a narrow row's lanes issue no loads past its end).
template <bool BF16, int UNITS>
__device__ __forceinline__ void attention_decode_slice(const float* __restrict__ q,  // (H, d_k)
                                                 const void* __restrict__ k_cache,  // (H_kv, capacity, d_k)
                                                 const void* __restrict__ v_cache,  // (H_kv, capacity, d_v)
                                                 float* __restrict__ part_out,  // (H, splits, d_v)
                                                 float* __restrict__ part_lse,  // (H, splits)
                                                 int S, int capacity, int d_k, int d_v, float scale,
                                                 int causal, int window, int offset, int right, int sinks, int alibi,
                                                 int group, int keys_per_split,
                                                 float* m_s, float* l_s, float* w_s,
                                                 float (*acc_s)[DECODE_MAX_D]) {
    // A warp's lanes are 4 groups of DECODE_LANES, each group one online softmax of its own. A step
    // of a group takes DECODE_KEYS key rows; its lanes own the units u = sub + 8·t of every row
    // (a load instruction of the warp: 4 adjacent rows, 32 contiguous bytes of each), multiply
    // them by their columns of q, and ONE shuffle tree (3 rounds, DECODE_KEYS values each) turns
    // the partial dots into the step's scores: 3 shuffles per 4 keys where a warp per row needed
    // 5 per key, and 5 exp2 per 4 keys where it needed 2 per key. The groups merge at the end,
    // through shared memory. Scores in log2 units (times scale·log2 e after the dot, one rounding).
    typedef CacheRow<BF16> Row;
    constexpr int E = UNITS * Row::PER_UNIT;  // elements per lane of q and of the output
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, n_warps = blockDim.x / 32;
    const int sub = lane % DECODE_LANES, g = lane / DECODE_LANES;  // unit column and row in the warp's 4
    const int split = blockIdx.x, h = blockIdx.z;
    const long kv = h / group;  // the K/V head this query head shares with group - 1 others
    const int units_k = d_k / Row::PER_UNIT, units_v = d_v / Row::PER_UNIT;  // per row (d even for bf16)

    // The keys the query at position S - 1 sees (the Mask's last_row_keys: the sinks, then its
    // window), numbered 0 .. count - 1 and cut into slices of keys_per_split. offset is 0 here
    // (the query is one of the cache's positions) and a right bound reaches no key past S - 1.
    const Mask mask = Mask::from_args(causal, window, offset, right, sinks, alibi);
    const SeenKeys seen = mask.last_row_keys(S);
    const int n_first = split * keys_per_split;
    const int n_stop = min(seen.count, n_first + keys_per_split);
    const float slope_log2 = mask.slope(h) * 1.4426950408889634f;  // ALiBi's m_h (0 without), in log2 units

    float qr[E], acc[E];
#pragma unroll
    for (int t = 0; t < UNITS; ++t)
#pragma unroll
        for (int e = 0; e < Row::PER_UNIT; ++e) {
            const int c = (sub + DECODE_LANES * t) * Row::PER_UNIT + e;
            qr[t * Row::PER_UNIT + e] = c < d_k ? q[(long)h * d_k + c] : 0.0f;
            acc[t * Row::PER_UNIT + e] = 0.0f;
        }
    const float scale_log2 = scale * 1.4426950408889634f;  // s·log2 e: exp(s - m) = exp2(s·log2 e - m·log2 e)
    float m = -INFINITY, l = 0.0f;  // this group's running max (log2 units) and sum of exp2(s - m)
    const int step_keys = 4 * DECODE_KEYS;  // a warp's keys per step
    // n: the step's place among the keys seen (seen.key(n) the key: adjacent but at the sinks'
    // seam, where the window starts)
    for (int n0 = n_first + warp * step_keys; n0 < n_stop; n0 += n_warps * step_keys) {
        float s[DECODE_KEYS];
#pragma unroll
        for (int r = 0; r < DECODE_KEYS; ++r) {
            const int n = n0 + 4 * r + g, j = seen.key(n);  // row r of the group's step: the warp's 4 groups read 4 adjacent rows
            const long k_row = (kv * capacity + j) * units_k;
            s[r] = 0.0f;
#pragma unroll
            for (int t = 0; t < UNITS; ++t) {
                const int u = sub + DECODE_LANES * t;
                const float2 x = Row::load(k_cache, k_row + u, n < n_stop && u < units_k);
                s[r] += qr[t * Row::PER_UNIT] * x.x;
                if (BF16) s[r] += qr[t * Row::PER_UNIT + 1] * x.y;
            }
        }
#pragma unroll
        for (int offset = 1; offset < DECODE_LANES; offset <<= 1)
#pragma unroll
            for (int r = 0; r < DECODE_KEYS; ++r) s[r] += __shfl_xor_sync(0xffffffff, s[r], offset);
        float m_new = m;
#pragma unroll
        for (int r = 0; r < DECODE_KEYS; ++r) {
            // past the slice: no weight; ALiBi's -m_h·(S - 1 - j), in log2 units as the score
            const int n = n0 + 4 * r + g;
            s[r] = n < n_stop ? s[r] * scale_log2 + Mask::bias_at(slope_log2, S - 1 - seen.key(n)) : -INFINITY;
            m_new = fmaxf(m_new, s[r]);
        }
        const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // a step with no key yet: exp2(-inf) = 0, no NaN
        const float alpha = exp2f(m - m_use);  // m = -inf before the group's first key: 0
        float p[DECODE_KEYS];
        l *= alpha;
#pragma unroll
        for (int r = 0; r < DECODE_KEYS; ++r) {
            p[r] = exp2f(s[r] - m_use);
            l += p[r];
        }
        m = m_new;
#pragma unroll
        for (int e = 0; e < E; ++e) acc[e] *= alpha;
#pragma unroll
        for (int r = 0; r < DECODE_KEYS; ++r) {
            const int n = n0 + 4 * r + g, j = seen.key(n);
            const long v_row = (kv * capacity + j) * units_v;
#pragma unroll
            for (int t = 0; t < UNITS; ++t) {
                const int u = sub + DECODE_LANES * t;
                const float2 x = Row::load(v_cache, v_row + u, n < n_stop && u < units_v);
                acc[t * Row::PER_UNIT] += p[r] * x.x;
                if (BF16) acc[t * Row::PER_UNIT + 1] += p[r] * x.y;
            }
        }
    }

    const int my_group = warp * 4 + g;
    if (sub == 0) {
        m_s[my_group] = m;
        l_s[my_group] = l;
    }
#pragma unroll
    for (int t = 0; t < UNITS; ++t)
#pragma unroll
        for (int e = 0; e < Row::PER_UNIT; ++e) {
            const int c = (sub + DECODE_LANES * t) * Row::PER_UNIT + e;
            if (c < d_v) acc_s[my_group][c] = acc[t * Row::PER_UNIT + e];
        }
    __syncthreads();

    // The slice's max and sum over its groups, by the first warp (a lane per group); a group that
    // got no key has m = -inf, l = 0 and weighs exp2(-inf) = 0. Every slice holds a key (the
    // launcher cuts only the keys seen), so l_b > 0. Each group's weight, normalised, to w_s.
    if (warp == 0) {
        const float m_g = lane < DECODE_GROUPS ? m_s[lane] : -INFINITY;
        const float m_b = warp_max(m_g);
        const float w = lane < DECODE_GROUPS ? exp2f(m_g - m_b) : 0.0f;
        const float l_b = warp_sum(lane < DECODE_GROUPS ? w * l_s[lane] : 0.0f);
        if (lane < DECODE_GROUPS) w_s[lane] = l_b > 0.0f ? w / l_b : 0.0f;
        if (lane == 0)  // back to natural-log units for the merge: lse = (m_b + log2 l_b) · ln 2
            part_lse[(long)h * gridDim.x + split] = l_b > 0.0f ? (m_b + log2f(l_b)) * 0.6931471805599453f : -INFINITY;
    }
    __syncthreads();
    const long row = (long)h * gridDim.x + split;
    for (int c = threadIdx.x; c < d_v; c += blockDim.x) {
        float o = 0.0f;
        for (int w = 0; w < DECODE_GROUPS; ++w) o += acc_s[w][c] * w_s[w];
        part_out[row * d_v + c] = o;
    }
}

// The body of attention_decode_kernel1 (float32 cache) and 2 (bf16): the units a lane holds, for
// the widths (d <= 64: half of DECODE_MAX_D's), and the block's shared memory, one copy for both.
template <bool BF16>
__device__ __forceinline__ void attention_decode(const float* __restrict__ q, const void* __restrict__ k_cache,
                                                 const void* __restrict__ v_cache, float* __restrict__ part_out,
                                                 float* __restrict__ part_lse, int S, int capacity, int d_k,
                                                 int d_v, float scale, int causal, int window, int offset,
                                                 int right, int sinks, int alibi, int group, int keys_per_split) {
    __shared__ float m_s[DECODE_GROUPS], l_s[DECODE_GROUPS], w_s[DECODE_GROUPS];
    __shared__ float acc_s[DECODE_GROUPS][DECODE_MAX_D];
    constexpr int FULL = CacheRow<BF16>::UNITS;
    if (max(d_k, d_v) <= DECODE_MAX_D / 2)
        attention_decode_slice<BF16, FULL / 2>(q, k_cache, v_cache, part_out, part_lse, S, capacity, d_k, d_v, scale,
                                               causal, window, offset, right, sinks, alibi, group, keys_per_split, m_s, l_s,
                                               w_s, acc_s);
    else
        attention_decode_slice<BF16, FULL>(q, k_cache, v_cache, part_out, part_lse, S, capacity, d_k, d_v, scale,
                                           causal, window, offset, right, sinks, alibi, group, keys_per_split, m_s, l_s,
                                               w_s, acc_s);
}

extern "C" __global__ void __launch_bounds__(DECODE_THREADS)
attention_decode_kernel1(const float* __restrict__ q, const float* __restrict__ k_cache,
                         const float* __restrict__ v_cache, float* __restrict__ part_out,
                         float* __restrict__ part_lse, int S, int capacity, int d_k, int d_v, float scale,
                         int causal, int window, int offset, int right, int sinks, int alibi, int group,
                         int keys_per_split) {
    attention_decode<false>(q, k_cache, v_cache, part_out, part_lse, S, capacity, d_k, d_v, scale, causal,
                            window, offset, right, sinks, alibi, group, keys_per_split);
}

extern "C" __global__ void __launch_bounds__(DECODE_THREADS)
attention_decode_kernel2(const float* __restrict__ q, const u32* __restrict__ k_cache,
                         const u32* __restrict__ v_cache, float* __restrict__ part_out,
                         float* __restrict__ part_lse, int S, int capacity, int d_k, int d_v, float scale,
                         int causal, int window, int offset, int right, int sinks, int alibi, int group,
                         int keys_per_split) {
    attention_decode<true>(q, k_cache, v_cache, part_out, part_lse, S, capacity, d_k, d_v, scale, causal,
                           window, offset, right, sinks, alibi, group, keys_per_split);
}

// attention_decode_merge_kernel1: one head's slices into its output row. With L = log sum_s
// exp(lse_s), the row's logsumexp, out = sum_s exp(lse_s - L) · out_s: each slice's softmax
// rescaled to the whole row's. grid (1, 1, H), block (128); lse (H) kept for verify.
extern "C" __global__ void attention_decode_merge_kernel1(const float* __restrict__ part_out,  // (H, splits, d_v)
                                                          const float* __restrict__ part_lse,  // (H, splits)
                                                          float* __restrict__ out,             // (H, d_v)
                                                          float* __restrict__ lse,             // (H)
                                                          int splits, int d_v) {
    const long h = blockIdx.z;
    const float* slice_lse = part_lse + h * splits;
    float m = -INFINITY;
    for (int s = 0; s < splits; ++s) m = fmaxf(m, slice_lse[s]);
    float sum = 0.0f;  // sum_s exp(lse_s - m); 0 only if no slice saw a key
    for (int s = 0; s < splits; ++s) sum += expf(slice_lse[s] - m);
    const float row_lse = sum > 0.0f ? m + logf(sum) : -INFINITY;
    for (int c = threadIdx.x; c < d_v; c += blockDim.x) {
        float o = 0.0f;
        for (int s = 0; s < splits; ++s) o += expf(slice_lse[s] - row_lse) * part_out[(h * splits + s) * d_v + c];
        out[h * d_v + c] = sum > 0.0f ? o : 0.0f;
    }
    if (threadIdx.x == 0) lse[h] = row_lse;
}

// ================================================================================================
// BACKWARD
//
// Given dO = dL/dO, the gradient of a loss L with respect to the output, the chain rule through
// O = P·V, P = softmax(S'), S' = mask(S · scale), S = Q·K^T gives, per head:
//
//     dV = P^T · dO                         how much each value row moved the loss
//     dP = dO · V^T                         the gradient reaching the weights
//     dS = P ∘ (dP − rowsum(dP ∘ P))        through the softmax: its Jacobian diag(p) − p·p^T,
//                                           applied row by row without ever being built
//     dQ = scale · dS · K,   dK = scale · dS^T · Q
//
// dS is the gradient with respect to the masked, scaled scores S'; the scale enters once, in dQ
// and dK, since S' = scale · Q·K^T. A masked position has P = 0 exactly, so its dS is exactly 0
// and it passes nothing on to Q or K, as a -inf score should. Where the softmax is peaky (a row
// with one weight near 1) dS is near 0 for every entry: the gradient vanishes there, which is the
// course's argument for the division by sqrt(d_k).
// ------------------------------------------------------------------------------------------------

// L queries against S keys, H query heads over H_kv = H / group K/V heads (query head h reads K/V
// head h / group, as the forward): P, dP and dS are (H, L, S); dQ (H, L, d_k); dK and dV
// (H_kv, S, d) are the sums over the `group` query heads that read each K/V head. Those sums
// are made inside the dK/dV kernels, not by atomics nor by a per-query-head partial and a
// second pass: a block owns some keys of one K/V head and walks its group's query heads one
// after the other, so each dK/dV element is summed by one thread in one fixed order (the same
// bits on every run) and no (H, S, d) partial is ever stored. The group's heads lie one after
// the other in P, dS, dO and Q, so their rows stacked are one (group·L)-row operand.

// scale · A^T · B summed over a group: out[j][c] = scale · sum_h sum_i A_h[i][j] · B_h[i][c], for
// A_h (L, S) and B_h (L, d) the group's heads, one 16x16 output tile per block. The body of
// dv_kernel1 (A = P, B = dO) and dk_kernel1 (A = dS, B = Q).
__device__ __forceinline__ void transposed_product(const float* __restrict__ a,  // (group, L, S)
                                                   const float* __restrict__ b,  // (group, L, d)
                                                   float* __restrict__ out,      // (S, d)
                                                   int L, int S, int d, int group, float scale, const Mask mask) {
    __shared__ float a_tile[TILE][TILE + 1];  // a_tile[r][c] = A[i0 + r][row0 + c]
    __shared__ float b_tile[TILE][TILE + 1];  // b_tile[r][c] = B[i0 + r][col0 + c]
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;
    const int j = row0 + ty, c = col0 + tx;  // this thread's output: key row j, column c

    // A[i][j] = 0 wherever the Mask hides key j from row i (P and dS vanish there): output row j
    // gathers only from the query rows that see this block's keys (causal: none before the row at
    // the first key's position; a window: none past the last key's reach), in every head of the
    // group, so the row tiles outside them are skipped.
    const QueryRows qr = mask.query_rows(row0, TILE, L);
    float acc = 0.0f;
    for (int h = 0; h < group; ++h) {
        const float* ah = a + (long)h * L * S;
        const float* bh = b + (long)h * L * d;
        for (int i0 = qr.i_begin; i0 < qr.i_end; i0 += TILE) {
            const int ai = i0 + ty, aj = row0 + tx, bc = col0 + tx;
            a_tile[ty][tx] = (ai < L && aj < S) ? ah[(long)ai * S + aj] : 0.0f;  // coalesced along j
            b_tile[ty][tx] = (ai < L && bc < d) ? bh[(long)ai * d + bc] : 0.0f;
            __syncthreads();
            for (int ii = 0; ii < TILE; ++ii) acc += a_tile[ii][ty] * b_tile[ii][tx];
            __syncthreads();
        }
    }
    if (j < S && c < d) out[(long)j * d + c] = acc * scale;
}

extern "C" __global__ void dv_kernel1(const float* __restrict__ weights,  // (H, L, S)
                                      const float* __restrict__ d_out,    // (H, L, d_v)
                                      float* __restrict__ dv,             // (H / group, S, d_v)
                                      int L, int S, int d_v, int group, int causal, int window, int offset,
                                      int right, int sinks, int alibi) {
    const long kv_head = blockIdx.z;  // its query heads: kv_head·group .. + group - 1
    transposed_product(weights + kv_head * group * L * S, d_out + kv_head * group * L * d_v, dv + kv_head * S * d_v,
                       L, S, d_v, group, 1.0f, Mask::from_args(causal, window, offset, right, sinks, alibi));
}

extern "C" __global__ void dp_kernel1(const float* __restrict__ d_out,  // (H, L, d_v)
                                      const float* __restrict__ v,      // (H / group, S, d_v)
                                      float* __restrict__ dp,           // (H, L, S)
                                      int L, int S, int d_v, int group) {
    // dP[i][j] = dO[i] · V[j]: scores_kernel1's product A·B^T, with dO and V for Q and K.
    __shared__ float o_tile[TILE][TILE + 1];  // o_tile[r][c] = dO[row0 + r][c0 + c]
    __shared__ float v_tile[TILE][TILE + 1];  // v_tile[r][c] = V[col0 + r][c0 + c]
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;
    const long head = blockIdx.z;
    d_out += head * L * d_v;
    v += head / group * S * d_v;  // query head h reads V head h / group
    dp += head * L * S;

    const int i = row0 + ty, j = col0 + tx;
    float acc = 0.0f;
    for (int c0 = 0; c0 < d_v; c0 += TILE) {
        const int orow = row0 + ty, vrow = col0 + ty, c = c0 + tx;
        o_tile[ty][tx] = (orow < L && c < d_v) ? d_out[(long)orow * d_v + c] : 0.0f;
        v_tile[ty][tx] = (vrow < S && c < d_v) ? v[(long)vrow * d_v + c] : 0.0f;
        __syncthreads();
        for (int cc = 0; cc < TILE; ++cc) acc += o_tile[ty][cc] * v_tile[tx][cc];
        __syncthreads();
    }
    if (i < L && j < S) dp[(long)i * S + j] = acc;
}

extern "C" __global__ void ds_kernel1(const float* __restrict__ weights,  // (H, L, S)
                                      const float* __restrict__ dp,       // (H, L, S)
                                      float* __restrict__ ds,             // (H, L, S)
                                      int L, int S) {
    // One warp per row, as softmax_kernel2: the row's sum_j dP[i][j]·P[i][j] is one warp sum,
    // then every entry is P[i][j]·(dP[i][j] − that sum). This is the softmax Jacobian
    // diag(p) − p·p^T times the row dP, in O(S) instead of the O(S^2) the matrix would cost.
    const int i = blockIdx.x * blockDim.y + threadIdx.y;
    const int lane = threadIdx.x;
    if (i >= L) return;  // the whole warp leaves together
    const long row = (long)blockIdx.z * L * S + (long)i * S;
    const float* p = weights + row;
    const float* g = dp + row;

    float dot = 0.0f;
    for (int j = lane; j < S; j += 32) dot += p[j] * g[j];
    const float row_dot = warp_sum(dot);
    // p[j] = 0 exactly where the mask hid key j, so ds there is exactly 0 (0 · finite)
    for (int j = lane; j < S; j += 32) ds[row + j] = p[j] * (g[j] - row_dot);
}

extern "C" __global__ void dq_kernel1(const float* __restrict__ ds,  // (H, L, S)
                                      const float* __restrict__ k,   // (H / group, S, d_k)
                                      float* __restrict__ dq,        // (H, L, d_k)
                                      int L, int S, int d_k, int group, float scale, int causal, int window,
                                      int offset, int right, int sinks, int alibi) {
    // dQ = scale · dS · K: av_kernel1's product P·V with dS and K, and the scale on the store.
    __shared__ float s_tile[TILE][TILE + 1];  // s_tile[r][c] = dS[row0 + r][j0 + c]
    __shared__ float k_tile[TILE][TILE + 1];  // k_tile[r][c] = K[j0 + r][col0 + c]
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;
    const long head = blockIdx.z;
    ds += head * L * S;
    k += head / group * S * d_k;  // query head h reads K head h / group
    dq += head * L * d_k;

    // dS[i][j] = 0 wherever the Mask hides key j: only the key tiles the block's rows see (as av_kernel1)
    const Mask mask = Mask::from_args(causal, window, offset, right, sinks, alibi);
    const KeyTiles kt = mask.key_tiles<TILE>(row0, TILE, L, S);
    const int i = row0 + ty, c = col0 + tx;
    float acc = 0.0f;
    for (int j0 = kt.j_begin; j0 < kt.j_end; j0 += TILE) {
        const int sj = j0 + tx, kj = j0 + ty;
        s_tile[ty][tx] = (i < L && sj < S) ? ds[(long)i * S + sj] : 0.0f;
        k_tile[ty][tx] = (kj < S && c < d_k) ? k[(long)kj * d_k + c] : 0.0f;
        __syncthreads();
        for (int jj = 0; jj < TILE; ++jj) acc += s_tile[ty][jj] * k_tile[jj][tx];
        __syncthreads();
    }
    if (i < L && c < d_k) dq[(long)i * d_k + c] = acc * scale;
}

extern "C" __global__ void dk_kernel1(const float* __restrict__ ds,  // (H, L, S)
                                      const float* __restrict__ q,   // (H, L, d_k)
                                      float* __restrict__ dk,        // (H / group, S, d_k)
                                      int L, int S, int d_k, int group, float scale, int causal, int window,
                                      int offset, int right, int sinks, int alibi) {
    const long kv_head = blockIdx.z;
    transposed_product(ds + kv_head * group * L * S, q + kv_head * group * L * d_k, dk + kv_head * S * d_k, L, S, d_k,
                       group, scale, Mask::from_args(causal, window, offset, right, sinks, alibi));
}

// ------------------------------------------------------------------------------------------------
// The same four products through the register-tiled GEMM tile (BUILDING BLOCKS), 8x8 outputs per
// thread: dp_kernel2 is scores_kernel2's product, dq_kernel2 av_kernel2's, dv_kernel2 and
// dk_kernel2 av_kernel2's with A read transposed (A_KM): a k-slice of P or dS is a row segment,
// read coalesced along the key rows the block owns. Each k range is the Mask's: dq stops after
// the keys its rows see, as av_kernel2 does; dv and dk take the query rows that see the block's
// keys (mask.query_rows: under causal none before the block's first key's row), out to whole
// float4s. Grouped heads: dp and dq stack the group's query heads as av_kernel2 does, one
// (group·L)-row product against the one K/V head; dv and dk sum over the group as one k range
// over the stacked rows, from the first head's first row that sees the block's keys to the last
// head's last: the rows between that see none of them (the middle heads' rows outside the
// range) hold P = dS = 0 exactly and add nothing, so one k loop serves the whole group (a loop
// per head would have to carry the 64 accumulators across gemm_tile_8x8 calls).

// A k range's end rounded up to a multiple of 4 within n rows: gemm_tile_8x8 copies float4s only
// where every edge falls on one (P and dS are exactly 0 in the rows it adds, past the Mask's range).
__device__ __forceinline__ int float4_end(int k_end, int n) { return min(n, (k_end + 3) / 4 * 4); }

extern "C" __global__ void __launch_bounds__(64, 8) dv_kernel2(const float* __restrict__ weights,  // (H, L, S)
                                                               const float* __restrict__ d_out,    // (H, L, d_v)
                                                               float* __restrict__ dv,             // (H / group, S, d_v)
                                                               int L, int S, int d_v, int group, int causal, int window,
                                                               int offset, int right, int sinks, int alibi) {
    const long kv_head = blockIdx.z;
    const int row0 = blockIdx.y * 64;  // key rows row0 .. row0 + 63 of dV
    const Mask mask = Mask::from_args(causal, window, offset, right, sinks, alibi);
    const QueryRows qr = mask.query_rows(row0, 64, L);
    gemm_tile_8x8<64, 64, false, true>(weights + kv_head * group * L * S, S, d_out + kv_head * group * L * d_v, d_v,
                                       dv + kv_head * S * d_v, d_v, S, d_v,
                                       float4_end((group - 1) * L + qr.i_end, group * L), row0, blockIdx.x * 64,
                                       qr.i_begin);
}

extern "C" __global__ void __launch_bounds__(64, 8) dq_kernel2(const float* __restrict__ ds,  // (H, L, S)
                                                               const float* __restrict__ k,   // (H / group, S, d_k)
                                                               float* __restrict__ dq,        // (H, L, d_k)
                                                               int L, int S, int d_k, int group, float scale,
                                                               int causal, int window, int offset, int right, int sinks,
                                                               int alibi) {
    // av_kernel2's stacking: grid (ceil(d_k/64), ceil(group·L/64), H / group); a block's rows run
    // over positions row0 % L .. (into the next head's first rows, which see fewer keys).
    const long kv_head = blockIdx.z;
    const int row0 = blockIdx.y * 64;
    // dS = 0 past the keys the block's rows see; from key 0 as av_kernel2 (k_begin = kt.j_begin: 3
    // more instructions a k-slice on sm_90)
    const Mask mask = Mask::from_args(causal, window, offset, right, sinks, alibi);
    const KeyTiles kt = mask.key_tiles<GEMM_BK>(row0 % L, 64, L, S);
    gemm_tile_8x8<64, 64, false>(ds + kv_head * group * L * S, S, k + kv_head * S * d_k, d_k,
                                 dq + kv_head * group * L * d_k, d_k, group * L, d_k, kt.j_end, row0, blockIdx.x * 64,
                                 0, scale);
}

extern "C" __global__ void __launch_bounds__(64, 8) dk_kernel2(const float* __restrict__ ds,  // (H, L, S)
                                                               const float* __restrict__ q,   // (H, L, d_k)
                                                               float* __restrict__ dk,        // (H / group, S, d_k)
                                                               int L, int S, int d_k, int group, float scale,
                                                               int causal, int window, int offset, int right, int sinks,
                                                               int alibi) {
    const long kv_head = blockIdx.z;
    const int row0 = blockIdx.y * 64;
    const Mask mask = Mask::from_args(causal, window, offset, right, sinks, alibi);
    const QueryRows qr = mask.query_rows(row0, 64, L);
    gemm_tile_8x8<64, 64, false, true>(ds + kv_head * group * L * S, S, q + kv_head * group * L * d_k, d_k,
                                       dk + kv_head * S * d_k, d_k, S, d_k,
                                       float4_end((group - 1) * L + qr.i_end, group * L), row0, blockIdx.x * 64,
                                       qr.i_begin, scale);
}

extern "C" __global__ void __launch_bounds__(256, 2) dp_kernel2(const float* __restrict__ d_out,  // (H, L, d_v)
                                                                const float* __restrict__ v,      // (H / group, S, d_v)
                                                                float* __restrict__ dp,           // (H, L, S)
                                                                int L, int S, int d_v, int group) {
    // the group's dO rows stacked, (group·L, d_v), against the one V: grid (ceil(S/128),
    // ceil(group·L/128), H / group)
    const long kv_head = blockIdx.z;
    gemm_tile_8x8<128, 128, true>(d_out + kv_head * group * L * d_v, d_v, v + kv_head * S * d_v, d_v,
                                  dp + kv_head * group * L * S, S, group * L, S, d_v, blockIdx.y * 128,
                                  blockIdx.x * 128);
}

// ------------------------------------------------------------------------------------------------
// Fused backward, in the manner of FlashAttention-2: no T×T matrix. P is recomputed tile by tile
// from Q, K and the forward's row logsumexp (P[i][j] = exp(s_ij − lse_i), exact softmax weights
// in one exp, no running max needed), and the rowsum term comes from the outputs:
//     rowsum_j(dP[i][j] · P[i][j]) = sum_j P[i][j] · (dO[i] · V[j]) = dO[i] · O[i] =: delta_i
// so it costs one dot product per row instead of a pass over the row. Three launches:
//   delta: delta_i = dO[i] · O[i]
//   dkdv:  a block owns 32 keys and walks the query rows that see them, accumulating dK and dV
//          (the keys' gradients never leave the block until the end: no atomics)
//   dq:    a block owns `rows` queries and walks their key tiles, like the forward
// Splitting dK/dV from dQ recomputes P twice but needs no atomicAdd into dQ, so the result is
// the same on every run (FlashAttention-2 adds dQ atomically instead).
// ------------------------------------------------------------------------------------------------

#define FUSED_BWD_ROWS 8  // query rows (warps) per block of the dkdv kernel: its register budget

extern "C" __global__ void attention_backward_delta_kernel1(const float* __restrict__ d_out,  // (H, L, d_v)
                                                            const float* __restrict__ out,    // (H, L, d_v)
                                                            float* __restrict__ delta,        // (H, L)
                                                            int L, int d_v) {
    const int i = blockIdx.x * blockDim.y + threadIdx.y;
    const int lane = threadIdx.x;
    if (i >= L) return;  // the whole warp leaves together
    const long row = (long)blockIdx.z * L * d_v + (long)i * d_v;
    float dot = 0.0f;
    for (int c = lane; c < d_v; c += 32) dot += d_out[row + c] * out[row + c];
    dot = warp_sum(dot);
    if (lane == 0) delta[(long)blockIdx.z * L + i] = dot;
}

extern "C" __global__ void attention_backward_dkdv_kernel1(const float* __restrict__ q,      // (H, L, d_k)
                                                           const float* __restrict__ k,      // (H / group, S, d_k)
                                                           const float* __restrict__ v,      // (H / group, S, d_v)
                                                           const float* __restrict__ d_out,  // (H, L, d_v)
                                                           const float* __restrict__ lse,    // (H, L)
                                                           const float* __restrict__ delta,  // (H, L)
                                                           float* __restrict__ dk,           // (H / group, S, d_k)
                                                           float* __restrict__ dv,           // (H / group, S, d_v)
                                                           int L, int S, int d_k, int d_v, int group, float scale,
                                                           int causal, int window, int offset, int right, int sinks,
                                                           int alibi) {
    // grid (ceil(S / 32), 1, H / group), block (32, FUSED_BWD_ROWS). A block owns 32 keys of one
    // K/V head and walks the query rows that see them in each of the group's query heads in
    // turn, so dK and dV are summed over the group in its registers, in one fixed order: no
    // atomics, no per-query-head partial in memory. Dynamic shared memory, in floats:
    //   k_s  (32, d_k | 1), v_s (32, d_v | 1)   this block's keys; odd strides: lane j reads row j
    //   q_s  (rows, d_k), o_s (rows, d_v)       the current query rows and their dO
    //   p_s  (rows, 32), g_s (rows, 32)         their P and dS against this block's keys
    // Thread tid owns elements tid, tid + 256, ... of the (32, d_k) dK tile and the (32, d_v) dV
    // tile, in registers: 32 · 128 / 256 = 16 of each at most.
    extern __shared__ float bwd_smem[];
    const int rows = FUSED_BWD_ROWS, lane = threadIdx.x, r = threadIdx.y;
    const int tid = r * 32 + lane, n_threads = rows * 32;
    const int ks = d_k | 1, vs = d_v | 1;
    float* k_s = bwd_smem;
    float* v_s = k_s + FUSED_KEYS * ks;
    float* q_s = v_s + FUSED_KEYS * vs;
    float* o_s = q_s + rows * d_k;
    float* p_s = o_s + rows * d_v;
    float* g_s = p_s + rows * FUSED_KEYS;

    const Mask mask = Mask::from_args(causal, window, offset, right, sinks, alibi);
    const BlockWork work = causal_block_order(mask.causal, false);  // causal: the first keys see the most rows
    const int j0 = work.tile * FUSED_KEYS;
    const long kv_head = work.head;
    k += kv_head * S * d_k;
    v += kv_head * S * d_v;
    dk += kv_head * S * d_k;
    dv += kv_head * S * d_v;

    for (int idx = tid; idx < FUSED_KEYS * d_k; idx += n_threads) {
        const int jj = idx / d_k, c = idx % d_k;
        k_s[jj * ks + c] = (j0 + jj < S) ? k[(long)(j0 + jj) * d_k + c] : 0.0f;
    }
    for (int idx = tid; idx < FUSED_KEYS * d_v; idx += n_threads) {
        const int jj = idx / d_v, c = idx % d_v;
        v_s[jj * vs + c] = (j0 + jj < S) ? v[(long)(j0 + jj) * d_v + c] : 0.0f;
    }

    // The query rows (the same in every head) that see any of keys j0 .. j0+31 (causal: none
    // before the row at j0's position; a window of W: none from j0 + 31 + W on, in positions)
    const QueryRows qr = mask.query_rows(j0, FUSED_KEYS, L);

    const int per_thread = FUSED_KEYS * FUSED_MAX_D / (32 * FUSED_BWD_ROWS);  // 16
    float dk_acc[per_thread], dv_acc[per_thread];
#pragma unroll
    for (int n = 0; n < per_thread; ++n) dk_acc[n] = dv_acc[n] = 0.0f;

    for (int h = 0; h < group; ++h) {
    const long head = kv_head * group + h;  // the group's query heads, in order
    const float* qh = q + head * L * d_k;
    const float* oh = d_out + head * L * d_v;
    const float* lse_h = lse + head * L;
    const float* delta_h = delta + head * L;
    const float slope_h = mask.slope(head);  // ALiBi's, of this query head (0 without)
    for (int i0 = qr.i_begin; i0 < qr.i_end; i0 += rows) {
        __syncthreads();  // the previous rows are fully read (and, first time, k_s, v_s written)
        for (int idx = tid; idx < rows * d_k; idx += n_threads) {
            const int rr = idx / d_k, c = idx % d_k;
            q_s[idx] = (i0 + rr < L) ? qh[(long)(i0 + rr) * d_k + c] : 0.0f;
        }
        for (int idx = tid; idx < rows * d_v; idx += n_threads) {
            const int rr = idx / d_v, c = idx % d_v;
            o_s[idx] = (i0 + rr < L) ? oh[(long)(i0 + rr) * d_v + c] : 0.0f;
        }
        __syncthreads();

        // Warp r takes query row i, lane takes key j: one entry of P and dS each.
        const int i = i0 + r, j = j0 + lane;
        float p = 0.0f, g = 0.0f;  // hidden keys keep exactly 0: no gradient through a -inf
        if (mask.visible(i, j, i < L && j < S)) {
            const float* qi = q_s + r * d_k;
            const float* kj = k_s + lane * ks;
            float s = 0.0f;
            for (int c = 0; c < d_k; ++c) s += qi[c] * kj[c];
            // the forward's score, ALiBi's bias included (the lse is of the biased scores)
            s = s * scale + (mask.alibi > 0 ? Mask::bias_at(slope_h, i + mask.offset - j) : 0.0f);
            p = expf(s - lse_h[i]);
            const float* oi = o_s + r * d_v;
            const float* vj = v_s + lane * vs;
            float dp = 0.0f;
            for (int c = 0; c < d_v; ++c) dp += oi[c] * vj[c];
            g = p * (dp - delta_h[i]);
        }
        p_s[r * FUSED_KEYS + lane] = p;
        g_s[r * FUSED_KEYS + lane] = g;
        __syncthreads();

        // dV[j] += sum_r P[r][j] · dO[r];  dK[j] += sum_r dS[r][j] · Q[r]  (scale applied at the end)
#pragma unroll
        for (int n = 0; n < per_thread; ++n) {
            const int e = tid + n * n_threads;
            if (e < FUSED_KEYS * d_v) {
                const int jj = e / d_v, c = e % d_v;
                float sum = 0.0f;
                for (int rr = 0; rr < rows; ++rr) sum += p_s[rr * FUSED_KEYS + jj] * o_s[rr * d_v + c];
                dv_acc[n] += sum;
            }
            if (e < FUSED_KEYS * d_k) {
                const int jj = e / d_k, c = e % d_k;
                float sum = 0.0f;
                for (int rr = 0; rr < rows; ++rr) sum += g_s[rr * FUSED_KEYS + jj] * q_s[rr * d_k + c];
                dk_acc[n] += sum;
            }
        }
    }
    }  // the group's heads

#pragma unroll
    for (int n = 0; n < per_thread; ++n) {
        const int e = tid + n * n_threads;
        if (e < FUSED_KEYS * d_v && j0 + e / d_v < S) dv[(long)j0 * d_v + e] = dv_acc[n];
        if (e < FUSED_KEYS * d_k && j0 + e / d_k < S) dk[(long)j0 * d_k + e] = dk_acc[n] * scale;
    }
}

extern "C" __global__ void attention_backward_dq_kernel1(const float* __restrict__ q,      // (H, L, d_k)
                                                         const float* __restrict__ k,      // (H / group, S, d_k)
                                                         const float* __restrict__ v,      // (H / group, S, d_v)
                                                         const float* __restrict__ d_out,  // (H, L, d_v)
                                                         const float* __restrict__ lse,    // (H, L)
                                                         const float* __restrict__ delta,  // (H, L)
                                                         float* __restrict__ dq,           // (H, L, d_k)
                                                         int L, int S, int d_k, int d_v, int group, float scale,
                                                         int causal, int window, int offset, int right, int sinks,
                                                         int alibi) {
    // The forward's layout: one warp per query row, `rows` rows per block sharing each tile of
    // 32 keys. grid (ceil(L / rows), 1, H), block (32, rows). Dynamic shared memory, in floats:
    //   q_s (rows, d_k), o_s (rows, d_v), k_s (32, d_k | 1), v_s (32, d_v | 1)
    // Lane c + 32 t accumulates column c + 32 t of dQ[i] in registers (d_k <= 128).
    extern __shared__ float bwd_smem[];
    const int rows = blockDim.y, lane = threadIdx.x, r = threadIdx.y;
    const int tid = r * 32 + lane, n_threads = rows * 32;
    const int ks = d_k | 1, vs = d_v | 1;
    float* q_s = bwd_smem;
    float* o_s = q_s + rows * d_k;
    float* k_s = o_s + rows * d_v;
    float* v_s = k_s + FUSED_KEYS * ks;

    const Mask mask = Mask::from_args(causal, window, offset, right, sinks, alibi);
    const BlockWork work = causal_block_order(mask.causal, true);  // longest rows first
    const int row0 = work.tile * rows;
    const int i = row0 + r;
    const long head = work.head;
    q += head * L * d_k;
    k += head / group * S * d_k;  // query head h reads K/V head h / group
    v += head / group * S * d_v;
    d_out += head * L * d_v;
    dq += head * L * d_k;

    for (int idx = tid; idx < rows * d_k; idx += n_threads) {
        const int rr = idx / d_k;
        q_s[idx] = (row0 + rr < L) ? q[(long)row0 * d_k + idx] : 0.0f;
    }
    for (int idx = tid; idx < rows * d_v; idx += n_threads) {
        const int rr = idx / d_v;
        o_s[idx] = (row0 + rr < L) ? d_out[(long)row0 * d_v + idx] : 0.0f;
    }
    const float lse_i = i < L ? lse[head * L + i] : 0.0f;
    const float delta_i = i < L ? delta[head * L + i] : 0.0f;

    const KeyTiles kt = mask.key_tiles<FUSED_KEYS>(row0, rows, L, S);

    float acc[FUSED_MAX_D / 32];
#pragma unroll
    for (int t = 0; t < FUSED_MAX_D / 32; ++t) acc[t] = 0.0f;

    for (int j0 = kt.j_begin; j0 < kt.j_end; j0 += FUSED_KEYS) {
        __syncthreads();
        for (int idx = tid; idx < FUSED_KEYS * d_k; idx += n_threads) {
            const int jj = idx / d_k, c = idx % d_k;
            k_s[jj * ks + c] = (j0 + jj < S) ? k[(long)(j0 + jj) * d_k + c] : 0.0f;
        }
        for (int idx = tid; idx < FUSED_KEYS * d_v; idx += n_threads) {
            const int jj = idx / d_v, c = idx % d_v;
            v_s[jj * vs + c] = (j0 + jj < S) ? v[(long)(j0 + jj) * d_v + c] : 0.0f;
        }
        __syncthreads();

        const bool any = mask.sees_any(i, i, j0, j0 + FUSED_KEYS - 1, i < L);
        if (!any) continue;  // the same for the whole warp: the shuffles below stay converged

        const int j = j0 + lane;
        float g = 0.0f;
        if (mask.visible(i, j, i < L && j < S)) {
            const float* qi = q_s + r * d_k;
            const float* kj = k_s + lane * ks;
            float s = 0.0f;
            for (int c = 0; c < d_k; ++c) s += qi[c] * kj[c];
            // the forward's score, ALiBi's bias included; the slope worked out here, as in
            // attention_fused_kernel1, rather than held across the loop (the register budget)
            s = s * scale + (mask.alibi > 0 ? Mask::bias_at(mask.slope(head), i + mask.offset - j) : 0.0f);
            const float p = expf(s - lse_i);
            const float* oi = o_s + r * d_v;
            const float* vj = v_s + lane * vs;
            float dp = 0.0f;
            for (int c = 0; c < d_v; ++c) dp += oi[c] * vj[c];
            g = p * (dp - delta_i);
        }
        // dQ[i] += sum_j dS[i][j] · K[j]; dS of key jj is broadcast from lane jj
        const int n_keys = min(FUSED_KEYS, S - j0);
        for (int jj = 0; jj < n_keys; ++jj) {
            const float gj = __shfl_sync(0xffffffff, g, jj);
            const float* kj = k_s + jj * ks;
#pragma unroll
            for (int t = 0; t < FUSED_MAX_D / 32; ++t) {
                const int c = lane + 32 * t;
                if (c < d_k) acc[t] += gj * kj[c];
            }
        }
    }

    if (i >= L) return;
#pragma unroll
    for (int t = 0; t < FUSED_MAX_D / 32; ++t) {
        const int c = lane + 32 * t;
        if (c < d_k) dq[(long)i * d_k + c] = acc[t] * scale;
    }
}

// ================================================================================================
// BACKWARD ON TENSOR CORES
//
// The fused backward on tensor cores: FlashAttention-2's backward with bf16 operands and fp32
// accumulators (sm_80+), from the bf16 copies the forward read (Q pre-scaled by scale·log2 e, so
// scores are in log2 units as in kernel4), bf16 dO, and kernel4's row logsumexp.
//
// Per tile the products are the fused FP32 backward's, each one mma chain:
//     S  = Q·K^T (log2 units)      P  = exp2(S − lse·log2 e)     (exact softmax weights, no max)
//     dP = dO·V^T                  dS = P ∘ (dP − delta)          (delta = rowsum(dO ∘ O))
//     dV += P^T·dO                 dK += dS^T·Q                   dQ += dS·K
// P and dS are rounded to bf16 as the A operands of the products after them; everything else
// stays fp32. Two kernels, as in the FP32 fused backward: dkdv owns 64 keys and walks the query
// tiles that see them; dq owns 64 queries and walks their key tiles. Splitting dQ off computes
// S and dP a second time, 7 products per tile instead of FlashAttention-2's 5 (1.4x the mma
// work), where FA2 adds each key block's share of dQ into global memory with fp32 atomicAdd:
// atomics add in whatever order the blocks happen to finish, so dQ would differ from run to run
// in its last bits. The split keeps the backward bit-reproducible, as the FP32 fused backward is,
// which verify's comparisons and the finite-difference checks rely on.
//
// The trick that keeps P and dS in registers in the dK/dV kernel: it computes the transposes,
// S^T = K·Q^T and dP^T = V·dO^T (keys as the m16 rows). Their accumulator tiles, two n8 tiles
// at a time, are exactly the A fragments of P^T·dO and dS^T·Q, as S's are of P·V in kernel4.
// Warp w owns keys 16w .. 16w+15 of the block, so dK and dV rows never cross warps: no shared
// memory reduction, no atomics.

// ------------------------------------------------------------------------------------------------
// attention_fused_lse_kernel4_d64, _d128: kernel4 also writing each row's logsumexp (natural
// log, as attention_fused_lse_kernel1 writes it), the forward this backward needs. kernel4's body
// with lse not nullptr; grid, block and shared memory as kernel4's.

extern "C" __global__ void __launch_bounds__(32 * TC_WARPS)
attention_fused_lse_kernel4_d64(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
                                const unsigned short* __restrict__ v, float* __restrict__ out,
                                float* __restrict__ lse, int L, int S, int group, int causal, int window,
                                int offset, int right, int sinks, int alibi) {
    extern __shared__ __align__(16) unsigned short tc_smem[];
    if (Mask::flavoured(right, sinks, alibi))
        attention_fused_kernel4<64, true>(q, k, v, out, L, S, group, causal, window, offset, right, sinks, alibi,
                                        tc_smem, lse);
    else
        attention_fused_kernel4<64, false>(q, k, v, out, L, S, group, causal, window, offset, 0, 0, 0, tc_smem, lse);
}

extern "C" __global__ void __launch_bounds__(32 * TC_WARPS)
attention_fused_lse_kernel4_d128(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
                                 const unsigned short* __restrict__ v, float* __restrict__ out,
                                 float* __restrict__ lse, int L, int S, int group, int causal, int window,
                                 int offset, int right, int sinks, int alibi) {
    extern __shared__ __align__(16) unsigned short tc_smem[];
    if (Mask::flavoured(right, sinks, alibi))
        attention_fused_kernel4<128, true>(q, k, v, out, L, S, group, causal, window, offset, right, sinks, alibi,
                                        tc_smem, lse);
    else
        attention_fused_kernel4<128, false>(q, k, v, out, L, S, group, causal, window, offset, 0, 0, 0, tc_smem, lse);
}

// ------------------------------------------------------------------------------------------------
// The building blocks of both backward kernels: the two products a warp makes, on 16 rows.

// acc (16 x N, fp32 n8 tiles) += A·B^T. A: 16 rows of a row-major bf16 tile (stride S) in shared
// memory; B: N rows of one, both KD wide. Per k16 step one ldmatrix.x4 gives A's fragment and one
// more gives two n8 tiles of B (kernel4's K loads): each A fragment feeds N/8 mma.
template <int KD, int N, int S>
__device__ __forceinline__ void tc_warp_abt(float acc[N / 8][4], const unsigned short* a, const unsigned short* b) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int kk = 0; kk < KD / 16; ++kk) {
        u32 af[4];
        ldmatrix<4, false>(af, a + ((lane / 8 % 2) * 8 + lane % 8) * S + 16 * kk + (lane / 16) * 8);
#pragma unroll
        for (int nt = 0; nt < N / 8; nt += 2) {
            u32 bf[4];
            ldmatrix<4, false>(bf, b + (8 * nt + (lane / 16) * 8 + lane % 8) * S + 16 * kk + (lane / 8 % 2) * 8);
            mma_bf16_m16n8k16(acc[nt], af, bf, acc[nt]);
            mma_bf16_m16n8k16(acc[nt + 1], af, bf + 2, acc[nt + 1]);
        }
    }
}

// acc (16 x N) += bf16(X)·B. X: 16 x KK fp32 in accumulator layout (the registers of a product
// just made), rounded to bf16 here as A fragments; B: KK rows of a row-major bf16 tile (stride S)
// by ldmatrix.trans (kernel4's V loads).
template <int KK, int N, int S>
__device__ __forceinline__ void tc_warp_xb(float acc[N / 8][4], const float x[KK / 8][4], const unsigned short* b) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int kk = 0; kk < KK / 16; ++kk) {
        const u32 xf[4] = {pack_bf16x2(x[2 * kk][0], x[2 * kk][1]), pack_bf16x2(x[2 * kk][2], x[2 * kk][3]),
                           pack_bf16x2(x[2 * kk + 1][0], x[2 * kk + 1][1]),
                           pack_bf16x2(x[2 * kk + 1][2], x[2 * kk + 1][3])};
#pragma unroll
        for (int c = 0; c < N / 8; c += 2) {
            u32 bf[4];
            ldmatrix<4, true>(bf, b + (16 * kk + (lane / 8 % 2) * 8 + lane % 8) * S + 8 * c + (lane / 16) * 8);
            mma_bf16_m16n8k16(acc[c], xf, bf, acc[c]);
            mma_bf16_m16n8k16(acc[c + 1], xf, bf + 2, acc[c + 1]);
        }
    }
}

// Query rows [i0, i0 + QT) of Q and dO by cp.async (the caller commits), and their lse (in log2
// units) and delta by plain loads; rows past T zero.
template <int D, int QT>
__device__ __forceinline__ void tc_bwd_load_queries(unsigned short* q_s, unsigned short* o_s, float* lse_s,
                                                    float* delta_s, const unsigned short* q,
                                                    const unsigned short* d_out, const float* lse,
                                                    const float* delta, int i0, int T) {
    tc_load_rows<D>(q_s, q, i0, QT, T);
    tc_load_rows<D>(o_s, d_out, i0, QT, T);
    for (int x = threadIdx.x; x < QT; x += 32 * TC_WARPS) {
        const bool inside = i0 + x < T;
        lse_s[x] = inside ? lse[i0 + x] * TC_LOG2E : 0.0f;
        delta_s[x] = inside ? delta[i0 + x] : 0.0f;
    }
}

// QT query rows per tile: 64 at D = 64; 32 at D = 128, where P^T and dS^T of 64 queries
// (32 + 32 registers) beside dK and dV (64 + 64) would spill.
#define TC_BWD_QUERIES_D64 64
#define TC_BWD_QUERIES_D128 32
// Shared memory (dynamic): k_s, v_s (64, D+8) bf16 for the block's keys; q_s, o_s (2, QT, D+8)
// bf16, double-buffered query tiles of Q and dO; lse_s, delta_s (2, QT) float.
template <int D, int QT>
__device__ __forceinline__ void attention_backward_dkdv_kernel2(
    const unsigned short* __restrict__ q,      // (H, L, D) bf16, Q·scale·log2 e
    const unsigned short* __restrict__ k,      // (H / group, S, D) bf16
    const unsigned short* __restrict__ v,      // (H / group, S, D) bf16
    const unsigned short* __restrict__ d_out,  // (H, L, D) bf16
    const float* __restrict__ lse,             // (H, L) natural log
    const float* __restrict__ delta,           // (H, L)
    float* __restrict__ dk, float* __restrict__ dv,  // (H / group, S, D)
    int L, int S, int group, int causal, int window, int offset, int right, int sinks, int alibi,
    unsigned short* smem) {
    constexpr int SP = D + TC_PAD;
    unsigned short* k_s = smem;                // (TC_KEYS, SP)
    unsigned short* v_s = k_s + TC_KEYS * SP;   // (TC_KEYS, SP)
    unsigned short* q_s = v_s + TC_KEYS * SP;   // (2, QT, SP)
    unsigned short* o_s = q_s + 2 * QT * SP;    // (2, QT, SP)
    float* lse_s = (float*)(o_s + 2 * QT * SP);  // (2, QT)
    float* delta_s = lse_s + 2 * QT;            // (2, QT)
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;

    const Mask mask = Mask::from_args(causal, window, offset, right, sinks, alibi);
    const int j0 = blockIdx.x * TC_KEYS;  // causal: the first key blocks have the most query tiles
    const long kv_head = blockIdx.z;  // its query heads kv_head·group .. + group - 1: their dK, dV summed here
    k += kv_head * S * D;
    v += kv_head * S * D;
    dk += kv_head * S * D;
    dv += kv_head * S * D;
    q += kv_head * group * L * D;  // the group's first query head; head h of the group h·L rows on
    d_out += kv_head * group * L * D;
    lse += kv_head * group * L;
    delta += kv_head * group * L;

    // Query rows (in every head of the group) that see any of the block's keys; the tiles
    // outside are never loaded. The walk runs over the group's heads one after the other, tile
    // n of it being tile n % per_head of head n / per_head: one pipeline for the whole group, and
    // dK, dV summed in registers in one fixed order (no atomics, no per-query-head partial).
    const QueryRows qr = mask.query_rows(j0, TC_KEYS, L);
    const int i_begin = qr.i_begin, per_head = max(0, (qr.i_end - i_begin + QT - 1) / QT);
    const int n_tiles = group * per_head;
    // tile n's head, as offsets into q/d_out (rows of D) and lse/delta
    auto head_rows = [&](int n) { return (long)(n / per_head) * L; };
    auto tile_i0 = [&](int n) { return i_begin + n % per_head * QT; };

    tc_load_rows<D>(k_s, k, j0, TC_KEYS, S);
    tc_load_rows<D>(v_s, v, j0, TC_KEYS, S);
    tc_bwd_load_queries<D, QT>(q_s, o_s, lse_s, delta_s, q, d_out, lse, delta, i_begin, L);
    cp_async_commit();

    const int w_key0 = j0 + 16 * warp;           // this warp's first key
    const int w_last = min(w_key0 + 15, S - 1);  // and its last inside S (< w_key0: none)
    const int keys[2] = {w_key0 + g, w_key0 + g + 8};  // the keys (rows) of this lane's accumulators

    float dk_acc[D / 8][4], dv_acc[D / 8][4];  // n8 tile c: columns 8c .. 8c+7
#pragma unroll
    for (int c = 0; c < D / 8; ++c)
#pragma unroll
        for (int e = 0; e < 4; ++e) dk_acc[c][e] = dv_acc[c][e] = 0.0f;

    for (int n = 0; n < n_tiles; ++n) {
        const int i0 = tile_i0(n), stage = n & 1;
        if (n + 1 < n_tiles) {  // start the next tile's copy (maybe the next head's first), then wait for this one's
            const int next = (stage ^ 1) * QT;
            const long h_next = head_rows(n + 1);
            tc_bwd_load_queries<D, QT>(q_s + next * SP, o_s + next * SP, lse_s + next, delta_s + next, q + h_next * D,
                                       d_out + h_next * D, lse + h_next, delta + h_next, tile_i0(n + 1), L);
            cp_async_commit();
            cp_async_wait<1>();  // this tile has landed; the next one may still be in flight
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();  // every thread's copies of this tile (and, first, of K and V) are visible
        const unsigned short* qs = q_s + stage * QT * SP;
        const unsigned short* os = o_s + stage * QT * SP;
        const float* ls = lse_s + stage * QT;
        const float* dl = delta_s + stage * QT;
        // ALiBi's slope of the tile's query head, in the scores' log2 units (0 without ALiBi)
        const float slope2 = mask.slope(kv_head * group + n / per_head) * TC_LOG2E;

        // Whole-warp decisions: does a query of the tile see a key of this warp, and does the
        // mask (or T) cut through the tile, so that pairs must be tested one by one?
        const int i_last = min(i0 + QT, L) - 1;
        const bool any = mask.sees_any(i0, i_last, w_key0, w_last, w_key0 <= w_last);
        const bool edge = mask.hides_some(i0, i0 + QT - 1, w_key0, w_key0 + 15, i0 + QT > L || w_key0 + 16 > S);
        if (any) {
            float p[QT / 8][4], ds[QT / 8][4];  // P^T, then dP^T -> dS^T: keys x queries
#pragma unroll
            for (int nt = 0; nt < QT / 8; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) p[nt][e] = ds[nt][e] = 0.0f;
            tc_warp_abt<D, QT, SP>(p, k_s + 16 * warp * SP, qs);   // SP^T = K·Q^T, log2 units
            tc_warp_abt<D, QT, SP>(ds, v_s + 16 * warp * SP, os);  // dP^T = V·dO^T
#pragma unroll
            for (int nt = 0; nt < QT / 8; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int x = 8 * nt + 2 * t + e % 2;  // the query, within the tile
                    // the forward's score, ALiBi's bias included (the lse is of the biased scores)
                    const float bias = mask.alibi > 0 ? Mask::bias_at(slope2, i0 + x + mask.offset - keys[e / 2]) : 0.0f;
                    float pe = exp2f(p[nt][e] + bias - ls[x]);
                    if (edge) {
                        const int i = i0 + x, j = keys[e / 2];
                        const bool visible = mask.visible(i, j, i < L && j < S);
                        if (!visible) pe = 0.0f;  // no gradient through a hidden key
                    }
                    p[nt][e] = pe;
                    ds[nt][e] = pe * (ds[nt][e] - dl[x]);
                }
            tc_warp_xb<QT, D, SP>(dv_acc, p, os);   // dV += bf16(P^T)·dO
            tc_warp_xb<QT, D, SP>(dk_acc, ds, qs);  // dK += bf16(dS^T)·Q (Q scaled by scale·log2 e)
        }
        __syncthreads();  // every warp is done with this stage before it is refilled
    }
    cp_async_wait<0>();  // a block whose keys no row sees (n_tiles = 0) leaves no copy in flight

    // dK = scale · dS^T·Q, and the Q here carries scale·log2 e: one factor ln 2 takes log2 e off.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        if (keys[r] >= S) continue;
        const long at = (long)keys[r] * D + 2 * t;
#pragma unroll
        for (int c = 0; c < D / 8; ++c) {
            *(float2*)(dv + at + 8 * c) = make_float2(dv_acc[c][2 * r], dv_acc[c][2 * r + 1]);
            *(float2*)(dk + at + 8 * c) = make_float2(dk_acc[c][2 * r] * TC_LN2, dk_acc[c][2 * r + 1] * TC_LN2);
        }
    }
}

// Shared memory (dynamic, bf16): q_s, o_s (64, D+8) for the block's queries and their dO;
// k_s, v_s (2, 64, D+8), double-buffered key tiles.
template <int D>
__device__ __forceinline__ void attention_backward_dq_kernel2(
    const unsigned short* __restrict__ q,      // (H, L, D) bf16, Q·scale·log2 e
    const unsigned short* __restrict__ k,      // (H / group, S, D) bf16
    const unsigned short* __restrict__ v,      // (H / group, S, D) bf16
    const unsigned short* __restrict__ d_out,  // (H, L, D) bf16
    const float* __restrict__ lse,             // (H, L) natural log
    const float* __restrict__ delta,           // (H, L)
    float* __restrict__ dq,                    // (H, L, D)
    int L, int S, int group, float scale, int causal, int window, int offset, int right, int sinks, int alibi,
    unsigned short* smem) {
    constexpr int SP = D + TC_PAD;
    unsigned short* q_s = smem;                   // (TC_ROWS, SP)
    unsigned short* o_s = q_s + TC_ROWS * SP;      // (TC_ROWS, SP)
    unsigned short* k_s = o_s + TC_ROWS * SP;      // (2, TC_KEYS, SP)
    unsigned short* v_s = k_s + 2 * TC_KEYS * SP;  // (2, TC_KEYS, SP)
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;

    const Mask mask = Mask::from_args(causal, window, offset, right, sinks, alibi);
    const int tile = mask.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;  // longest rows first
    const int row0 = tile * TC_ROWS;
    const long head = blockIdx.z;
    q += head * L * D;
    k += head / group * S * D;  // query head h reads K/V head h / group
    v += head / group * S * D;
    d_out += head * L * D;
    lse += head * L;
    delta += head * L;
    dq += head * L * D;

    // Key tiles any row of the block can see (kernel4's); the others are never loaded.
    const KeyTiles kt = mask.key_tiles<TC_KEYS>(row0, TC_ROWS, L, S);
    const int j_begin = kt.j_begin, n_tiles = kt.n_tiles;

    tc_load_rows<D>(q_s, q, row0, TC_ROWS, L);
    tc_load_rows<D>(o_s, d_out, row0, TC_ROWS, L);
    tc_load_rows<D>(k_s, k, j_begin, TC_KEYS, S);
    tc_load_rows<D>(v_s, v, j_begin, TC_KEYS, S);
    cp_async_commit();

    const int w_row0 = row0 + 16 * warp;
    const int w_last = min(w_row0 + 15, L - 1);
    const int rows[2] = {w_row0 + g, w_row0 + g + 8};
    // ALiBi's slope in the scores' log2 units (0 without). Its bias -m·(p - j) is split as
    // m·j - m·p, the row's part folded into its lse once: an FMA per score, and no more live
    // registers than the lse's (adding -m·(p - j) whole cost dq_kernel2_d128 8 on sm_90, past its budget)
    const float slope2 = mask.slope(head) * TC_LOG2E;
    float lse2[2], dl[2];  // the rows' lse in log2 units (ALiBi's m·p added), and delta
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        lse2[r] = rows[r] < L ? lse[rows[r]] * TC_LOG2E : 0.0f;
        if (mask.alibi > 0) lse2[r] += slope2 * (float)(rows[r] + mask.offset);
        dl[r] = rows[r] < L ? delta[rows[r]] : 0.0f;
    }

    float acc[D / 8][4];  // dQ / scale
#pragma unroll
    for (int c = 0; c < D / 8; ++c) acc[c][0] = acc[c][1] = acc[c][2] = acc[c][3] = 0.0f;

    for (int n = 0; n < n_tiles; ++n) {
        const int j0 = j_begin + n * TC_KEYS, stage = n & 1;
        if (n + 1 < n_tiles) {
            tc_load_rows<D>(k_s + (stage ^ 1) * TC_KEYS * SP, k, j0 + TC_KEYS, TC_KEYS, S);
            tc_load_rows<D>(v_s + (stage ^ 1) * TC_KEYS * SP, v, j0 + TC_KEYS, TC_KEYS, S);
            cp_async_commit();
            cp_async_wait<1>();  // this tile has landed; the next one may still be in flight
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        const unsigned short* ks = k_s + stage * TC_KEYS * SP;
        const unsigned short* vs = v_s + stage * TC_KEYS * SP;

        const int j_last = min(j0 + TC_KEYS, S) - 1;
        const bool any = mask.sees_any(w_row0, w_last, j0, j_last, w_row0 <= w_last);
        const bool edge = mask.hides_some(w_row0, w_last, j0, j0 + TC_KEYS - 1, w_row0 + 16 > L || j0 + TC_KEYS > S);
        if (any) {
            float s[TC_KEYS / 8][4], ds[TC_KEYS / 8][4];  // SP, then dP -> dS: queries x keys
#pragma unroll
            for (int nt = 0; nt < TC_KEYS / 8; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) s[nt][e] = ds[nt][e] = 0.0f;
            tc_warp_abt<D, TC_KEYS, SP>(s, q_s + 16 * warp * SP, ks);   // SP = Q·K^T, log2 units
            tc_warp_abt<D, TC_KEYS, SP>(ds, o_s + 16 * warp * SP, vs);  // dP = dO·V^T
#pragma unroll
            for (int nt = 0; nt < TC_KEYS / 8; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int j = j0 + 8 * nt + 2 * t + e % 2;
                    // the forward's score, ALiBi's bias included (the lse is of the biased scores)
                    const float sb = mask.alibi > 0 ? fmaf(slope2, (float)j, s[nt][e]) : s[nt][e];
                    float pe = exp2f(sb - lse2[e / 2]);
                    if (edge) {
                        const int i = rows[e / 2];
                        const bool visible = mask.visible(i, j, i < L && j < S);
                        if (!visible) pe = 0.0f;
                    }
                    ds[nt][e] = pe * (ds[nt][e] - dl[e / 2]);
                }
            tc_warp_xb<TC_KEYS, D, SP>(acc, ds, ks);  // dQ += bf16(dS)·K
        }
        __syncthreads();
    }
    cp_async_wait<0>();  // a block whose rows see no key (n_tiles <= 0) leaves no copy in flight

#pragma unroll
    for (int r = 0; r < 2; ++r) {
        if (rows[r] >= L) continue;
        float* o = dq + (long)rows[r] * D + 2 * t;
#pragma unroll
        for (int c = 0; c < D / 8; ++c)
            *(float2*)(o + 8 * c) = make_float2(acc[c][2 * r] * scale, acc[c][2 * r + 1] * scale);
    }
}

// Entry points, one per head size. grid (ceil(T / 64), 1, H), block (128) for both;
// dkdv shared_mem = 2 * (128 + 4 * QT) * (d + 8) + 16 * QT bytes (56,320 at d = 64, QT = 64;
// 70,144 at d = 128, QT = 32); dq shared_mem = 2 * 6 * 64 * (d + 8) bytes (55,296; 104,448).
// All above the 48 KiB default: the launcher opts in.
extern "C" __global__ void __launch_bounds__(32 * TC_WARPS)
attention_backward_dkdv_kernel2_d64(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
                                    const unsigned short* __restrict__ v, const unsigned short* __restrict__ d_out,
                                    const float* __restrict__ lse, const float* __restrict__ delta,
                                    float* __restrict__ dk, float* __restrict__ dv, int L, int S, int group, int causal,
                                    int window, int offset, int right, int sinks, int alibi) {
    extern __shared__ __align__(16) unsigned short tc_smem[];
    attention_backward_dkdv_kernel2<64, TC_BWD_QUERIES_D64>(q, k, v, d_out, lse, delta, dk, dv, L, S, group, causal, window, offset,
                                                             right, sinks, alibi, tc_smem);
}

extern "C" __global__ void __launch_bounds__(32 * TC_WARPS)
attention_backward_dkdv_kernel2_d128(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
                                     const unsigned short* __restrict__ v, const unsigned short* __restrict__ d_out,
                                     const float* __restrict__ lse, const float* __restrict__ delta,
                                     float* __restrict__ dk, float* __restrict__ dv, int L, int S, int group, int causal,
                                    int window, int offset, int right, int sinks, int alibi) {
    extern __shared__ __align__(16) unsigned short tc_smem[];
    attention_backward_dkdv_kernel2<128, TC_BWD_QUERIES_D128>(q, k, v, d_out, lse, delta, dk, dv, L, S, group, causal, window, offset,
                                                             right, sinks, alibi, tc_smem);
}

extern "C" __global__ void __launch_bounds__(32 * TC_WARPS)
attention_backward_dq_kernel2_d64(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
                                  const unsigned short* __restrict__ v, const unsigned short* __restrict__ d_out,
                                  const float* __restrict__ lse, const float* __restrict__ delta,
                                  float* __restrict__ dq, int L, int S, int group, float scale, int causal,
                                  int window, int offset, int right, int sinks, int alibi) {
    extern __shared__ __align__(16) unsigned short tc_smem[];
    attention_backward_dq_kernel2<64>(q, k, v, d_out, lse, delta, dq, L, S, group, scale, causal, window, offset, right, sinks,
                                      alibi, tc_smem);
}

extern "C" __global__ void __launch_bounds__(32 * TC_WARPS)
attention_backward_dq_kernel2_d128(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
                                   const unsigned short* __restrict__ v, const unsigned short* __restrict__ d_out,
                                   const float* __restrict__ lse, const float* __restrict__ delta,
                                   float* __restrict__ dq, int L, int S, int group, float scale, int causal,
                                  int window, int offset, int right, int sinks, int alibi) {
    extern __shared__ __align__(16) unsigned short tc_smem[];
    attention_backward_dq_kernel2<128>(q, k, v, d_out, lse, delta, dq, L, S, group, scale, causal, window, offset, right, sinks,
                                      alibi, tc_smem);
}
