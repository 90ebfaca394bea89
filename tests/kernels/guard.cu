// Kernels that do what a wrong kernel does: run one element past an array, past dynamic shared
// memory, loop forever, abort, or write over the runtime's own heap. The CPU build must report
// each as an error for that launch and carry on (tests/backends/cpu_runtime/test_guard.py).

#include <cassert>

extern "C" __global__ void copy_n(const float* x, float* y, int n, int extra) {
    // reads and writes `extra` elements past n: 0 is correct, 1 is an off-by-one
    for (int i = threadIdx.x; i < n + extra; i += blockDim.x) y[i] = x[i] + 1.0f;
}

extern "C" __global__ void read_past(const float* x, float* y, int n) {
    if (threadIdx.x == 0) y[0] = x[n];  // one past the end: a read
}

extern "C" __global__ void write_before(float* y) {
    if (threadIdx.x == 0) y[-1] = 1.0f;  // one before the start: lands on the canary bytes
}

// dynamic shared memory of n floats; `extra` threads write past it
extern "C" __global__ void shared_past(float* y, int n, int extra) {
    extern __shared__ float buf[];
    if ((int)threadIdx.x < n + extra) buf[threadIdx.x] = 1.0f;
    __syncthreads();
    if ((int)threadIdx.x < n) y[threadIdx.x] = buf[threadIdx.x];
}

extern "C" __global__ void spin(float* y, int forever) {
    volatile int go_on = forever;  // volatile: the compiler must keep the loop
    while (go_on) {}
    y[threadIdx.x] = 1.0f;
}

extern "C" __global__ void spin_with_barriers(float* y, int forever) {
    for (int i = 0; forever || i < 4; ++i) __syncthreads();  // every thread loops, in step
    y[threadIdx.x] = 1.0f;
}

// Honest but slow: `rounds` barriers with `work` iterations of busy work before each, every
// thread in step. The watchdog must let it run past its budget as long as it reaches barriers.
extern "C" __global__ void slow_with_barriers(float* y, int rounds, long long work) {
    volatile float acc = 0.0f;  // volatile: the compiler must keep the work
    for (int r = 0; r < rounds; ++r) {
        if (threadIdx.x == 0)
            for (long long i = 0; i < work; ++i) acc = acc + 1.0f;
        __syncthreads();
    }
    y[threadIdx.x] = threadIdx.x == 0 && acc == 0.0f ? 2.0f : 1.0f;  // 2: the work was not done
}

extern "C" __global__ void fails_assert(float* y) {
    assert(y[threadIdx.x] == 0.0f);
    y[threadIdx.x] = 1.0f;
}

// A stray write over the heap: the scheduler's own state, which lives there. In the caller's
// process this would end Python; isolated, it ends only the launch's child process.
extern "C" __global__ void smash_heap(float* y) {
    if (threadIdx.x == 0) memset((void*)&andrea::sched(), 0x41, 256);
    y[threadIdx.x] = 1.0f;
}

// Reads through a pointer stored in device memory: right only where the launch sees each array
// at the address the caller allocated it at (the launch worker maps them so).
extern "C" __global__ void follow_pointer(const float* const* table, float* y) {
    y[threadIdx.x] = table[0][threadIdx.x] * 2.0f;
}
