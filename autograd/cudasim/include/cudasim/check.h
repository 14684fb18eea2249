#pragma once
// cuda-sim as a kernel checker: racecheck, memcheck, initcheck and synccheck, without a GPU.
//
// In the checking build (CMake preset `cudasim-check`: clang with -fsanitize-coverage=trace-loads,trace-stores
// on the kernel sources), every load and store a kernel makes calls cuda-sim first, which knows the running
// CUDA thread and keeps a shadow of every byte of device and shared memory. The kernels' sources are
// unchanged. docs/09_cuda.md ("Checking kernels") shows a report of each kind and what the checks cannot see.
//
//  - race: two threads touch one address, at least one writes, no barrier orders them: in shared memory
//    (per block; __syncthreads starts a new epoch, __syncwarp one for its warp) and in global memory (the same
//    within a block; between different blocks always, as blocks run concurrently on a GPU). Atomics are not
//    races with each other.
//  - mem: a global access outside every live allocation (in a gap, past an end), into freed memory, or not
//    aligned to its size. The access does not happen: the launch ends, as a GPU's trap ends a grid.
//  - init: a read of shared memory no thread of this block wrote, or of device memory nothing wrote since it
//    was allocated (neither a kernel nor a copy from the host).
//  - sync: threads of one block released from __syncthreads at different call sites, or after some exited
//    without reaching it; lanes of one warp collective at different call sites.
//
// Switch the checks on with STEPFORMER_CUDASIM_CHECK=race,mem,init,sync (or `all`), or enable(). A launch
// with reports throws CheckError when it ends (reports are also printed to stderr and kept for
// take_reports()); STEPFORMER_CUDASIM_CHECK_ABORT=1 aborts at the first report instead; set_on_report(record)
// only keeps them (tests that expect reports use it). In the plain build instrumented() is false and enabling
// checks is an error: nothing would be seen.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "cudasim/cudasim.h"

namespace cudasim::check {

enum Checks : unsigned { none = 0, race = 1, mem = 2, init = 4, sync = 8, all = 15 };

struct Report {
  std::string checker;  // "racecheck", "memcheck", "initcheck", "synccheck"
  std::string kind;     // write-write, read-after-write, write-after-read, out of bounds, use after free,
                        // misaligned, uninitialised read, divergent barrier, divergent warp collective
  std::string kernel;   // the kernel's name, as the symbol table has it (namespaces and arguments dropped)
  uint3 block, thread;  // who made the access (or who waits where)
  bool has_other = false;
  uint3 other_block, other_thread;  // the other side of a race, or the thread elsewhere at a barrier
  std::string location;             // "shared a_tile + element 17", "allocation 0x... (1024 bytes) + element 256",
                                    // or a call site "test_checks.cpp:94"
  std::string message;              // everything above as one text, as printed
  int repeats = 0;                  // more reports of the same kind at the same code in the same launch
};

class CheckError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class OnReport { throw_after_launch, abort, record };

bool instrumented();
void enable(unsigned checks);  // throws std::logic_error when asked for checks in the plain build
unsigned enabled();
void set_on_report(OnReport what);
std::vector<Report> take_reports();  // and forgets them

}  // namespace cudasim::check
