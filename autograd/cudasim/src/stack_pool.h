#pragma once
// The stacks of cuda-sim's fibers (cudasim.cpp), one pool per OS thread that runs blocks.
#include <sanitizer/asan_interface.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "scheduler.h"

namespace cudasim::detail {

// Fiber stacks with a guard page below them (an overflow is a SIGSEGV, not corruption), kept in a pool:
// a block of 1024 threads would otherwise map and unmap 1024 stacks. Size: STEPFORMER_CUDASIM_STACK
// bytes, 64 KiB by default (large local arrays need more).
class StackPool {
 public:
  StackPool() {
    const char* env = std::getenv("STEPFORMER_CUDASIM_STACK");
    const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    size_ = env ? std::strtoull(env, nullptr, 10) : 64 * 1024;
    size_ = (size_ + page - 1) / page * page;
    page_ = page;
  }
  ~StackPool() {
    for (void* base : free_) munmap(base, size_ + page_);
  }
  // The top of a stack (16-byte aligned; it grows down from there).
  void* allocate() {
    void* base = nullptr;
    if (!free_.empty()) {
      base = free_.back();
      free_.pop_back();
    } else {
      base = mmap(nullptr, size_ + page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (base == MAP_FAILED) fail("cannot map a fiber stack");
      mprotect(base, page_, PROT_NONE);  // the guard page, at the low end: stacks grow down
    }
    // Under AddressSanitizer: a fiber abandoned when its launch ended by an exception leaves its frames'
    // redzones poisoned (ASan cannot clear them on a stack it does not know); the next fiber on this stack must
    // not inherit them. A no-op without ASan.
    ASAN_UNPOISON_MEMORY_REGION(static_cast<char*>(base) + page_, size_);
    return static_cast<char*>(base) + page_ + size_;
  }
  // Back to the pool; nothing maps or reuses it until the next allocate() on this OS thread, so a fiber may give
  // back its own stack just before it switches away for the last time.
  void deallocate(void* top) { free_.push_back(static_cast<char*>(top) - size_ - page_); }

 private:
  std::size_t size_ = 0, page_ = 0;
  std::vector<void*> free_;
};

}  // namespace cudasim::detail
