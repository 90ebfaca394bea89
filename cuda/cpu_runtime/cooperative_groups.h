// cpu_runtime/cooperative_groups.h — cooperative groups on the CPU build: this_thread_block,
// tiled_partition<N> (N a power of two up to 32: a warp's lanes; 64 to 1024: whole warps, with
// block_tile_memory or without), thread_block_tile shuffles and votes,
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
// The scratch CUDA wants for tiles of more than 32 threads (CUDA 12: <MaxBlockSize>; CUDA 11:
// <TileCommunicationSize, MaxBlockSize>). Here the tiles keep their state in the runtime, so it
// holds nothing; trivial, as a __shared__ object must be.
template <unsigned A = 1024, unsigned B = 0> struct block_tile_memory { unsigned char unused; };
template <unsigned A, unsigned B> inline thread_block this_thread_block(block_tile_memory<A, B>&) {
    return thread_block();
}

namespace details {
// Tiles of more than 32 threads span whole warps, so their sync and exchanges go through memory:
// a barrier per tile (counted arrivals, the waiting threads giving the others a turn, tagged
// with the block barrier's generation so a new block or phase starts clean) and a slot per thread.
struct TileBarrier { unsigned long long tag = ~0ull; unsigned arrived = 0, round = 0; };
inline TileBarrier& tile_barrier(unsigned tile) {
    static TileBarrier barriers[32];  // 1024 threads / 64 at most
    return barriers[tile];
}
inline unsigned char (&tile_slots())[1024][32] {
    static unsigned char slots[1024][32];
    return slots;
}
// orders: the tile's sync orders its members' memory (racecheck); an exchange's does not (a shuffle).
template <unsigned N> inline void multi_warp_meet(bool orders) {
    andrea::RaceQuiet quiet;
    const unsigned tile = linear_rank() / N;
    const unsigned long long block = (unsigned long long)blockDim.x * blockDim.y * blockDim.z;
    const unsigned members = (unsigned)std::min<unsigned long long>(N, block - (unsigned long long)tile * N);
    andrea::Sched& s = andrea::sched();
    TileBarrier& b = tile_barrier(tile);
    if (b.tag != s.barrier_gen) b = TileBarrier{s.barrier_gen, 0, 0};
    const unsigned round = b.round;
    if (++b.arrived == members) {
        b.arrived = 0;
        b.round++;
        if (orders) {
            int lids[1024];
            for (unsigned i = 0; i < members; i++) lids[i] = (int)(tile * N + i);
            andrea::race_meet(lids, (int)members);
        }
        return;
    }
    while (b.round == round) andrea::yield(s.cur);  // an endless wait (a member returned) trips the watchdog
}
template <unsigned N> inline void multi_warp_sync() { multi_warp_meet<N>(true); }
// Every member writes v; each reads the value of tile rank `src` (its own if src < 0).
template <unsigned N, class T> inline T multi_warp_exchange(T v, int src) {
    static_assert(sizeof(T) <= 32, "tiles of more than 32 threads exchange values of up to 32 bytes");
    andrea::RaceQuiet quiet;  // the slots are the runtime's; an exchange orders no memory
    const unsigned me = linear_rank(), first = me / N * N;
    std::memcpy(tile_slots()[me], &v, sizeof(T));
    multi_warp_meet<N>(false);
    T out = v;
    if (src >= 0) std::memcpy(&out, tile_slots()[first + (unsigned)src], sizeof(T));
    multi_warp_meet<N>(false);
    return out;
}
}  // namespace details

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

