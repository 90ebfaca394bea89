// cuda_cpu_runtime.h — the CUDA execution model on the CPU, so the unmodified kernel file runs
// without a GPU. Force-included (g++ -include) into a generated C++ file that holds the kernel
// file's text (its `extern __shared__` lines pointed at the guarded dynamic shared bytes);
// andrea_cli/backends/cpu_runtime/build.py writes that file, module.py and native.py launch it.
//
// Model: every CUDA thread of a block is a fiber (own mmap'd stack with a guard page) on one OS
// thread; a launch's blocks are spread over LaunchOptions.threads OS threads, each block run
// start to end by one of them. Fibers are created once and switched by a few lines of
// assembly (x86-64; elsewhere makecontext + _setjmp/_longjmp), never swapcontext (a syscall per
// switch). A scheduler runs each runnable fiber until it blocks; when nothing can run it
// releases __syncthreads if every live thread waits there (returned threads count as arrived),
// else it reports a deadlock.
// Warp syncs are strict, as CUDA specifies: every lane a mask names must exist and reach the same
// sync, and a shuffle must not read a lane that does not exist or has returned; anything else is
// undefined on a GPU (a hang or garbage) and ends the launch with WARP_MISUSE here.
// __shared__ is thread_local (a block-scope static per OS thread); the module's whole TLS block
// is therefore shared memory and is poisoned with NaN bytes at each block start.
// Launches of one library are serialized by a mutex; each OS thread has its own scheduler state.
//
// Where it lives: this file is the one force-included entry; the model is in cuda/cpu_runtime/,
// one file per section, included below in order (each opens with what it emulates and what it
// refuses). The headers a kernel file itself includes (cuda_runtime.h, cuda_fp16.h,
// cooperative_groups.h, cuda/std/...) are in cuda/cpu_runtime/include/, which the build puts on
// the include path. build.py keys its compile cache on every file under cuda/cpu_runtime/.

// Fortified _longjmp aborts when it jumps between stacks: turn it off before any system header.
#undef _FORTIFY_SOURCE

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <climits>
#include <condition_variable>
#include <mutex>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>
// The standard headers that spell GCC's attribute `__noinline__`, included before qualifiers.h
// makes that word CUDA's macro: a kernel file's own `#include <memory>` then finds them done.
// tests/backends/cpu_runtime/test_cuda_as_written.py includes every standard header g++ ships
// in front of a kernel.
#include <memory>  // bits/shared_ptr_base.h: __attribute__((__noinline__))
#if __has_include(<stacktrace>)
#include <stacktrace>  // [[__gnu__::__noinline__]] (C++23)
#endif
#if __has_include(<experimental/bits/simd_detail.h>)
#include <experimental/bits/simd_detail.h>  // _GLIBCXX_SIMD_NEVER_INLINE, respelled in qualifiers.h
#endif

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

// The parts, in the order each needs the one before: first the execution model (warps.h and
// device_abort.h with the CUDA names they implement), then the device functions on top of it.
// Everything in namespace andrea sits in an anonymous namespace: two kernel libraries in one
// process must not share a scheduler (inline functions' statics would otherwise become
// process-wide unique symbols).
#include "cpu_runtime/qualifiers.h"
#include "cpu_runtime/cuda_runtime_stub.h"
#include "cpu_runtime/vectors.h"
#include "cpu_runtime/racecheck.h"
#include "cpu_runtime/context_switch.h"
#include "cpu_runtime/fibers.h"
#include "cpu_runtime/warps.h"
#include "cpu_runtime/device_abort.h"
#include "cpu_runtime/shared_memory.h"
#include "cpu_runtime/launch_report.h"
#include "cpu_runtime/guard.h"
#include "cpu_runtime/launch.h"
#include "cpu_runtime/isolation.h"
#include "cpu_runtime/exports.h"

#include "cpu_runtime/barriers.h"
#include "cpu_runtime/atomics.h"
#include "cpu_runtime/cache_hints.h"
#include "cpu_runtime/clocks.h"
#include "cpu_runtime/math_functions.h"
#include "cpu_runtime/tensor_cores.h"
#include "cpu_runtime/async_barriers.h"
