#pragma once
// The OS threads that run a grid's blocks side by side (cudasim.cpp, run_grid). A GPU runs blocks
// concurrently and orders nothing between them, so a kernel free of races gives the same bits whichever OS
// thread runs which block; within a block nothing changes (one OS thread, the schedule's order).
#include <functional>

#include "cudasim/cudasim.h"

namespace cudasim::detail {

// Runs job(k) for k = 0 .. n - 1 at once: k = 0 on the calling thread, the others on pool threads kept between
// calls. Returns when all have returned; `job` must not throw.
void run_on_threads(unsigned n, const std::function<void(unsigned)>& job);

}  // namespace cudasim::detail
