// CUTLASS CuTe's own tables for the tensor-core instructions the kernel file uses, printed for
// tests/backends/cpu_runtime/test_cute_layouts.py: compiled as HOST code with nvcc against the
// headers of the nvidia-cutlass wheel (no GPU needed). Every CUTLASS and FlashAttention-3 kernel
// relies on these layouts on real hardware; the CPU build's emulation was written from a reading
// of the PTX ISA, so the test ties the two together.
//
// Output: one line per table, "name v0 v1 ...":
//  - mma_{A,B,C}: mma.sync m16n8k16 bf16 (SM80_16x8x16_F32BF16BF16F32_TN), for thread t and value
//    v (row-major over (t, v)) the index CuTe gives: A m + 16 k, B n + 8 k, C m + 16 n.
//  - ldsm_{src,dst}_{x1,x2,x4}{,_t}: ldmatrix (SM75_U32xN_LDSM_N, SM75_U16x{2,4,8}_LDSM_T), in bits
//    of the data the instruction moves: src t -> the first bit of the row lane t points at; dst
//    (t, e) -> the bit where 16-bit element e of lane t's registers comes from.
//  - wgmma{64,128}_{A,C}: SM90 m64nNk16 RS (A from registers): A (128 threads, 8 values) ->
//    m + 64 k, C (128 threads, N/2 values) -> m + 64 n.
//  - wgmma_ss_A: SM90 m64n64k16 SS (A from shared memory too): A (128 threads, 1024 values) ->
//    m + 64 k (every thread's view is the whole tile: the warpgroup reads it through a descriptor).
//  - desc_*: make_gmma_desc on a no-swizzle (interleave) tile, its 64 bits, and offsets_* the
//    tile's element offsets, (n, k) row-major over n then k: the layout the descriptor describes;
//    atom_a_{kmajor,mnmajor}: the same for an A tile (64 x 16, (m, k)) that CuTe's own canonical
//    atoms (GMMA::Layout_{K,MN}_INTER_Atom) tile, as a CUTLASS SS kernel lays out its sA.
#include <cstdio>

#include <cute/tensor.hpp>
#include <cute/atom/copy_traits_sm75.hpp>
#include <cute/atom/mma_traits_sm80.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>

using namespace cute;

template <class L>
void print_tv(const char* name, L layout, int threads, int values, int step = 1) {
    std::printf("%s", name);
    for (int t = 0; t < threads; ++t)
        for (int v = 0; v < values; ++v) std::printf(" %d", int(layout(t, v * step)));
    std::printf("\n");
}

template <class Op>
void print_ldsm(const char* suffix, int x) {
    using Traits = Copy_Traits<Op>;
    char name[64];
    std::snprintf(name, sizeof name, "ldsm_src_%s", suffix);
    print_tv(name, typename Traits::SrcLayout{}, 32, 1);
    std::snprintf(name, sizeof name, "ldsm_dst_%s", suffix);
    print_tv(name, typename Traits::DstLayout{}, 32, 2 * x, 16);  // element e starts at bit 16 e
}

template <GMMA::Major MAJOR, class Layout>
void print_desc(const char* name, Layout layout, int n, int k) {
    auto tile = make_tensor(make_smem_ptr(static_cast<bfloat16_t*>(nullptr)), layout);  // start 0
    GmmaDescriptor desc = GMMA::make_gmma_desc<MAJOR>(tile);
    std::printf("desc_%s %llu\n", name, (unsigned long long)desc.desc_);
    std::printf("offsets_%s", name);
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < k; ++j) std::printf(" %d", int(layout(i, j)));
    std::printf("\n");
}

template <int N>
void print_wgmma() {
    using Traits = MMA_Traits<SM90_64x64x16_F32BF16BF16_RS<GMMA::Major::K, GMMA::Major::K>>;
    using TraitsN = MMA_Traits<std::conditional_t<N == 64, SM90_64x64x16_F32BF16BF16_RS<GMMA::Major::K, GMMA::Major::K>,
                                                  SM90_64x128x16_F32BF16BF16_RS<GMMA::Major::K, GMMA::Major::K>>>;
    char name[32];
    std::snprintf(name, sizeof name, "wgmma%d_A", N);
    print_tv(name, typename Traits::ALayout{}, 128, 8);
    std::snprintf(name, sizeof name, "wgmma%d_C", N);
    print_tv(name, typename TraitsN::CLayout{}, 128, N / 2);
}

