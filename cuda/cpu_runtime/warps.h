// cpu_runtime/warps.h — the warp: warpSize, the collectives the scheduler completes, and CUDA's
// warp intrinsics on them: __syncwarp, __activemask, the votes (__ballot_sync, __any_sync,
// __all_sync), the shuffles (__shfl_sync, _up, _down, _xor, any width), the reduces
// (__reduce_*_sync) and the matches (__match_any_sync, __match_all_sync). Refused (the launch
// ends with WARP_MISUSE, naming the warp and lanes): a mask without the caller's own lane, lanes
// that do not exist or have returned, lanes that name each other at different collectives, a
// shuffle reading outside its group. On a GPU each of these is undefined (a hang or garbage).
// Part of cuda_cpu_runtime.h, which includes the parts in order: never included on its own.
#pragma once

static constexpr int warpSize = 32;  // CUDA's built-in variable

namespace andrea {
namespace {

// --- warps --------------------------------------------------------------------------------------
// A warp collective (__syncwarp, a shuffle, a vote, a reduce, a match) completes when every lane
// its mask names has arrived with the same mask; the last lane to arrive computes every lane's
// result from what each offered, releases exactly those lanes, and goes on. Groups of a warp
// with disjoint masks (cooperative-groups tiles) therefore sync independently.

enum Collective { C_SYNC, C_SHFL, C_BALLOT, C_ADD, C_MIN_I, C_MIN_U, C_MAX_I, C_MAX_U, C_AND, C_OR, C_XOR,
                  C_MATCH_ANY, C_MATCH_ALL };

// "0-3,8,10-11"
inline std::string lanes_text(uint32_t m) {
    std::string out;
    for (int i = 0; i < 32; i++) {
        if (!(m >> i & 1)) continue;
        int j = i;
        while (j < 31 && (m >> (j + 1) & 1)) j++;
        out += (out.empty() ? "" : ",") + std::to_string(i) + (j > i ? "-" + std::to_string(j) : "");
        i = j;
    }
    return out;
}

// Record a misused warp sync; the scheduler reports it when the fiber yields.
inline void warp_misuse(int warp, uint32_t mask, uint32_t lanes, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
inline void warp_misuse(int warp, uint32_t mask, uint32_t lanes, const char* fmt, ...) {
    RaceQuiet quiet;
    Sched& s = sched();
    if (s.misused) return;  // the first one found is the one reported
    s.misused = true;
    s.misuse_warp = warp;
    s.misuse_mask = mask;
    s.misuse_lanes = lanes;
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(s.misuse, sizeof s.misuse, fmt, ap);
    va_end(ap);
}

// From inside the kernel: this fiber never goes on (it is restarted before its next use).
[[noreturn]] inline void warp_fail(Fiber* f) {
    RaceQuiet quiet;
    f->state = AT_WARP;
    for (;;) yield(f);
}

#define ANDREA_RULE "every lane a warp-sync mask names must exist and reach the same sync " \
                    "(on a GPU: undefined, a hang or garbage)"

// "the shuffle" or "the __syncwarp": what a lane named in a mask must stay alive for.
inline const char* sync_kind(const char* what) {
    return std::strcmp(what, "__syncwarp") ? "the shuffle" : "the __syncwarp";
}

// A returned lane must not be one that lanes waiting at a warp sync named in their mask.
inline void warp_exit(Fiber* f) {
    const int wi = f->lid >> 5, lane = f->lid & 31;
    Warp& w = f->sched->warps[wi];
    const uint32_t bit = 1u << lane;
    w.live &= ~bit;
    uint32_t waiting = 0;
    int first = -1;
    for (uint32_t m = w.arrived & ~bit; m; m &= m - 1) {
        const int l = __builtin_ctz(m);
        if (w.mask[l] & bit) { waiting |= 1u << l; if (first < 0) first = l; }
    }
    if (waiting)
        warp_misuse(wi, w.mask[first], bit,
                    "%s(0x%08x, ...) in warp %d: lane%s %s wait%s for lane %d, which has returned: "
                    ANDREA_RULE "; compute the mask with __ballot_sync/__activemask or keep that lane "
                    "alive until %s", w.what[first], w.mask[first], wi, __builtin_popcount(waiting) > 1 ? "s" : "",
                    lanes_text(waiting).c_str(), __builtin_popcount(waiting) > 1 ? "" : "s", lane,
                    sync_kind(w.what[first]));
}

template <class T> inline uint64_t to_bits(T v) {
    static_assert(sizeof(T) <= 8, "a warp collective on a type wider than 8 bytes");
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    return bits;
}
template <class T> inline T from_bits(uint64_t bits) {
    T v;
    std::memcpy(&v, &bits, sizeof(T));
    return v;
}

// A shuffle's lane l reads lane src outside the group: record the misuse (false: the caller fails).
inline bool complete_misread(Warp& w, int wi, uint32_t mask, int l, int src) {
    const uint32_t src_bit = 1u << src;
    if (!(w.live & src_bit))
        warp_misuse(wi, mask, src_bit, "%s(0x%08x, ...) in warp %d: lane %d reads lane %d, which %s: on "
                    "a GPU the value is undefined; read only lanes inside the block that take part in "
                    "the shuffle (compute the mask with __ballot_sync/__activemask or keep those lanes "
                    "alive until the shuffle)", w.what[l], mask, wi, l, src,
                    (w.exists & src_bit) ? "has returned" : "does not exist (partial warp)");
    else
        warp_misuse(wi, mask, src_bit, "%s(0x%08x, ...) in warp %d: lane %d reads lane %d, which is not "
                    "in the mask: on a GPU the value is undefined; add lane %d to the mask or read a "
                    "lane inside it", w.what[l], mask, wi, l, src, src);
    return false;
}

// The last lane of a group computes every lane's result; false (after recording the misuse)
// when a shuffle reads a lane outside the group.
inline bool complete(Warp& w, int wi, uint32_t mask, int op, int size) {
    if (op == C_SYNC) return true;
    if (op == C_SHFL) {  // the common case, alone: each lane's source, in the group or not
        for (uint32_t m = mask; m; m &= m - 1) {
            const int l = __builtin_ctz(m), src = w.src[l];
            if (src < 0 || src >= 32) w.result[l] = w.value[l];
            else if (mask >> src & 1) w.result[l] = w.value[src];
            else return complete_misread(w, wi, mask, l, src);
        }
        return true;
    }
    const auto sext = [&](uint64_t b) { return size == 8 ? (int64_t)b : (int64_t)(int32_t)(uint32_t)b; };
    uint64_t acc = 0;
    bool first = true;
    uint32_t ballot = 0;
    for (uint32_t m = mask; m; m &= m - 1) {
        const int l = __builtin_ctz(m);
        const uint64_t v = w.value[l];
        if (v) ballot |= 1u << l;
        if (first) { acc = v; first = false; continue; }
        switch (op) {
        case C_ADD: acc += v; break;
        case C_MIN_I: acc = sext(v) < sext(acc) ? v : acc; break;
        case C_MAX_I: acc = sext(v) > sext(acc) ? v : acc; break;
        case C_MIN_U: acc = v < acc ? v : acc; break;
        case C_MAX_U: acc = v > acc ? v : acc; break;
        case C_AND: acc &= v; break;
        case C_OR: acc |= v; break;
        case C_XOR: acc ^= v; break;
        }
    }
    for (uint32_t m = mask; m; m &= m - 1) {
        const int l = __builtin_ctz(m);
        uint64_t r = acc;
        if (op == C_BALLOT) {
            r = ballot;
        } else if (op == C_MATCH_ANY || op == C_MATCH_ALL) {
            uint32_t same = 0;
            for (uint32_t k = mask; k; k &= k - 1)
                if (w.value[__builtin_ctz(k)] == w.value[l]) same |= 1u << __builtin_ctz(k);
            r = op == C_MATCH_ANY ? same : (same == mask ? mask : 0);
        }
        w.result[l] = r;
    }
    return true;
}

// Lane offers `value` (and, for a shuffle, the lane it reads: -1 for its own value) to the
// collective `op` of the lanes in mask; returns its result once every one of them has arrived.
__attribute__((noinline)) inline uint64_t collective(uint32_t mask, const char* what, int op, uint64_t value,
                                                     int src = -1, int size = 4, bool orders = true) {
    RaceQuiet quiet;
    Sched& s = sched();
    Fiber* f = s.cur;
    const int wi = f->lid >> 5, lane = f->lid & 31;
    Warp& w = s.warps[wi];
    const uint32_t bit = 1u << lane;
    if (!(mask & bit)) {
        warp_misuse(wi, mask, bit, "lane %d of warp %d calls %s(0x%08x, ...) with a mask that does not "
                    "name itself: each calling lane must set its own bit; compute the mask with "
                    "__ballot_sync/__activemask", lane, wi, what, mask);
        warp_fail(f);
    }
    if (uint32_t ghosts = mask & ~w.exists) {
        warp_misuse(wi, mask, ghosts, "%s(0x%08x, ...) in warp %d (lane %d calls it) names lanes %s, which do "
                    "not exist: the block has %d threads, so this warp has lanes %s; " ANDREA_RULE
                    "; compute the mask with __ballot_sync/__activemask or launch whole warps (a multiple "
                    "of 32 threads)", what, mask, wi, lane, lanes_text(ghosts).c_str(), s.nthreads,
                    lanes_text(w.exists).c_str());
        warp_fail(f);
    }
    if (uint32_t gone = mask & ~w.live) {
        warp_misuse(wi, mask, gone, "%s(0x%08x, ...) in warp %d (lane %d calls it) names lanes %s, which have "
                    "returned: " ANDREA_RULE "; compute the mask with __ballot_sync/__activemask or keep "
                    "those lanes alive until %s", what, mask, wi, lane, lanes_text(gone).c_str(), sync_kind(what));
        warp_fail(f);
    }
    // Lanes that name each other must meet at the same collective with the same mask. Every lane
    // waiting was checked on arrival, so one lane per waiting group stands for its group.
    for (uint32_t m = w.arrived; m; m &= ~w.mask[__builtin_ctz(m)] & (m - 1)) {
        const int l = __builtin_ctz(m);
        const bool named = (mask >> l & 1) || (w.mask[l] & bit);
        if (named && (w.mask[l] != mask || w.op[l] != op || (w.what[l] != what && std::strcmp(w.what[l], what)))) {
            warp_misuse(wi, mask, 1u << l, "lane %d of warp %d calls %s(0x%08x, ...) while lane %d waits at "
                        "%s(0x%08x, ...): lanes whose masks name each other must reach the same warp "
                        "collective with the same mask (on a GPU: undefined)", lane, wi, what, mask, l,
                        w.what[l], w.mask[l]);
            warp_fail(f);
        }
    }
    w.arrived |= bit;
    w.mask[lane] = mask;
    w.what[lane] = what;
    w.op[lane] = op;
    w.value[lane] = value;
    w.src[lane] = src;
    if ((w.arrived & mask) == mask) {
        if (!complete(w, wi, mask, op, size)) warp_fail(f);
        if (op == C_SYNC && orders) {  // __syncwarp and tile syncs order the lanes' memory
            int lids[32], k = 0;
            for (uint32_t m = mask; m; m &= m - 1) lids[k++] = wi * 32 + __builtin_ctz(m);
            race_meet(lids, k);
        }
        for (uint32_t m = mask & ~bit; m; m &= m - 1) {
            Fiber* g = s.pool[wi * 32 + __builtin_ctz(m)];
            if (g->state == AT_WARP) g->state = READY;
        }
        w.arrived &= ~mask;
        return w.result[lane];
    }
    f->state = AT_WARP;
    yield(f);
    return w.result[lane];
}

// orders: false for the .aligned tensor-core instructions, which meet but order no memory
inline void warp_sync(uint32_t mask, const char* what, bool orders = true) {
    collective(mask, what, C_SYNC, 0, -1, 4, orders);
}

template <class T> inline T shfl(uint32_t mask, T v, int src, const char* what) {
    return from_bits<T>(collective(mask, what, C_SHFL, to_bits(v), src));
}

inline uint32_t vote(uint32_t mask, int pred, const char* what) {
    return (uint32_t)collective(mask, what, C_BALLOT, pred != 0);
}

// __activemask: the live lanes of the warp at the same call site, found once no lane of the
// block can run on (a fiber has no program counter to compare, the call site stands in).
inline uint32_t activemask(const void* site) {
    RaceQuiet quiet;
    Sched& s = sched();
    Fiber* f = s.cur;
    f->site = site;
    f->state = AT_ACTIVEMASK;
    s.at_activemask++;
    yield(f);
    return f->active;
}

inline void resolve_activemask() {
    Sched& s = sched();
    for (int i = 0; i < s.nthreads; i++) {
        Fiber* f = s.pool[i];
        if (f->state != AT_ACTIVEMASK) continue;
        f->active = 0;
        const int base = i & ~31;
        for (int l = 0; l < 32 && base + l < s.nthreads; l++) {
            const Fiber* g = s.pool[base + l];
            if (g->state == AT_ACTIVEMASK && g->site == f->site) f->active |= 1u << l;
        }
    }
    for (int i = 0; i < s.nthreads; i++)
        if (s.pool[i]->state == AT_ACTIVEMASK) s.pool[i]->state = READY;
    s.at_activemask = 0;
}

inline int lane_id() { return sched().cur->lid & 31; }

}  // namespace
}  // namespace andrea

// ---------------------------------------------------------------------------------------------
// CUDA's warp intrinsics, each one collective above

inline void __syncwarp(unsigned mask = 0xffffffffu) { andrea::warp_sync(mask, "__syncwarp"); }
// Never inlined: its return address tells one call site from another.
__attribute__((noinline)) inline unsigned __activemask() {
    return andrea::activemask(__builtin_return_address(0));
}
inline unsigned __ballot_sync(unsigned mask, int pred) { return andrea::vote(mask, pred, "__ballot_sync"); }
inline int __any_sync(unsigned mask, int pred) { return andrea::vote(mask, pred, "__any_sync") != 0; }
inline int __all_sync(unsigned mask, int pred) { return andrea::vote(mask, pred, "__all_sync") == mask; }

template <class T> inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
    const int lane = andrea::lane_id(), base = lane & ~(width - 1);
    return andrea::shfl(mask, v, base + (src & (width - 1)), "__shfl_sync");
}
template <class T> inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    const int lane = andrea::lane_id();
    const int src = (lane & (width - 1)) >= (int)delta ? lane - (int)delta : -1;
    return andrea::shfl(mask, v, src, "__shfl_up_sync");  // -1: no source, the lane keeps its value
}
template <class T> inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    const int lane = andrea::lane_id();
    const int src = (lane & (width - 1)) + (int)delta < width ? lane + (int)delta : -1;
    return andrea::shfl(mask, v, src, "__shfl_down_sync");
}
template <class T> inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
    // PTX shfl.bfly: the source may lie in an earlier group of `width` lanes (it is read), a later
    // group gives the lane its own value.
    const int lane = andrea::lane_id(), src = lane ^ lane_mask;
    return andrea::shfl(mask, v, src <= (lane | (width - 1)) ? src : -1, "__shfl_xor_sync");
}

