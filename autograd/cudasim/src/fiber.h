#pragma once
// cuda-sim's fibers: a stack per suspended CUDA thread and a switch between them that saves only what the
// System V x86-64 ABI says a call preserves (rbx, rbp, r12-r15 and the stack pointer). The x87 control word and
// MXCSR are not switched: a launch sets MXCSR once for every fiber of its OS thread (run_grid), and kernels
// change neither. Boost.Context, used before, saves and restores both on every switch; that was most of a
// switch's time (docs/performance.md, "cuda-sim").
#if !defined(__x86_64__)
#error "cuda-sim's fiber switch is written for x86-64 (System V)"
#endif

namespace cudasim::detail {

// A suspended fiber: its stack pointer, below the registers the switch pushed.
using Context = void*;

// Saves the running fiber's context in *from and resumes `to`; returns when something switches back to *from.
extern "C" void cudasim_switch(Context* from, Context to);

// A fiber on the stack ending at `stack_top` (16-byte aligned) that, switched to, calls entry(arg). entry must
// never return: it switches away for the last time instead.
Context make_context(void* stack_top, void (*entry)(void*), void* arg);

}  // namespace cudasim::detail
