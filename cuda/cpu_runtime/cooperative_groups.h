// cpu_runtime/cooperative_groups.h — cooperative groups on the CPU build: this_thread_block,
// tiled_partition<N> (N a power of two up to 32), thread_block_tile shuffles and votes,
// coalesced_threads, cg::reduce / inclusive_scan / exclusive_scan, cg::sync. A tile's sync and
// collectives are warp collectives over the tile's lanes, as strict as __syncwarp: every lane of
// the tile must reach them (a lane that returned early is reported). grid_group::sync needs all
// blocks resident at once, which a CPU build running each block to its end cannot give: it
// ends the launch with an error saying so.
#pragma once

namespace cooperative_groups {

namespace details {
inline unsigned linear_rank() { return (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x; }
inline unsigned lane() { return linear_rank() & 31; }
}  // namespace details

class thread_block {
public:
    static void sync() { __syncthreads(); }
    static unsigned thread_rank() { return details::linear_rank(); }
    static unsigned long long size() { return (unsigned long long)blockDim.x * blockDim.y * blockDim.z; }
    static unsigned long long num_threads() { return size(); }
    static dim3 group_index() { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
    static dim3 thread_index() { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
    static dim3 dim_threads() { return blockDim; }
    static dim3 group_dim() { return blockDim; }
    static bool is_valid() { return true; }
};
inline thread_block this_thread_block() { return thread_block(); }

class grid_group {
public:
    void sync() const {
        andrea::device_abort("grid_group::sync() in thread (%u, %u, %u): a grid-wide barrier needs every "
                             "block resident at once (cudaLaunchCooperativeKernel); the CPU build runs blocks one "
                             "after another, so split the kernel in two launches there",
                             threadIdx.x, threadIdx.y, threadIdx.z);
    }
    unsigned long long thread_rank() const {
        return block_rank() * thread_block::size() + details::linear_rank();
    }
    unsigned long long size() const { return num_blocks() * thread_block::size(); }
    unsigned long long num_threads() const { return size(); }
    unsigned long long block_rank() const {
        return ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    }
    unsigned long long num_blocks() const { return (unsigned long long)gridDim.x * gridDim.y * gridDim.z; }
    dim3 group_dim() const { return gridDim; }
    dim3 dim_blocks() const { return gridDim; }
    dim3 block_index() const { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
    bool is_valid() const { return true; }
};
inline grid_group this_grid() { return grid_group(); }

// A power-of-two group of consecutive lanes of one warp: the tile's lanes are its mask.
template <unsigned N, class Parent = void> class thread_block_tile {
    static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0,
                  "the CPU build supports tiles of 1, 2, 4, 8, 16 or 32 threads");

public:
    static constexpr unsigned num_threads() { return N; }
    static constexpr unsigned size() { return N; }
    static unsigned thread_rank() { return details::lane() & (N - 1); }
    static unsigned meta_group_rank() { return details::linear_rank() / N; }
    static unsigned meta_group_size() { return (unsigned)((thread_block::size() + N - 1) / N); }
    static unsigned base() { return details::lane() & ~(N - 1); }
    static unsigned mask() { return N == 32 ? 0xffffffffu : ((1u << N) - 1) << base(); }
    static void sync() { __syncwarp(mask()); }
    static bool is_valid() { return true; }
    template <class T> static T shfl(T v, int src) { return __shfl_sync(mask(), v, src, N); }
    template <class T> static T shfl_down(T v, unsigned d) { return __shfl_down_sync(mask(), v, d, N); }
    template <class T> static T shfl_up(T v, unsigned d) { return __shfl_up_sync(mask(), v, d, N); }
    template <class T> static T shfl_xor(T v, int m) { return __shfl_xor_sync(mask(), v, m, N); }
    static int any(int p) { return __any_sync(mask(), p); }
    static int all(int p) { return __all_sync(mask(), p); }
    static unsigned ballot(int p) { return __ballot_sync(mask(), p) >> base(); }  // bit i: tile rank i
    template <class T> static unsigned match_any(T v) { return __match_any_sync(mask(), v) >> base(); }
    template <class T> static unsigned match_all(T v, int& pred) { return __match_all_sync(mask(), v, &pred) >> base(); }
    operator thread_block_tile<N, void>() const { return {}; }
};

template <unsigned N, class Parent> inline thread_block_tile<N, Parent> tiled_partition(const Parent&) { return {}; }

// The lanes of the warp that reach this call together (__activemask), ranked in lane order.
class coalesced_group {
    unsigned mask_;

public:
    explicit coalesced_group(unsigned m) : mask_(m) {}
    unsigned size() const { return __popc(mask_); }
    unsigned num_threads() const { return size(); }
    unsigned thread_rank() const { return __popc(mask_ & ((1u << details::lane()) - 1)); }
    unsigned meta_group_rank() const { return 0; }
    unsigned meta_group_size() const { return 1; }
    void sync() const { __syncwarp(mask_); }
    // The lane holding rank r: the r-th set bit of the mask.
    int lane_of(unsigned r) const {
        unsigned m = mask_;
        for (unsigned i = 0; i < r && m; i++) m &= m - 1;
        return m ? __builtin_ctz(m) : -1;
    }
    template <class T> T shfl(T v, unsigned r) const { return __shfl_sync(mask_, v, lane_of(r)); }
    template <class T> T shfl_down(T v, unsigned d) const {
        const unsigned r = thread_rank() + d;
        return __shfl_sync(mask_, v, r < size() ? lane_of(r) : (int)details::lane());
    }
    template <class T> T shfl_up(T v, unsigned d) const {
        const unsigned r = thread_rank();
        return __shfl_sync(mask_, v, r >= d ? lane_of(r - d) : (int)details::lane());
    }
    int any(int p) const { return __any_sync(mask_, p); }
    int all(int p) const { return __all_sync(mask_, p); }
    unsigned ballot(int p) const {  // bit i: rank i
        const unsigned b = __ballot_sync(mask_, p);
        unsigned out = 0, i = 0;
        for (unsigned m = mask_; m; m &= m - 1, i++)
            if (b >> __builtin_ctz(m) & 1) out |= 1u << i;
        return out;
    }
};
inline coalesced_group coalesced_threads() { return coalesced_group(__activemask()); }

template <class Group> inline void sync(const Group& g) { g.sync(); }
template <class Group> inline unsigned long long thread_rank(const Group& g) { return g.thread_rank(); }
template <class Group> inline unsigned long long group_size(const Group& g) { return g.size(); }

// The operators cg::reduce and the scans take.
template <class T> struct plus { T operator()(T a, T b) const { return a + b; } };
template <class T> struct less { T operator()(T a, T b) const { return b < a ? b : a; } };     // the smaller
template <class T> struct greater { T operator()(T a, T b) const { return a < b ? b : a; } };  // the larger
template <class T> struct bit_and { T operator()(T a, T b) const { return a & b; } };
template <class T> struct bit_or { T operator()(T a, T b) const { return a | b; } };
template <class T> struct bit_xor { T operator()(T a, T b) const { return a ^ b; } };

// Every lane gets op over the group's values: a butterfly over a tile, rank by rank otherwise.
template <unsigned N, class P, class T, class Op> inline T reduce(const thread_block_tile<N, P>& g, T v, Op op) {
    for (unsigned o = N / 2; o > 0; o >>= 1) v = op(v, g.shfl_xor(v, o));
    return v;
}
template <class T, class Op> inline T reduce(const coalesced_group& g, T v, Op op) {
    T acc = g.shfl(v, 0);
    for (unsigned r = 1; r < g.size(); r++) acc = op(acc, g.shfl(v, r));
    return acc;
}

// Rank i gets op over ranks 0..i (inclusive) or 0..i-1 (exclusive; rank 0 gets T{}).
template <class Group, class T, class Op> inline T inclusive_scan(const Group& g, T v, Op op) {
    for (unsigned d = 1; d < g.size(); d <<= 1) {
        const T other = g.shfl_up(v, d);
        if (g.thread_rank() >= d) v = op(v, other);
    }
    return v;
}
template <class Group, class T> inline T inclusive_scan(const Group& g, T v) { return inclusive_scan(g, v, plus<T>()); }
template <class Group, class T, class Op> inline T exclusive_scan(const Group& g, T v, Op op) {
    const T inc = inclusive_scan(g, v, op);
    const T prev = g.shfl_up(inc, 1);
    return g.thread_rank() == 0 ? T{} : prev;
}
template <class Group, class T> inline T exclusive_scan(const Group& g, T v) { return exclusive_scan(g, v, plus<T>()); }

}  // namespace cooperative_groups
