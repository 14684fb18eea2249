// A launch's dynamic shared memory (scheduler.h, DynamicShared): a mapping per OS thread whose data ends at an
// inaccessible guard page, so that an overflow stops there instead of landing in the host's heap.
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
  const std::size_t need = (aligned + page - 1) / page * page + page;
  if (need > mapped_) {
    if (base_) munmap(base_, mapped_);
    void* p = mmap(nullptr, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) fail(fmt::format("cannot map {} bytes of dynamic shared memory", bytes));
    base_ = static_cast<unsigned char*>(p), mapped_ = need;
    if (mprotect(base_ + mapped_ - page, page, PROT_NONE) != 0)
      fail("cannot protect the dynamic shared memory's guard");
  }
  data_ = base_ + mapped_ - page - aligned, bytes_ = bytes;
  std::fill(data_, data_ + aligned, value);
}

DynamicShared& dynamic_shared_memory() {
  thread_local DynamicShared memory;
  return memory;
}

}  // namespace cudasim::detail