inline unsigned __reduce_add_sync(unsigned mask, unsigned v) { return (unsigned)andrea::collective(mask, "__reduce_add_sync", andrea::C_ADD, v); }
inline int __reduce_add_sync(unsigned mask, int v) { return (int)andrea::collective(mask, "__reduce_add_sync", andrea::C_ADD, (uint32_t)v); }
inline unsigned __reduce_min_sync(unsigned mask, unsigned v) { return (unsigned)andrea::collective(mask, "__reduce_min_sync", andrea::C_MIN_U, v); }
inline int __reduce_min_sync(unsigned mask, int v) { return (int)andrea::collective(mask, "__reduce_min_sync", andrea::C_MIN_I, (uint32_t)v); }
inline unsigned __reduce_max_sync(unsigned mask, unsigned v) { return (unsigned)andrea::collective(mask, "__reduce_max_sync", andrea::C_MAX_U, v); }
inline int __reduce_max_sync(unsigned mask, int v) { return (int)andrea::collective(mask, "__reduce_max_sync", andrea::C_MAX_I, (uint32_t)v); }
inline unsigned __reduce_and_sync(unsigned mask, unsigned v) { return (unsigned)andrea::collective(mask, "__reduce_and_sync", andrea::C_AND, v); }
inline unsigned __reduce_or_sync(unsigned mask, unsigned v) { return (unsigned)andrea::collective(mask, "__reduce_or_sync", andrea::C_OR, v); }
inline unsigned __reduce_xor_sync(unsigned mask, unsigned v) { return (unsigned)andrea::collective(mask, "__reduce_xor_sync", andrea::C_XOR, v); }

// The lanes of mask whose value has the same bits as this lane's (4- or 8-byte values).
template <class T> inline unsigned __match_any_sync(unsigned mask, T v) {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "__match_any_sync takes 32- or 64-bit values");
    return (unsigned)andrea::collective(mask, "__match_any_sync", andrea::C_MATCH_ANY, andrea::to_bits(v));
}
// mask when every lane of mask holds the same value (and *pred = 1), else 0 (and *pred = 0).
template <class T> inline unsigned __match_all_sync(unsigned mask, T v, int* pred) {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "__match_all_sync takes 32- or 64-bit values");
    const unsigned r = (unsigned)andrea::collective(mask, "__match_all_sync", andrea::C_MATCH_ALL, andrea::to_bits(v));
    *pred = r != 0;
    return r;
}
