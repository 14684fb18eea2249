#pragma once
// The checker's side of the scheduler (check.cpp): the scheduler tells it where launches, blocks, barriers
// and warp collectives begin and end; the access hooks tell it every load and store of kernel code.
#include "scheduler.h"

namespace cudasim::detail {

// Whether any check or the profiler is on (plain globals: the scheduler asks at every launch, block and barrier).
extern unsigned enabled_checks;
extern bool profiling_on;
inline bool checking() { return enabled_checks != 0 || profiling_on; }

void check_launch_begin(Launch& l);
void check_block_begin(Launch& l);
void check_block_end(Launch& l);
void check_launch_end(Launch& l);  // throws CheckError for the launch's reports (unless recording)
// Every live thread of the block waits at a barrier (`arriving` just came, or null when the last one exited).
void check_barrier(const Launch& l, const Block& b, const Thread* arriving);
// Every lane of `op.arrived` is at the warp's collective `op`.
void check_warp(const Launch& l, const Block& b, int warp, const WarpOp& op);

// The profiler's side (profile.cpp), called by the checker's.
void profile_launch_begin(const Launch& l);
void profile_block_begin(const Launch& l);
void profile_access(const Launch& l, std::uintptr_t address, unsigned size, bool write, bool shared, const void* pc);
void profile_block_end();
void profile_barrier(const Block& b);
void profile_warp_collective();

}  // namespace cudasim::detail
