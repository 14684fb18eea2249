// A launch's dynamic shared memory (scheduler.h, DynamicShared): a mapping per OS thread whose data lies between
// two inaccessible guards of kGuard bytes, so that an overflow either way stops there instead of landing in the
// host's heap.
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

#include "scheduler.h"

namespace cudasim::detail {

DynamicShared::~DynamicShared() {
  if (base_) munmap(base_, mapped_);
}

void DynamicShared::assign(std::size_t bytes, unsigned char value) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t aligned = (bytes + 15) / 16 * 16;  // data() stays 16-byte aligned, as CUDA's is
  const std::size_t pages = (aligned + page - 1) / page * page;
  if (pages + 2 * kGuard > mapped_) {
    if (base_) munmap(base_, mapped_);
    // Address space only: the guards are never backed by memory (MAP_NORESERVE, PROT_NONE).
    const std::size_t need = pages + 2 * kGuard;
    void* p = mmap(nullptr, need, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) fail(fmt::format("cannot reserve {} bytes for dynamic shared memory", need));
    base_ = static_cast<unsigned char*>(p), mapped_ = need;
    if (mprotect(base_ + kGuard, pages, PROT_READ | PROT_WRITE) != 0)
      fail(fmt::format("cannot map {} bytes of dynamic shared memory", bytes));
  }
  data_ = base_ + mapped_ - kGuard - aligned, bytes_ = bytes;
  std::fill(data_, data_ + aligned, value);
}

DynamicShared& dynamic_shared_memory() {
  thread_local DynamicShared memory;
  return memory;
}

}  // namespace cudasim::detail