// A B tile of N x 16 (n, k) in bf16, no swizzle: core matrices of 8 rows x 16 bytes, LBO bytes
// apart along K's core-matrix groups, SBO along N's (CuTe's strides must be static: templates).
// K-major (k contiguous inside a core matrix), CuTe's canonical K-major INTERLEAVE
// ((8, m), (8, 2)) : ((8, SBO), (1, LBO)) in elements; MN-major (n contiguous), ((8, m), (8, 2)) :
// ((1, SBO), (8, LBO)).
template <int N, int LBO, int SBO>
void print_descs() {
    char name[48];
    auto k_major = make_layout(make_shape(make_shape(_8{}, Int<N / 8>{}), make_shape(_8{}, _2{})),
                               make_stride(make_stride(_8{}, Int<SBO / 2>{}), make_stride(_1{}, Int<LBO / 2>{})));
    std::snprintf(name, sizeof name, "kmajor_n%d_lbo%d_sbo%d", N, LBO, SBO);
    print_desc<GMMA::Major::K>(name, k_major, N, 16);
    auto mn_major = make_layout(make_shape(make_shape(_8{}, Int<N / 8>{}), make_shape(_8{}, _2{})),
                                make_stride(make_stride(_1{}, Int<SBO / 2>{}), make_stride(_8{}, Int<LBO / 2>{})));
    std::snprintf(name, sizeof name, "mnmajor_n%d_lbo%d_sbo%d", N, LBO, SBO);
    print_desc<GMMA::Major::MN>(name, mn_major, N, 16);
}

// kernel6's K and V tiles for head size D: (row r, column c) at (r / 8) 8D + 8 (c / 8) 8 + 8 (r % 8)
// + c % 8 in bf16 (microgpt_cuda.cu). S = Q K^T reads K as B K-major (n = key r, k = dim c), one k16
// step 16 columns; O = P V reads V as B MN-major (n = dim c, k = key r), one k16 step 16 keys.
template <int D>
void print_kernel6() {
    auto k_tile = make_layout(make_shape(make_shape(_8{}, _8{}), make_shape(_8{}, _2{})),
                              make_stride(make_stride(_8{}, Int<8 * D>{}), make_stride(_1{}, _64{})));
    auto v_tile = make_layout(make_shape(make_shape(_8{}, Int<D / 8>{}), make_shape(_8{}, _2{})),
                              make_stride(make_stride(_1{}, _64{}), make_stride(_8{}, Int<8 * D>{})));
    char name[48];
    std::snprintf(name, sizeof name, "kernel6_k_d%d", D);
    print_desc<GMMA::Major::K>(name, k_tile, 64, 16);
    std::snprintf(name, sizeof name, "kernel6_v_d%d", D);
    print_desc<GMMA::Major::MN>(name, v_tile, D, 16);
}

// A's 64 x 16 tile as CUTLASS lays out sA for an SS wgmma: CuTe's canonical no-swizzle atom tiled
// over the tile (the atom's swizzle is the identity, Swizzle<0,4,3>: its inner layout is the tile)
void print_atom_a() {
    auto k_atom = tile_to_shape(GMMA::Layout_K_INTER_Atom<bfloat16_t>{}, Shape<_64, _16>{});
    auto mn_atom = tile_to_shape(GMMA::Layout_MN_INTER_Atom<bfloat16_t>{}, Shape<_64, _16>{});
    print_desc<GMMA::Major::K>("atom_a_kmajor", k_atom.layout_b(), 64, 16);
    print_desc<GMMA::Major::MN>("atom_a_mnmajor", mn_atom.layout_b(), 64, 16);
}

int main() {
    using Mma = MMA_Traits<SM80_16x8x16_F32BF16BF16F32_TN>;
    print_tv("mma_A", typename Mma::ALayout{}, 32, 8);
    print_tv("mma_B", typename Mma::BLayout{}, 32, 4);
    print_tv("mma_C", typename Mma::CLayout{}, 32, 4);
    print_ldsm<SM75_U32x1_LDSM_N>("x1", 1);
    print_ldsm<SM75_U32x2_LDSM_N>("x2", 2);
    print_ldsm<SM75_U32x4_LDSM_N>("x4", 4);
    print_ldsm<SM75_U16x2_LDSM_T>("x1_t", 1);
    print_ldsm<SM75_U16x4_LDSM_T>("x2_t", 2);
    print_ldsm<SM75_U16x8_LDSM_T>("x4_t", 4);
    print_wgmma<64>();
    print_wgmma<128>();
    print_tv("wgmma_ss_A", typename MMA_Traits<SM90_64x64x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::K>>::ALayout{},
             128, 1024);
    print_atom_a();
    // core matrices k-groups first (LBO 128) and n-groups first (SBO 128), N 64 and 128
    print_descs<64, 128, 256>();
    print_descs<64, 1024, 128>();
    print_descs<128, 128, 256>();
    print_descs<128, 2048, 128>();
    print_kernel6<64>();
    print_kernel6<128>();
    return 0;
}
