// The switch and a new fiber's first frame (fiber.h), in GNU assembler for x86-64 System V.
#include "fiber.h"

#include <cstdint>

// cudasim_switch(from, to): push the callee-saved registers, store rsp in *from (rdi), load rsp from to (rsi), pop
// that fiber's registers, return on its stack. cudasim_fiber_start is where a new fiber's first switch returns
// to: entry (in r12) called with arg (in r13); .cfi_undefined rip ends backtraces and unwinding there.
asm(R"(
    .text
    .p2align 4
    .globl cudasim_switch
    .hidden cudasim_switch
    .type cudasim_switch, @function
cudasim_switch:
    .cfi_startproc
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
    .cfi_endproc
    .size cudasim_switch, .-cudasim_switch

    .p2align 4
    .type cudasim_fiber_start, @function
cudasim_fiber_start:
    .cfi_startproc
    .cfi_undefined rip
    movq %r13, %rdi
    callq *%r12
    ud2
    .cfi_endproc
    .size cudasim_fiber_start, .-cudasim_fiber_start
)");

extern "C" void cudasim_fiber_start();

namespace cudasim::detail {

Context make_context(void* stack_top, void (*entry)(void*), void* arg) {
  // What cudasim_switch pops, lowest address first: r15, r14, r13, r12, rbx, rbp, then its return address. 72
  // bytes below a 16-byte aligned top, the call in cudasim_fiber_start happens with rsp 16-byte aligned.
  auto* frame = reinterpret_cast<std::uintptr_t*>(static_cast<char*>(stack_top) - 72);
  frame[0] = frame[1] = 0;                             // r15, r14
  frame[2] = reinterpret_cast<std::uintptr_t>(arg);    // r13
  frame[3] = reinterpret_cast<std::uintptr_t>(entry);  // r12
  frame[4] = frame[5] = 0;                             // rbx, rbp
  frame[6] = reinterpret_cast<std::uintptr_t>(&cudasim_fiber_start);
  return frame;
}

}  // namespace cudasim::detail
