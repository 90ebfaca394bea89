// cpu_runtime/tensor_cores.h — the PTX instructions behind the kernel file's tensor-core wrappers
// (mma.sync, ldmatrix, cp.async, the cvt conversions), emulated; what it refuses is listed below.
// Part of cuda_cpu_runtime.h, which includes the parts in order: never included on its own.
#pragma once

// =============================================================================================
// Tensor cores: the PTX instructions behind the kernel file's tensor-core wrappers, emulated.
//
// The kernel file wraps each instruction in a device function whose body is inline PTX under
// __CUDA_ARCH__ and, in the CPU build, a call into namespace ptx_emulated below. The fragment
// layouts are the PTX ISA's ("Matrix Fragments for mma.m16n8k16 with floating point type",
// "... for mma.m16n8k8", "ldmatrix"): groupID g = lane >> 2, threadID_in_group t = lane % 4.
//
// Faithful where a wrong kernel would otherwise pass:
//  - mma.sync and ldmatrix are .aligned: all 32 lanes of the warp must reach the same instruction
//    (same kind, same call site); a partial warp, a returned lane or a divergent lane is reported
//    like any other warp misuse.
//  - ldmatrix reads shared memory only, at 16-byte aligned row addresses.
//  - cp.async: the destination reads as NaN bytes (0xff) until the issuing thread's
//    cp.async.wait_group retires the group; the source is read when the copy is issued.
//  - mma with tf32 operands ignores their low 13 bits, as the hardware does: raw fp32 that skipped
//    cvt.rna.tf32 is truncated, not rounded.
//  - wgmma.mma_async is asynchronous: the D registers it writes read as NaN (all bits set) until
//    the issuing thread's wgmma.wait_group retires its commit group; the values land then. A
//    wgmma that accumulates into registers an earlier wgmma of this thread still has in flight
//    (same registers, same shape) chains onto that result, as the hardware orders them; any other
//    read of D before the wait (or an accumulate from a copy of it) gets NaN, which verify sees.
//  - wgmma reads B through the descriptor at issue, and A too in the SS form (both operands from
//    shared memory, wgmma_m64nNk16_bf16_ss: A (64 x 16) K-major or, trans_a, MN-major, in the same
//    canonical no-swizzle layouts as B, each warp its 16 rows of D from A's rows 16 w .. 16 w + 15);
//    the bytes it read must not change until the wait that retires it: they are compared then,
//    and a change is reported (wait, then barrier, then overwrite). Racecheck counts them as reads
//    of shared memory by the issuing warp's async proxy (racecheck.h): a generic write reaches
//    them only through fence_proxy_async() together with a barrier.
//  - wgmma is issued by warpgroups: the block's threads a multiple of 128, the k-th wgmma of each
//    of a warpgroup's 4 warps the same instruction, every lane of a warp the same descriptor.
//  - a descriptor (start, LBO, SBO) addressing bytes past the launch's dynamic shared memory, or
//    built from an address or offsets that are not 16-byte multiples (the encoding drops the low
//    4 bits), is reported; so is one this emulation does not decode: a layout type (bits 62-63)
//    other than 0, the no-swizzle (interleave) layout, or a base offset (bits 49-51) other than 0.
//    Read as no-swizzle, a 128-byte-swizzled tile would give other bytes, silently.
// The products of bf16 or tf32 operands are exact in double; each output is summed in double and
// rounded once (a GPU's summation order inside one mma is unspecified: compare with tolerances).
//
// Speed: a .aligned instruction is one round per warp. Each lane leaves pointers to its operands
// and waits; the last lane to arrive computes the whole warp's result at once and writes every
// lane's registers (the waiting lanes' stacks stay put while they wait), so an emulated mma costs
// one pass over 16x8x16 products, not 32 shuffles per lane.

