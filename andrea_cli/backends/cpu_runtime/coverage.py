"""What the CPU build supports of CUDA's device surface and what it refuses (for `andrea info`).
The runtime header and its sections in cuda/cpu_runtime/ are what this summarises."""

SUPPORTED = {
    "kernels": "extern \"C\" and C++ __global__ functions; template kernels through name_expressions",
    "threads": "a fiber per CUDA thread; __syncthreads and __syncthreads_count/_and/_or; a reverse schedule; "
               "blocks spread over --threads OS threads (real atomics, same bits without races)",
    "warps": "__shfl*_sync (any width), __ballot/__any/__all_sync, __syncwarp, __activemask, "
             "__reduce_*_sync, __match_any/all_sync; every mask must name only lanes that reach the sync",
    "cooperative groups": "this_thread_block (with block_tile_memory), tiled_partition<1..1024>, "
                          "tiled_partition(group, n), thread_group, tile shfl (up to 32 bytes)/vote/match/sync, "
                          "coalesced_threads, cg::reduce, cg::inclusive_scan/exclusive_scan, cg::sync",
    "memory": "__shared__ (static and extern, NaN-poisoned at each block), __ldg, __ldca/__ldcg/__ldcs/"
              "__ldlu/__ldcv, __stwb/__stcg/__stcs/__stwt, NULL (None) pointer arguments, device arrays "
              "(andrea_cli.device) whose stored pointers work, structured dtypes as their bytes",
    "types": "every vector type (char1 .. double4), dim3; __half, __half2, __nv_bfloat16, __nv_bfloat162 "
             "(rounding bit-exact: nearest even, and the _rz/_rd/_ru conversions)",
    "atomics": "Add Sub Exch CAS Min Max And Or Xor Inc Dec on every type CUDA has them for, "
               "half/bf16 Add Min Max, the _block and _system variants",
    "math": "CUDA's float overloads (exp(float) is expf), libm and the fast intrinsics (__expf, __exp10f, "
            "...), _rn/_rz/_rd/_ru arithmetic and "
            "conversions, __brev __byte_perm __umulhi __mulhi __funnelshift __popc __clz __ffs __sad, "
            "clock64, __nanosleep",
    "headers": "cuda.h, cuda_runtime.h (the host API's types), cuda_profiler_api.h, cuda_fp16.h, cuda_bf16.h, "
               "cooperative_groups.h (+ /reduce.h, /scan.h), "
               "math_constants.h, cuda/std/* (the host's std)",
    "macros": "__CUDACC__ and ANDREA_CPU_BUILD defined, __CUDA_ARCH__ not (the portable branch runs)",
    "errors": "device assert and __trap, deadlocks, warp-sync misuse, illegal addresses, stack "
              "overflow: each one line naming the thread and block",
}

REFUSED = {
    "inline PTX": "asm(\"...\") it cannot run: a one-line compile error naming the instruction "
                  "(keep it under #ifdef __CUDA_ARCH__ with a portable #else)",
    "grid-wide sync": "grid_group::sync(): blocks are not all resident at once; an error at run time",
    "unknown functions": "anything neither the file nor the runtime defines: a one-line compile error naming it",
    "host-side APIs": "texture/surface objects, dynamic parallelism, module globals set from the host",
}

# racecheck (verify --racecheck, attend/grad --backend cpu --racecheck, RawModule(racecheck=True)):
# ThreadSanitizer told CUDA's ordering rules (cuda/cpu_runtime/racecheck.h)
RACECHECK = {
    "finds": "two accesses to one byte by different threads, one a write, that nothing orders: "
             "global memory, static and dynamic __shared__; one line each (kind, memory, both threads, "
             "both lines, the rule)",
    "orders": "__syncthreads (and _count/_and/_or, cg::sync) within a block; __syncwarp and tile syncs "
              "for the lanes they name; cp.async at its wait; a wgmma's B read from issue to its wait; a __threadfence() then an atomic that "
              "another thread's atomic reads; the launch's start and end with the host",
    "does not order": "shuffles, votes, reduces, matches and mma/ldmatrix (they meet, they order no "
                      "memory); an atomic alone (relaxed); a fence with no atomic after it (said in the report)",
    "cannot see": "races that need an interleaving of atomics the one schedule never takes, the "
                  "order of floating-point atomics (a different sum, not a race), blocks more than "
                  "one apart in launch order (each block is compared with the one before it)",
}
