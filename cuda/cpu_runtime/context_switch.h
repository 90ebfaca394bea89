// cpu_runtime/context_switch.h — switching between fibers (one per CUDA thread) without a syscall.
// x86-64: a hand-written switch of the callee-saved registers and the stack pointer; elsewhere
// (or with ANDREA_PORTABLE_SWITCH): makecontext once, then _setjmp/_longjmp. Never swapcontext,
// which costs a syscall per switch.
// Part of cuda_cpu_runtime.h, which includes the parts in order: never included on its own.
#pragma once

namespace andrea {
namespace {

// --- context switching ---------------------------------------------------------------------------
// x86-64: a hand-written switch of the callee-saved registers and the stack pointer (a few ns;
// glibc's _setjmp/_longjmp cost ~60 ns a pair here, swapcontext a syscall). Elsewhere:
// makecontext once, then _setjmp/_longjmp.

#if defined(__x86_64__) && !defined(ANDREA_PORTABLE_SWITCH)
struct Ctx { void* sp; };

// andrea_ctx_switch(void** save_sp, void* load_sp): push the callee-saved registers, store rsp,
// load the other stack's rsp, pop its registers, return into it.
asm(R"(
    .text
    .p2align 4
    .type andrea_ctx_switch, @function
    .hidden andrea_ctx_switch
andrea_ctx_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size andrea_ctx_switch, .-andrea_ctx_switch
)");
extern "C" void andrea_ctx_switch(void** save_sp, void* load_sp);

ANDREA_NO_TSAN inline void ctx_switch(Ctx& from, const Ctx& to) { andrea_ctx_switch(&from.sp, to.sp); }

// A context that starts fn on the stack below top (fn must never return).
inline void ctx_make(Ctx& c, char* top, void (*fn)()) {
    void** sp = reinterpret_cast<void**>(reinterpret_cast<uintptr_t>(top) & ~uintptr_t(15));
    *--sp = nullptr;                      // fn's "return address": keeps the ABI's alignment
    *--sp = reinterpret_cast<void*>(fn);  // where the switch's ret goes
    for (int i = 0; i < 6; i++) *--sp = nullptr;  // rbp rbx r12-r15
    c.sp = sp;
}
#else
struct Ctx { jmp_buf jb; };

inline void ctx_switch(Ctx& from, const Ctx& to) {
    if (!_setjmp(from.jb)) _longjmp(const_cast<Ctx&>(to).jb, 1);
}

struct CtxBoot { Ctx* c; void (*fn)(); ucontext_t back; };
inline CtxBoot& ctx_boot() { static CtxBoot b; return b; }
inline void ctx_trampoline() {
    CtxBoot& b = ctx_boot();
    void (*fn)() = b.fn;
    if (!_setjmp(b.c->jb)) setcontext(&b.back);  // parked; the first switch here runs fn
    fn();
}
inline void ctx_make(Ctx& c, char* top, void (*fn)()) {
    CtxBoot& b = ctx_boot();
    ucontext_t uc;
    getcontext(&uc);
    const size_t size = 64 << 10;
    uc.uc_stack.ss_sp = top - size;  // makecontext only needs room for the trampoline's frame
    uc.uc_stack.ss_size = size;
    uc.uc_link = nullptr;
    makecontext(&uc, ctx_trampoline, 0);
    b.c = &c;
    b.fn = fn;
    swapcontext(&b.back, &uc);
}
#endif

}  // namespace
}  // namespace andrea