namespace andrea {
namespace {

inline bool is_shared(const void* p, size_t bytes);

struct AlignedRound {            // one warp at one .aligned instruction
    uint32_t deposited = 0;      // lanes that have left their operands
    const char* what = nullptr;  // the instruction, e.g. "mma.sync.aligned.m16n8k16..."
    const void* site = nullptr;  // where the kernel calls it
    uint64_t completed = 0;      // rounds computed so far: a waiting lane checks its own ran
    void* operand[32][4];
};

struct PendingCopy { void* dst; unsigned char data[16]; int bytes; };

struct CpAsyncQueue {            // one thread's cp.async copies not yet waited for
    std::vector<PendingCopy> open;                    // since the last commit_group
    std::vector<std::vector<PendingCopy>> committed;  // oldest first
};

// A wgmma's B as it read it: the 16 x N bf16 values, compared with shared memory again when the
// wgmma is retired (one record per warp and wgmma, shared by its 32 lanes).
struct WgmmaIssue {
    const char* what;
    const void* site;         // the kernel's call (racecheck names it)
    uint32_t start, lbo, sbo;
    int n;
    bool trans_b;
    bool checked = false;
    std::vector<uint16_t> b;  // (16, n)
    bool ss = false;          // A read through a descriptor too (the SS form)
    uint32_t a_start = 0, a_lbo = 0, a_sbo = 0;
    bool trans_a = false;
    std::vector<uint16_t> a;  // (16, 64): element (k, m) at a[64 k + m]
};

struct WgmmaInFlight {        // one thread's share of one wgmma, issued and not yet retired
    float* d;
    int count;                // N / 2 registers
    bool superseded;          // a later wgmma of this thread took over the same registers
    float value[64];          // what lands in d at the wait
    std::shared_ptr<WgmmaIssue> issue;
};

struct WgmmaQueue {           // one thread's wgmmas not yet waited for (like CpAsyncQueue)
    std::vector<WgmmaInFlight> open;
    std::vector<std::vector<WgmmaInFlight>> committed;
};

struct WarpgroupLog {         // the wgmma sites a warpgroup's warps have reached, in order
    std::vector<const void*> sites;  // site of wgmma number base, base + 1, ...
    uint64_t base = 0;
    uint64_t count[4] = {0, 0, 0, 0};  // wgmmas issued by each of its warps
};

struct TensorCoreState {
    std::vector<AlignedRound> rounds;  // per warp
    std::vector<CpAsyncQueue> copies;  // per thread of the block
    std::vector<WgmmaQueue> wgmmas;    // per thread of the block
    std::vector<WarpgroupLog> warpgroups;
    std::vector<double> wgmma_b;       // scratch (never thread_local: the library's TLS is shared memory)
    std::vector<uint16_t> wgmma_b_now;
    char* tls_lo = nullptr;            // this OS thread's shared memory (its TLS block)
    char* tls_hi = nullptr;
    const void* tls_key = nullptr;     // the TLS block they were found for (see below)
};

ANDREA_NO_TSAN inline TensorCoreState& tensor_cores() {
    TensorCoreState*& t = per_thread.tensor_cores;
    if (!t) {
        static TensorCoreState* main_state = new TensorCoreState();
        t = main_state;
    }
    return *t;
}

inline TensorCoreState* new_tensor_core_state() { return new TensorCoreState(); }

// Called by launch() at each block start: no copy or round of the previous block carries over.
inline void tensor_core_block_start(int nthreads) {
    TensorCoreState& tc = tensor_cores();
    tc.rounds.resize((nthreads + 31) / 32);
    for (AlignedRound& r : tc.rounds) r.deposited = 0;
    tc.copies.resize(nthreads);
    for (CpAsyncQueue& q : tc.copies) {  // emptied, their storage kept for the next block
        q.open.clear();
        q.committed.clear();
    }
    tc.wgmmas.resize(nthreads);
    for (WgmmaQueue& q : tc.wgmmas) {
        q.open.clear();
        q.committed.clear();
    }
    tc.warpgroups.assign((nthreads + 127) / 128, WarpgroupLog());
    // Found once per TLS block: a thread_local's address names this OS thread's block (a thread
    // started later in the same place has the same layout).
    if (tc.tls_key == (const void*)&tls_anchor) return;
    TlsQuery q{(const void*)&tensor_core_block_start, nullptr, 0};
    dl_iterate_phdr(find_tls, &q);
    tc.tls_lo = q.block;
    tc.tls_hi = q.block ? q.block + q.size : nullptr;
    tc.tls_key = (const void*)&tls_anchor;
}

// Shared memory in the CPU build: the library's thread-local storage of this OS thread (static
// __shared__ arrays), or an `extern __shared__` array.
inline bool is_shared(const void* p, size_t bytes) {
    const char* c = static_cast<const char*>(p);
    const TensorCoreState& tc = tensor_cores();
    if (tc.tls_lo && c >= tc.tls_lo && c + bytes <= tc.tls_hi) return true;
    const Guard& g = guard();  // the launch's dynamic shared bytes (see guard.h)
    return g.dyn_base && c >= g.dyn_base && c + bytes <= g.dyn_base + g.dyn_bytes;
}

// One lane reaches a .aligned instruction. Returns after the warp's round has run `body`, which
// sees every lane's operands; reports misuse (and never returns) if the warp is not converged.
__attribute__((noinline)) inline void aligned_round(const char* what, const void* site, void* o0, void* o1,
                                                    void* o2, void* o3, void (*body)(AlignedRound&)) {
    RaceQuiet quiet;  // the round reads and writes other lanes' registers: the runtime's business
    Sched& s = sched();
    Fiber* f = s.cur;
    const int wi = f->lid >> 5, lane = f->lid & 31;
    const uint32_t bit = 1u << lane;
    Warp& w = s.warps[wi];
    AlignedRound& r = tensor_cores().rounds[wi];
    if (w.arrived == 0) r.deposited = 0;  // the first lane of a new warp sync
    if (r.deposited && (r.site != site || r.what != what)) {
        warp_misuse(wi, 0xffffffffu, bit, "%s in warp %d: lane %d reaches it while lanes %s wait at %s "
                    "elsewhere: a .aligned instruction needs all 32 lanes of the warp at the same "
                    "instruction (on a GPU: undefined); keep the warp converged around it",
                    what, wi, lane, lanes_text(r.deposited).c_str(), r.what);
        warp_fail(f);
    }
    if (const uint32_t other = w.arrived & ~r.deposited) {
        warp_misuse(wi, 0xffffffffu, bit, "%s in warp %d: lane %d reaches it while lanes %s wait at %s: "
                    "a .aligned instruction needs all 32 lanes of the warp at the same instruction "
                    "(on a GPU: undefined); keep the warp converged around it",
                    what, wi, lane, lanes_text(other).c_str(), w.what[__builtin_ctz(other)]);
        warp_fail(f);
    }
    r.what = what;
    r.site = site;
    r.operand[lane][0] = o0; r.operand[lane][1] = o1; r.operand[lane][2] = o2; r.operand[lane][3] = o3;
    r.deposited |= bit;
    const uint64_t mine = r.completed;
    if (r.deposited == 0xffffffffu) {  // the last lane: compute for all, then release them
        body(r);
        r.completed++;
        r.deposited = 0;
    }
    warp_sync(0xffffffffu, what, false);  // refuses a partial warp or a returned lane; orders no memory
    if (r.completed == mine) {     // released by a lane at some other warp sync
        warp_misuse(wi, 0xffffffffu, bit, "%s in warp %d: lane %d waits there while lanes %s went on "
                    "from another warp collective: a .aligned instruction needs all 32 lanes of the warp at "
                    "the same instruction (on a GPU: undefined); keep the warp converged around it",
                    what, wi, lane, lanes_text(~r.deposited).c_str());
        warp_fail(f);
    }
}

inline float bf16_lo(uint32_t x) { uint32_t b = x << 16; float f; std::memcpy(&f, &b, 4); return f; }
inline float bf16_hi(uint32_t x) { uint32_t b = x & 0xffff0000u; float f; std::memcpy(&f, &b, 4); return f; }
inline float tf32_bits(uint32_t x) { uint32_t b = x & 0xffffe000u; float f; std::memcpy(&f, &b, 4); return f; }

// D(16x8) = A(16xK) B(Kx8) + C, from the warp's fragments; a(l, r, half) unpacks operand A.
template <int K> inline void mma_round(AlignedRound& r, float A[16][K], float B[K][8]) {
    double C[16][8];
    for (int l = 0; l < 32; l++) {
        const int g = l >> 2, t = l & 3;
        const float* c = static_cast<const float*>(r.operand[l][3]);
        C[g][2 * t] = c[0]; C[g][2 * t + 1] = c[1]; C[g + 8][2 * t] = c[2]; C[g + 8][2 * t + 1] = c[3];
    }
    for (int i = 0; i < 16; i++)
        for (int n = 0; n < 8; n++) {
            double acc = C[i][n];
            for (int k = 0; k < K; k++) acc += (double)A[i][k] * (double)B[k][n];
            C[i][n] = acc;
        }
    for (int l = 0; l < 32; l++) {  // every C was read above, so d may alias c
        const int g = l >> 2, t = l & 3;
        float* d = static_cast<float*>(r.operand[l][0]);
        d[0] = (float)C[g][2 * t]; d[1] = (float)C[g][2 * t + 1];
        d[2] = (float)C[g + 8][2 * t]; d[3] = (float)C[g + 8][2 * t + 1];
    }
}

// Lane l's share of a 16x16 bf16 A fragment (mma.m16n8k16's, and each warp's of wgmma .m64nNk16):
// a0: (g, 2t..2t+1)  a1: (g+8, 2t..)  a2: (g, 2t+8..)  a3: (g+8, 2t+8..); low half first
inline void unpack_a_bf16(float A[16][16], int l, const uint32_t* a) {
    const int g = l >> 2, t = l & 3;
    A[g][2 * t] = bf16_lo(a[0]);         A[g][2 * t + 1] = bf16_hi(a[0]);
    A[g + 8][2 * t] = bf16_lo(a[1]);     A[g + 8][2 * t + 1] = bf16_hi(a[1]);
    A[g][2 * t + 8] = bf16_lo(a[2]);     A[g][2 * t + 9] = bf16_hi(a[2]);
    A[g + 8][2 * t + 8] = bf16_lo(a[3]); A[g + 8][2 * t + 9] = bf16_hi(a[3]);
}

inline void mma_bf16_round(AlignedRound& r) {
    float A[16][16], B[16][8];
    for (int l = 0; l < 32; l++) {
        const int g = l >> 2, t = l & 3;
        const uint32_t* b = static_cast<const uint32_t*>(r.operand[l][2]);
        unpack_a_bf16(A, l, static_cast<const uint32_t*>(r.operand[l][1]));
        // b0: (k = 2t..2t+1, n = g)  b1: (k = 2t+8.., n = g)
        B[2 * t][g] = bf16_lo(b[0]);     B[2 * t + 1][g] = bf16_hi(b[0]);
        B[2 * t + 8][g] = bf16_lo(b[1]); B[2 * t + 9][g] = bf16_hi(b[1]);
    }
    mma_round<16>(r, A, B);
}

inline void mma_tf32_round(AlignedRound& r) {
    float A[16][8], B[8][8];
    for (int l = 0; l < 32; l++) {
        const int g = l >> 2, t = l & 3;
        const uint32_t* a = static_cast<const uint32_t*>(r.operand[l][1]);
        const uint32_t* b = static_cast<const uint32_t*>(r.operand[l][2]);
        // a0: (g, t)  a1: (g+8, t)  a2: (g, t+4)  a3: (g+8, t+4); b0: (k = t, n = g)  b1: (k = t+4, n = g)
        A[g][t] = tf32_bits(a[0]); A[g + 8][t] = tf32_bits(a[1]);
        A[g][t + 4] = tf32_bits(a[2]); A[g + 8][t + 4] = tf32_bits(a[3]);
        B[t][g] = tf32_bits(b[0]); B[t + 4][g] = tf32_bits(b[1]);
    }
    mma_round<8>(r, A, B);
}

// ldmatrix .xN: lanes 8i..8i+7 give the row addresses of 8x8 matrix i (16 bytes each). Lane L
// receives from matrix i row L/4, elements 2(L%4) and 2(L%4)+1; with .trans, column L/4, rows
// 2(L%4) and 2(L%4)+1. The low half holds the lower-indexed element.
template <int N, bool TRANS> inline void ldmatrix_round(AlignedRound& r) {
    const char* what = r.what;
    for (int l = 0; l < 8 * N; l++) {
        const void* p = r.operand[l][1];
        if ((uintptr_t)p % 16 != 0 || !is_shared(p, 16)) {
            const int wi = sched().cur->lid >> 5;
            warp_misuse(wi, 0xffffffffu, 1u << l, "%s in warp %d: lane %d gives row address %p, which is %s: "
                        "ldmatrix reads 16-byte rows of shared memory at 16-byte aligned addresses",
                        what, wi, l, p, (uintptr_t)p % 16 ? "not 16-byte aligned" : "not in shared memory");
            return;
        }
    }
    uint16_t m[4][8][8];
    for (int i = 0; i < N; i++)
        for (int row = 0; row < 8; row++) std::memcpy(m[i][row], r.operand[8 * i + row][1], 16);
    for (int l = 0; l < 32; l++) {
        uint32_t* out = static_cast<uint32_t*>(r.operand[l][0]);
        const int a = l / 4, b = 2 * (l % 4);
        for (int i = 0; i < N; i++)
            out[i] = TRANS ? (uint32_t)m[i][b][a] | (uint32_t)m[i][b + 1][a] << 16
                           : (uint32_t)m[i][a][b] | (uint32_t)m[i][a][b + 1] << 16;
    }
}


// wgmma.mma_async .m64nNk16 bf16, one warp's share: its 16 rows of D = A·B (+ D), A the warp's
// mma-layout fragments, B (16 x N) read from dynamic shared memory through the descriptor.
struct WgmmaOperands {
    unsigned long long desc; int n; bool trans_b; bool accumulate;
    bool ss; unsigned long long desc_a; bool trans_a;  // SS form: A through desc_a (else A in registers)
};

inline const char* wgmma_shared_base() { return guard().dyn_base; }

// A matrix descriptor's fields (the PTX ISA's "Matrix Descriptor Format", CuTe's GmmaDescriptor):
// start address, leading and stride byte offsets (each held >> 4 in 14 bits), base offset, layout
// type (0 interleave / no swizzle, 1 128-byte, 2 64-byte, 3 32-byte swizzle).
struct WgmmaDescriptor { uint32_t start, lbo, sbo; int base_offset, layout; };

inline WgmmaDescriptor wgmma_decode(unsigned long long desc) {
    return {(uint32_t)(desc & 0x3fff) << 4, (uint32_t)(desc >> 16 & 0x3fff) << 4,
            (uint32_t)(desc >> 32 & 0x3fff) << 4, (int)(desc >> 49 & 7), (int)(desc >> 62 & 3)};
}

inline const char* wgmma_layout_name(int layout) {
    static const char* names[4] = {"no swizzle", "128-byte swizzle", "64-byte swizzle", "32-byte swizzle"};
    return names[layout & 3];
}

// What the emulation decodes: the no-swizzle layout from a base offset of 0, nothing else.
inline bool wgmma_decodable(const WgmmaDescriptor& d) { return d.layout == 0 && d.base_offset == 0; }

// The byte offset (into dynamic shared memory) of B's 16-byte row `row` of 2N: K-major, row
// (n, k / 8) of the core matrices' 8 n x 8 k; MN-major, row (k, n / 8) of their 8 k x 8 n.
inline uint32_t wgmma_b_row(uint32_t start, uint32_t lbo, uint32_t sbo, bool trans_b, int n, int row) {
    if (!trans_b) {
        const int nn = row >> 1, kc = row & 1;
        return start + (nn / 8) * sbo + kc * lbo + (nn % 8) * 16;
    }
    const int k = row % 16, nc = row / 16;
    (void)n;
    return start + nc * sbo + (k / 8) * lbo + (k % 8) * 16;
}

// B (16 x N) as bf16 bits, element (k, n) at b[k * N + n]; false (and nothing read) if the
// descriptor reaches past the launch's dynamic shared memory (*bad: the first byte past it).
inline bool wgmma_read_b(uint32_t start, uint32_t lbo, uint32_t sbo, bool trans_b, int N, uint16_t* b,
                         uint32_t* bad) {
    const char* base = wgmma_shared_base();
    const size_t bytes = guard().dyn_bytes;
    for (int row = 0; row < 2 * N; row++) {
        const uint32_t off = wgmma_b_row(start, lbo, sbo, trans_b, N, row);
        if (!base || (size_t)off + 16 > bytes) {
            *bad = off;
            return false;
        }
    }
    for (int row = 0; row < 2 * N; row++) {
        uint16_t h[8];
        std::memcpy(h, base + wgmma_b_row(start, lbo, sbo, trans_b, N, row), 16);
        for (int e = 0; e < 8; e++) {
            if (!trans_b) b[(size_t)(8 * (row & 1) + e) * N + (row >> 1)] = h[e];   // (k, n) = (8 kc + e, nn)
            else b[(size_t)(row % 16) * N + 8 * (row / 16) + e] = h[e];             // (k, n) = (k, 8 nc + e)
        }
    }
    return true;
}

// The registers of this thread's in-flight wgmma that `d` (count floats) names, or nullptr.
inline WgmmaInFlight* wgmma_in_flight(WgmmaQueue& q, float* d, int count, bool* overlap) {
    WgmmaInFlight* found = nullptr;
    auto look = [&](std::vector<WgmmaInFlight>& group) {
        for (WgmmaInFlight& w : group) {
            if (w.superseded) continue;
            if (w.d == d && w.count == count) found = &w;  // the latest wins (issue order)
            else if (w.d < d + count && d < w.d + w.count) *overlap = true;
        }
    };
    for (auto& group : q.committed) look(group);
    look(q.open);
    return found;
}

inline void wgmma_round(AlignedRound& r) {
    const int wi = sched().cur->lid >> 5;
    const WgmmaOperands& op = *static_cast<const WgmmaOperands*>(r.operand[0][2]);
    const int N = op.n;
    for (int l = 1; l < 32; l++) {
        const WgmmaOperands& o = *static_cast<const WgmmaOperands*>(r.operand[l][2]);
        if (o.desc != op.desc) {
            warp_misuse(wi, 0xffffffffu, 1u << l, "%s in warp %d: lane %d gives B descriptor %#llx, lane 0 "
                        "%#llx: the warpgroup's tensor cores read one B; give every lane the same descriptor",
                        r.what, wi, l, o.desc, op.desc);
            return;
        }
        if (op.ss && o.desc_a != op.desc_a) {
            warp_misuse(wi, 0xffffffffu, 1u << l, "%s in warp %d: lane %d gives A descriptor %#llx, lane 0 "
                        "%#llx: the warpgroup's tensor cores read one A; give every lane the same descriptor",
                        r.what, wi, l, o.desc_a, op.desc_a);
            return;
        }
    }
    // the k-th wgmma of each of the warpgroup's 4 warps: one instruction
    TensorCoreState& tc = tensor_cores();
    WarpgroupLog& wg = tc.warpgroups[wi / 4];
    const uint64_t k = wg.count[wi % 4]++;
    if (k - wg.base < wg.sites.size()) {
        if (wg.sites[k - wg.base] != r.site) {
            warp_misuse(wi, 0xffffffffu, 0xffffffffu, "%s in warp %d: its wgmma number %llu is at another "
                        "instruction than the same wgmma of another warp of its warpgroup (warps %d-%d): all 4 "
                        "warps of a warpgroup issue the same wgmma (.aligned); keep them converged around it",
                        r.what, wi, (unsigned long long)k, wi / 4 * 4, wi / 4 * 4 + 3);
            return;
        }
    } else {
        wg.sites.push_back(r.site);
    }
    const uint64_t slowest = std::min(std::min(wg.count[0], wg.count[1]), std::min(wg.count[2], wg.count[3]));
    if (slowest - wg.base >= 64) {  // every warp is past them: forget
        wg.sites.erase(wg.sites.begin(), wg.sites.begin() + (long)(slowest - wg.base));
        wg.base = slowest;
    }

    const WgmmaDescriptor dd = wgmma_decode(op.desc);
    if (!wgmma_decodable(dd)) {
        warp_misuse(wi, 0xffffffffu, 1u, "%s in warp %d: the B descriptor %#llx has layout type %d (%s) and base "
                    "offset %d: the CPU build decodes only layout type 0 (no swizzle) with base offset 0; lay B "
                    "out without a swizzle", r.what, wi, op.desc, dd.layout, wgmma_layout_name(dd.layout),
                    dd.base_offset);
        return;
    }
    const uint32_t start = dd.start, lbo = dd.lbo, sbo = dd.sbo;
    auto issue = std::make_shared<WgmmaIssue>();
    issue->what = r.what;
    issue->site = r.site;
    issue->start = start; issue->lbo = lbo; issue->sbo = sbo; issue->n = N; issue->trans_b = op.trans_b;
    issue->b.resize(16 * (size_t)N);
    uint32_t bad = 0;
    if (!wgmma_read_b(start, lbo, sbo, op.trans_b, N, issue->b.data(), &bad)) {
        warp_misuse(wi, 0xffffffffu, 1u, "%s in warp %d: the B descriptor (start %u, LBO %u, SBO %u) reaches "
                    "bytes %u..%u of shared memory, past the launch's %zu dynamic bytes: build the descriptor "
                    "from the dynamic shared array, with the tile's strides", r.what, wi, start, lbo, sbo, bad,
                    bad + 15, (size_t)guard().dyn_bytes);
        return;
    }
    float A[16][16];
    if (op.ss) {  // A (64 x 16) read like a B of N 64 (m for n); this warp's 16 rows of it
        const WgmmaDescriptor da = wgmma_decode(op.desc_a);
        if (!wgmma_decodable(da)) {
            warp_misuse(wi, 0xffffffffu, 1u, "%s in warp %d: the A descriptor %#llx has layout type %d (%s) and "
                        "base offset %d: the CPU build decodes only layout type 0 (no swizzle) with base offset 0; "
                        "lay A out without a swizzle", r.what, wi, op.desc_a, da.layout,
                        wgmma_layout_name(da.layout), da.base_offset);
            return;
        }
        issue->ss = true;
        issue->a_start = da.start; issue->a_lbo = da.lbo; issue->a_sbo = da.sbo; issue->trans_a = op.trans_a;
        issue->a.resize(16 * 64);
        if (!wgmma_read_b(da.start, da.lbo, da.sbo, op.trans_a, 64, issue->a.data(), &bad)) {
            warp_misuse(wi, 0xffffffffu, 1u, "%s in warp %d: the A descriptor (start %u, LBO %u, SBO %u) reaches "
                        "bytes %u..%u of shared memory, past the launch's %zu dynamic bytes: build the descriptor "
                        "from the dynamic shared array, with the tile's strides", r.what, wi, da.start, da.lbo,
                        da.sbo, bad, bad + 15, (size_t)guard().dyn_bytes);
            return;
        }
        const int m0 = 16 * (wi % 4);
        for (int row = 0; row < 16; row++)
            for (int kk = 0; kk < 16; kk++) {
                const uint32_t bits = (uint32_t)issue->a[(size_t)kk * 64 + m0 + row] << 16;
                std::memcpy(&A[row][kk], &bits, 4);
            }
    }
    std::vector<double>& B = tc.wgmma_b;  // (16, N)
    B.resize(16 * (size_t)N);
    for (size_t i = 0; i < B.size(); i++) {
        const uint32_t bits = (uint32_t)issue->b[i] << 16;
        float f;
        std::memcpy(&f, &bits, 4);
        B[i] = f;
    }
    if (!op.ss)
        for (int l = 0; l < 32; l++) unpack_a_bf16(A, l, static_cast<const uint32_t*>(r.operand[l][1]));
    float nan;
    const uint32_t ones = 0xffffffffu;
    std::memcpy(&nan, &ones, 4);
    for (int l = 0; l < 32; l++) {
        const int gq = l >> 2, t = l & 3;
        float* d = static_cast<float*>(r.operand[l][0]);
        const bool acc = static_cast<const WgmmaOperands*>(r.operand[l][2])->accumulate;
        WgmmaQueue& q = tc.wgmmas[32 * wi + l];
        bool overlap = false;
        WgmmaInFlight* earlier = wgmma_in_flight(q, d, N / 2, &overlap);
        if (overlap) {
            warp_misuse(wi, 0xffffffffu, 1u << l, "%s in warp %d: lane %d's D registers overlap those of a wgmma "
                        "of another shape still in flight: wgmma_wait before reusing them", r.what, wi, l);
            return;
        }
        // an earlier wgmma in flight on the same registers: this one accumulates onto its result
        const float* in = earlier ? earlier->value : d;
        WgmmaInFlight w{d, N / 2, false, {}, issue};
        for (int c = 0; c < N / 8; c++)
            for (int e = 0; e < 4; e++) {
                const int row = gq + 8 * (e / 2), col = 8 * c + 2 * t + e % 2;
                double sum = acc ? (double)in[4 * c + e] : 0.0;
                for (int kk = 0; kk < 16; kk++) sum += (double)A[row][kk] * B[(size_t)kk * N + col];
                w.value[4 * c + e] = (float)sum;
            }
        if (earlier) earlier->superseded = true;
        q.open.push_back(w);
        for (int i = 0; i < N / 2; i++) d[i] = nan;  // in flight: reads as NaN until the wait
    }
}

// racecheck: the tensor cores read B (2N rows of 16 bytes; A's 128 in the SS form) from a wgmma's
// issue to the wait that retires it, as the issuing warpgroup's async proxies' reads: each lane
// records its share of the rows at both ends, so a write by another thread that no barrier parts
// from either end is a race (a write while the wgmma is in flight too: it falls between the two
// reads), and so is a generic write that no fence.proxy.async published before the barrier.
inline void wgmma_race_read(uint32_t start, uint32_t lbo, uint32_t sbo, bool trans, int n, const void* site) {
    const char* base = wgmma_shared_base();
    const size_t bytes = guard().dyn_bytes;
    const bool begun = race_proxy_begin(site);
    for (int row = lane_id(); row < 2 * n; row += 32) {
        const uint32_t off = wgmma_b_row(start, lbo, sbo, trans, n, row);
        if (base && (size_t)off + 16 <= bytes) race_read(base + off, 16);
    }
    race_proxy_end(begun);
}
inline void wgmma_race_read_desc(unsigned long long desc, bool trans, int n, const void* site) {
    const WgmmaDescriptor d = wgmma_decode(desc);
    wgmma_race_read(d.start, d.lbo, d.sbo, trans, n, site);
}

// At the wait that retires it: B's bytes are the ones the wgmma read at issue.
inline void wgmma_check_b(WgmmaIssue& issue) {
    if (issue.checked) return;
    issue.checked = true;
    std::vector<uint16_t>& now = tensor_cores().wgmma_b_now;
    now.resize(issue.b.size());
    uint32_t bad = 0;
    if (issue.ss) {  // A first: the same check on its tile
        std::vector<uint16_t> a(issue.a.size());
        const bool ok = wgmma_read_b(issue.a_start, issue.a_lbo, issue.a_sbo, issue.trans_a, 64, a.data(), &bad);
        if (!ok || std::memcmp(a.data(), issue.a.data(), a.size() * 2) != 0) {
            size_t i = 0;
            while (ok && i < a.size() && a[i] == issue.a[i]) i++;
            Fiber* f = sched().cur;
            warp_misuse(f->lid >> 5, 0, 1u << (f->lid & 31), "%s retired by wgmma.wait_group in thread %d: A's "
                        "shared memory changed while the wgmma was in flight (element m %zu, k %zu of the tile at "
                        "byte %u): the tensor cores read it from issue to wait; a barrier must part A's writes "
                        "from the wgmma (fill, fence_proxy_async, __syncthreads, wgmma; wgmma_wait, "
                        "__syncthreads, overwrite)", issue.what, f->lid, i % 64, i / 64, issue.a_start);
            return;
        }
    }
    const bool readable = wgmma_read_b(issue.start, issue.lbo, issue.sbo, issue.trans_b, issue.n, now.data(), &bad);
    if (readable && std::memcmp(now.data(), issue.b.data(), now.size() * 2) == 0) return;
    size_t i = 0;
    while (readable && i < now.size() && now[i] == issue.b[i]) i++;
    Fiber* f = sched().cur;
    warp_misuse(f->lid >> 5, 0, 1u << (f->lid & 31), "%s retired by wgmma.wait_group in thread %d: B's shared "
                "memory changed while the wgmma was in flight (element k %zu, n %zu of the tile at byte %u): "
                "the tensor cores read it from issue to wait; a barrier must part B's writes from the wgmma "
                "(fill, fence_proxy_async, __syncthreads, wgmma; wgmma_wait, __syncthreads, overwrite)",
                issue.what, f->lid, i / issue.n, i % issue.n, issue.start);
}

}  // namespace
}  // namespace andrea