// A power-of-two group of consecutive threads: up to 32, lanes of one warp (the tile's lanes are
// its mask); above, whole warps, synchronized and exchanging through memory.
template <unsigned N, class Parent = void> class thread_block_tile {
    static_assert(N >= 1 && N <= 1024 && (N & (N - 1)) == 0,
                  "the CPU build supports tiles of a power of two threads, 1 to 1024");
    static constexpr bool multi_warp = N > 32;
    template <class T> static T exchange(T v, int src) {  // multi-warp tiles: src < 0 keeps v
        return details::multi_warp_exchange<N>(v, src >= 0 && src < (int)N ? src : -1);
    }
    // A tile shuffles any type of up to 32 bytes (a uint4, a struct): word by word, each word one
    // warp shuffle from the same source lane.
    template <class T, class One> static T by_words(T v, One one) {
        static_assert(sizeof(T) <= 32, "a tile shuffles values of up to 32 bytes");
        if constexpr (sizeof(T) <= 8) {
            return one(v);
        } else {
            unsigned words[(sizeof(T) + 3) / 4] = {};
            std::memcpy(words, &v, sizeof(T));
            for (unsigned& w : words) w = one(w);
            T out;
            std::memcpy(&out, words, sizeof(T));
            return out;
        }
    }

public:
    static constexpr unsigned num_threads() { return N; }
    static constexpr unsigned size() { return N; }
    static unsigned thread_rank() { return details::linear_rank() & (N - 1); }
    static unsigned meta_group_rank() { return details::linear_rank() / N; }
    static unsigned meta_group_size() { return (unsigned)((thread_block::size() + N - 1) / N); }
    static unsigned base() { return details::lane() & ~(N - 1); }
    static unsigned mask() {
        static_assert(!multi_warp, "a tile of more than 32 threads has no lane mask");
        return N == 32 ? 0xffffffffu : ((1u << N) - 1) << base();
    }
    static void sync() {
        if constexpr (multi_warp) details::multi_warp_sync<N>();
        else __syncwarp(mask());
    }
    static bool is_valid() { return true; }
    template <class T> static T shfl(T v, int src) {
        if constexpr (multi_warp) return exchange(v, src & (int)(N - 1));
        else return by_words(v, [&](auto x) { return __shfl_sync(mask(), x, src, N); });
    }
    template <class T> static T shfl_down(T v, unsigned d) {
        if constexpr (multi_warp) return exchange(v, (int)(thread_rank() + d));
        else return by_words(v, [&](auto x) { return __shfl_down_sync(mask(), x, d, N); });
    }
    template <class T> static T shfl_up(T v, unsigned d) {
        if constexpr (multi_warp) return exchange(v, thread_rank() >= d ? (int)(thread_rank() - d) : -1);
        else return by_words(v, [&](auto x) { return __shfl_up_sync(mask(), x, d, N); });
    }
    template <class T> static T shfl_xor(T v, int m) {
        if constexpr (multi_warp) return exchange(v, (int)(thread_rank() ^ (unsigned)m));
        else return by_words(v, [&](auto x) { return __shfl_xor_sync(mask(), x, m, N); });
    }
    static int any(int p) {
        if constexpr (multi_warp) {
            int r = p != 0;
            for (unsigned o = N / 2; o > 0; o >>= 1) r |= shfl_xor(r, (int)o);
            return r;
        } else {
            return __any_sync(mask(), p);
        }
    }
    static int all(int p) {
        if constexpr (multi_warp) return !any(!p);
        else return __all_sync(mask(), p);
    }
    static unsigned ballot(int p) { return __ballot_sync(mask(), p) >> base(); }  // bit i: tile rank i
    template <class T> static unsigned match_any(T v) { return __match_any_sync(mask(), v) >> base(); }
    template <class T> static unsigned match_all(T v, int& pred) { return __match_all_sync(mask(), v, &pred) >> base(); }
    operator thread_block_tile<N, void>() const { return {}; }
};

template <unsigned N, class Parent> inline thread_block_tile<N, Parent> tiled_partition(const Parent&) { return {}; }

// Any group, held by value (a function taking `thread_group g` gets a block or a tile): its size,
// the calling thread's rank, and its sync, fixed when the group is made.
class thread_group {
    unsigned long long size_, rank_;
    unsigned mask_;  // a tile of a warp's lanes; 0: the whole block
    void (*multi_warp_sync_)();

public:
    thread_group(const thread_block&)
        : size_(thread_block::size()), rank_(thread_block::thread_rank()), mask_(0), multi_warp_sync_(nullptr) {}
    template <unsigned N, class P>
    thread_group(const thread_block_tile<N, P>&)
        : size_(N), rank_(details::linear_rank() & (N - 1)), mask_(0), multi_warp_sync_(nullptr) {
        if constexpr (N > 32) multi_warp_sync_ = &details::multi_warp_sync<N>;
        else mask_ = thread_block_tile<N, P>::mask();
    }
    // tiled_partition(parent, n): tiles of n consecutive threads of a block, n a power of two up to 32.
    thread_group(unsigned n, const char* what) : size_(n), rank_(details::linear_rank() & (n - 1)), mask_(0),
                                                 multi_warp_sync_(nullptr) {
        if (n == 0 || n > 32 || (n & (n - 1)))
            andrea::device_abort("%s: the CPU build partitions a block into tiles of 1 to 32 threads (a power of "
                                 "two) at run time, got %u (a tile of more: tiled_partition<N>)", what, n);
        mask_ = n == 32 ? 0xffffffffu : ((1u << n) - 1) << (details::lane() & ~(n - 1));
    }
    void sync() const {
        if (multi_warp_sync_) multi_warp_sync_();
        else if (mask_) __syncwarp(mask_);
        else __syncthreads();
    }
    unsigned long long size() const { return size_; }
    unsigned long long num_threads() const { return size_; }
    unsigned long long thread_rank() const { return rank_; }
    bool is_valid() const { return true; }
};
inline thread_group tiled_partition(const thread_group&, unsigned n) { return thread_group(n, "tiled_partition"); }
inline thread_group tiled_partition(const thread_block&, unsigned n) { return thread_group(n, "tiled_partition"); }

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