namespace ptx_emulated {

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 d, a, b, c
__attribute__((noinline)) inline void mma_m16n8k16_bf16(float* d, const unsigned* a, const unsigned* b,
                                                        const float* c) {
    andrea::aligned_round("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", __builtin_return_address(0),
                          d, const_cast<unsigned*>(a), const_cast<unsigned*>(b), const_cast<float*>(c),
                          andrea::mma_bf16_round);
    andrea::Sched& s = andrea::sched();
    if (s.misused) andrea::warp_fail(s.cur);
}

// mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 d, a, b, c
__attribute__((noinline)) inline void mma_m16n8k8_tf32(float* d, const unsigned* a, const unsigned* b,
                                                       const float* c) {
    andrea::aligned_round("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", __builtin_return_address(0),
                          d, const_cast<unsigned*>(a), const_cast<unsigned*>(b), const_cast<float*>(c),
                          andrea::mma_tf32_round);
}

// ldmatrix.sync.aligned.m8n8.x{N}[.trans].shared.b16 {r}, [row]
template <int N, bool TRANS> __attribute__((noinline)) inline void ldmatrix(unsigned* r, const void* row) {
    static_assert(N == 1 || N == 2 || N == 4, "ldmatrix loads 1, 2 or 4 matrices");
    if (andrea::lane_id() < 8 * N && andrea::is_shared(row, 16)) andrea::race_read(row, 16);  // racecheck: this lane's row
    static const std::string what = std::string("ldmatrix.sync.aligned.m8n8.x") + std::to_string(N) +
                                    (TRANS ? ".trans" : "") + ".shared.b16";
    andrea::aligned_round(what.c_str(), __builtin_return_address(0), r, const_cast<void*>(row), nullptr, nullptr,
                          andrea::ldmatrix_round<N, TRANS>);
    andrea::Sched& s = andrea::sched();
    if (s.misused) andrea::warp_fail(s.cur);  // a bad address found by the round's last lane
}

// cp.async.cg.shared.global [dst], [src], 16, src_bytes: copies src_bytes (0..16) and fills the
// rest of the 16 bytes with zeros; dst holds NaN bytes until cp.async.wait_group retires it.
inline void cp_async_cg_16(void* dst, const void* src, int src_bytes) {
    andrea::Fiber* f = andrea::sched().cur;
    if ((uintptr_t)dst % 16 || (uintptr_t)src % 16 || !andrea::is_shared(dst, 16) || src_bytes < 0 ||
        src_bytes > 16) {
        const int wi = f->lid >> 5;
        andrea::warp_misuse(wi, 0, 1u << (f->lid & 31), "cp.async.cg.shared.global in thread %d: dst %p, src %p, "
                            "%d source bytes: cp.async copies 16 bytes from 16-byte aligned global memory to "
                            "16-byte aligned shared memory, 0 to 16 of them read from src", f->lid, dst, src,
                            src_bytes);
        andrea::warp_fail(f);
    }
    andrea::PendingCopy c{dst, {}, 16};
    if (src_bytes) std::memcpy(c.data, src, src_bytes);  // the source is read now
    {
        andrea::RaceQuiet quiet;
        andrea::tensor_cores().copies[f->lid].open.push_back(c);
    }
    std::memset(dst, 0xff, 16);  // the destination is written from now until the wait retires it
    andrea::race_write(dst, 16);
}

// cp.async.commit_group: the copies issued since the last commit become one group.
inline void cp_async_commit_group() {
    andrea::RaceQuiet quiet;
    andrea::CpAsyncQueue& q = andrea::tensor_cores().copies[andrea::sched().cur->lid];
    q.committed.push_back(std::move(q.open));
    q.open.clear();
}

// cp.async.wait_group n: every group of this thread but the newest n has landed.
inline void cp_async_wait_group(int n) {
    std::vector<andrea::PendingCopy> landing;
    {
        andrea::RaceQuiet quiet;
        andrea::CpAsyncQueue& q = andrea::tensor_cores().copies[andrea::sched().cur->lid];
        const size_t keep = (size_t)std::max(n, 0);
        size_t retire = q.committed.size() > keep ? q.committed.size() - keep : 0;
        for (size_t g = 0; g < retire; g++) landing.insert(landing.end(), q.committed[g].begin(), q.committed[g].end());
        q.committed.erase(q.committed.begin(), q.committed.begin() + retire);
    }
    for (const andrea::PendingCopy& c : landing) {  // written by this thread, now
        std::memcpy(c.dst, c.data, c.bytes);
        andrea::race_write(c.dst, c.bytes);
    }
}

// The window address a wgmma descriptor holds (its bits 0-13, >> 4): in the CPU build, the byte
// offset into the launch's dynamic shared memory (the kernels' descriptors point there only).
// The encoding drops the low 4 bits of the address, LBO and SBO: each must be a 16-byte multiple.
inline unsigned wgmma_descriptor_address(const void* p, unsigned lbo_bytes, unsigned sbo_bytes) {
    const char* c = static_cast<const char*>(p);
    const char* base = andrea::wgmma_shared_base();
    const andrea::Guard& g = andrea::guard();
    andrea::Fiber* f = andrea::sched().cur;
    if (!base || c < base || c >= base + g.dyn_bytes) {
        andrea::warp_misuse(f->lid >> 5, 0, 1u << (f->lid & 31), "wgmma descriptor in thread %d: %p is not in the "
                            "launch's dynamic shared memory (the CPU build describes only that): build it from "
                            "the extern __shared__ array", f->lid, p);
        andrea::warp_fail(f);
    }
    if ((uintptr_t)c % 16 || (c - base) % 16 || lbo_bytes % 16 || sbo_bytes % 16) {
        andrea::warp_misuse(f->lid >> 5, 0, 1u << (f->lid & 31), "wgmma descriptor in thread %d: start byte %ld, "
                            "LBO %u, SBO %u: the descriptor holds them >> 4, so each must be a multiple of 16 "
                            "(align the tile and its core matrices to 16 bytes)", f->lid, (long)(c - base),
                            lbo_bytes, sbo_bytes);
        andrea::warp_fail(f);
    }
    return (unsigned)(c - base);
}

// Both wgmma forms: a block of whole warpgroups (4 warps each), or the thread is stopped, named.
inline void require_whole_warpgroups(andrea::Sched& s, const char* what) {
    andrea::Fiber* f = s.cur;
    if (s.nthreads % 128) {
        andrea::warp_misuse(f->lid >> 5, 0, 1u << (f->lid & 31), "%s in thread %d: the block has %d threads; "
                            "wgmma is issued by warpgroups of 4 whole warps: launch a multiple of 128 threads",
                            what, f->lid, s.nthreads);
        andrea::warp_fail(f);
    }
}

// wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16 d, a, desc_b, accumulate, 1, 1, trans_b
// (noinline: __builtin_return_address names the kernel's call site, which tells sites apart)
__attribute__((noinline)) inline void wgmma_m64nNk16_bf16(int n, bool trans_b, float* d, const unsigned* a,
                                                          unsigned long long desc_b, bool accumulate) {
    static const char* what64 = "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16";
    static const char* what128 = "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16";
    const char* what = n == 64 ? what64 : what128;
    andrea::Sched& s = andrea::sched();
    require_whole_warpgroups(s, what);
    const void* site = __builtin_return_address(0);
    andrea::wgmma_race_read_desc(desc_b, trans_b, n, site);
    andrea::WgmmaOperands op{desc_b, n, trans_b, accumulate, false, 0, false};
    andrea::aligned_round(what, site, d, const_cast<unsigned*>(a), &op, nullptr, andrea::wgmma_round);
    if (s.misused) andrea::warp_fail(s.cur);
}

// wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16 d, desc_a, desc_b, accumulate, 1, 1, trans_a,
// trans_b: the SS form, A (64 x 16) from shared memory through desc_a too (K-major, or MN-major
// with trans_a), read by the warpgroup's tensor cores like B. (The kernel file has no wrapper for
// it yet: the next Hopper kernel's; tests/kernels/cute_checks.cu calls it directly.)
__attribute__((noinline)) inline void wgmma_m64nNk16_bf16_ss(int n, bool trans_a, bool trans_b, float* d,
                                                             unsigned long long desc_a, unsigned long long desc_b,
                                                             bool accumulate) {
    static const char* what64 = "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 (SS)";
    static const char* what128 = "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 (SS)";
    const char* what = n == 64 ? what64 : what128;
    andrea::Sched& s = andrea::sched();
    require_whole_warpgroups(s, what);
    const void* site = __builtin_return_address(0);
    andrea::wgmma_race_read_desc(desc_a, trans_a, 64, site);
    andrea::wgmma_race_read_desc(desc_b, trans_b, n, site);
    andrea::WgmmaOperands op{desc_b, n, trans_b, accumulate, true, desc_a, trans_a};
    andrea::aligned_round(what, site, d, nullptr, &op, nullptr, andrea::wgmma_round);
    if (s.misused) andrea::warp_fail(s.cur);
}

// wgmma.fence: orders register accesses before the wgmmas after it; nothing to emulate.
inline void wgmma_fence() {}

// wgmma.commit_group: this thread's wgmmas issued since the last commit become one group.
inline void wgmma_commit_group() {
    andrea::RaceQuiet quiet;
    andrea::WgmmaQueue& q = andrea::tensor_cores().wgmmas[andrea::sched().cur->lid];
    q.committed.push_back(std::move(q.open));
    q.open.clear();
}

// wgmma.wait_group n: every group of this thread but the newest n has completed: its D lands
// (unless a later wgmma in flight took the registers over), its B is checked unchanged.
inline void wgmma_wait_group(int n) {
    andrea::Sched& s = andrea::sched();
    std::vector<std::shared_ptr<andrea::WgmmaIssue>> retired;  // their B: read by this thread until now
    {
        andrea::RaceQuiet quiet;
        andrea::WgmmaQueue& q = andrea::tensor_cores().wgmmas[s.cur->lid];
        const size_t keep = (size_t)std::max(n, 0);
        const size_t retire = q.committed.size() > keep ? q.committed.size() - keep : 0;
        for (size_t g = 0; g < retire; g++)
            for (andrea::WgmmaInFlight& w : q.committed[g]) {
                andrea::wgmma_check_b(*w.issue);
                if (!w.superseded) std::memcpy(w.d, w.value, sizeof(float) * (size_t)w.count);
                retired.push_back(w.issue);
            }
        q.committed.erase(q.committed.begin(), q.committed.begin() + (long)retire);
    }
    for (const auto& b : retired) {  // read until now, by this thread's async proxy
        if (b->ss) andrea::wgmma_race_read(b->a_start, b->a_lbo, b->a_sbo, b->trans_a, 64, b->site);
        andrea::wgmma_race_read(b->start, b->lbo, b->sbo, b->trans_b, b->n, b->site);
    }
    if (!retired.empty()) andrea::race_proxy_retired();  // the thread has them: a barrier now orders them
    {
        andrea::RaceQuiet quiet;
        retired.clear();  // (the vector's memory is the runtime's)
    }
    if (s.misused) andrea::warp_fail(s.cur);
}
// fence.proxy.async.shared::cta: this thread's generic-proxy accesses to shared memory so far are
// ordered before the async proxy's later ones (with a barrier between, other threads' too).
// Nothing to do to the bytes; racecheck's async proxy of this thread learns them (racecheck.h).
inline void fence_proxy_async_shared() { andrea::race_proxy_fence(); }

// fp32 -> bf16 bits, round to nearest even (cvt.rn.bf16.f32); a NaN becomes the canonical 0x7fff.
inline unsigned f32_to_bf16_rn(float x) {
    unsigned b;
    std::memcpy(&b, &x, 4);
    if ((b & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
    return (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
}

// cvt.rn.bf16x2.f32 d, hi, lo: two floats into one .b32, the first operand in the UPPER half.
inline unsigned cvt_rn_bf16x2_f32(float hi, float lo) { return f32_to_bf16_rn(hi) << 16 | f32_to_bf16_rn(lo); }

// cvt.rna.tf32.f32: round to nearest, ties away from zero, into a .b32 whose low 13 bits are 0;
// infinities stay, a NaN stays a (quiet) NaN.
inline unsigned cvt_rna_tf32_f32(float x) {
    unsigned b;
    std::memcpy(&b, &x, 4);
    if ((b & 0x7f800000u) == 0x7f800000u) return (b & 0x007fffffu) ? ((b | 0x00400000u) & 0xffffe000u) : b;
    return (b + 0x1000u) & 0xffffe000u;
}

// ex2.approx.ftz.f32: 2^x with subnormal inputs and results flushed to sign-preserving zero. The
// GPU's value may be up to 2 ulp from the correctly rounded one (the PTX manual); exp2f's here is
// closer, so the kernels' tolerances carry the GPU's bound, not this one.
inline float ex2_approx_ftz_f32(float x) {
    if (std::fpclassify(x) == FP_SUBNORMAL) x = std::copysign(0.0f, x);
    const float y = exp2f(x);
    return std::fpclassify(y) == FP_SUBNORMAL ? std::copysign(0.0f, y) : y;
}

}  // namespace ptx_emulated
