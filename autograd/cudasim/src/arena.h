#pragma once
// Device memory of the checking build and its shadow (check.cpp reads and writes the shadow at every access).
//
// Arena: one reserved stretch of address space; each allocation gets fresh pages and a page of gap after it;
// freed pages are returned but their addresses never reused, so a use after free is always seen as one.
// Shadow: per byte, the last write and the last two reads from different threads (an Access: launch, block,
// thread, barrier epoch, warp epoch, atomic or not) and when it was last written (initcheck).
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "scheduler.h"

namespace cudasim::detail {

struct Access {
  std::uint32_t launch = 0, block = 0, epoch = 0;
  std::uint16_t thread = 0, warp_epoch = 0;
  bool atomic = false;
};

struct Cell {
  Access write, read, other_read;                       // other_read: the last reader that is not `read`'s thread
  std::uint32_t written_launch = 0, written_block = 0;  // global: written at all; shared: by this block
};

inline constexpr std::uint32_t kByHost = 0xffffffffu;

struct Allocation {
  std::size_t bytes = 0;
  bool freed = false;
  bool host_wrote_all = false;  // a copy covered it whole before any shadow existed
  std::vector<Cell> shadow;     // created when a kernel (or a partial copy) first touches it
};

class Arena {
 public:
  static constexpr std::size_t kReserve = std::size_t{1} << 40;
  bool contains(std::uintptr_t a) const { return a - base_ < kReserve; }

  void* allocate(std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (base_ == 0) reserve();
    const std::size_t span = round(bytes == 0 ? 1 : bytes);
    if (next_ + span + page_ > kReserve) fail("checking build: the device arena's 1 TiB of addresses is used up");
    char* p = reinterpret_cast<char*>(base_ + next_);
    if (mprotect(p, span, PROT_READ | PROT_WRITE) != 0) fail("checking build: cannot commit device memory");
    next_ += span + page_;
    std::memset(p, 0xFF, span);  // fresh device memory is garbage: NaN
    Allocation& a = table_[reinterpret_cast<std::uintptr_t>(p)];
    a.bytes = bytes;
    return p;
  }

  void free(void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = table_.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (it == table_.end() || it->second.freed) fail(fmt::format("device_free({}): not a live device allocation", ptr));
    const std::size_t span = round(it->second.bytes == 0 ? 1 : it->second.bytes);
    madvise(ptr, span, MADV_DONTNEED);
    mprotect(ptr, span, PROT_NONE);  // host code touching it now faults
    it->second.freed = true;
    std::vector<Cell>().swap(it->second.shadow);
  }

  // The allocation whose bytes contain `a`, else null (and `nearest` the closest one, live or freed).
  std::pair<std::uintptr_t, Allocation*> find(std::uintptr_t a, std::pair<std::uintptr_t, Allocation*>* nearest) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = table_.upper_bound(a);
    Allocation* below = nullptr;
    std::uintptr_t below_start = 0;
    if (it != table_.begin()) {
      auto prev = std::prev(it);
      below_start = prev->first, below = &prev->second;
      if (a < below_start + std::max<std::size_t>(below->bytes, 1)) return {below_start, below};
    }
    if (nearest) {
      const bool take_below = below && (it == table_.end() || a - (below_start + below->bytes) < it->first - a);
      *nearest = take_below           ? std::pair{below_start, below}
                 : it != table_.end() ? std::pair{it->first, &it->second}
                                      : std::pair<std::uintptr_t, Allocation*>{0, nullptr};
    }
    return {0, nullptr};
  }

 private:
  std::size_t round(std::size_t bytes) const { return (bytes + page_ - 1) / page_ * page_; }
  void reserve() {
    page_ = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    void* p = mmap(nullptr, kReserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) fail("checking build: cannot reserve address space for device memory");
    base_ = reinterpret_cast<std::uintptr_t>(p);
  }

  std::mutex mutex_;
  std::uintptr_t base_ = 0;
  std::size_t next_ = 0, page_ = 4096;
  std::map<std::uintptr_t, Allocation> table_;
};

inline Arena& arena() {
  static Arena* a = new Arena;  // never destroyed: device memory may be freed during static destruction
  return *a;
}

// The shadow of an allocation, made when a kernel (or a partial copy) first touches it.
inline std::vector<Cell>& shadow_of(Allocation& a) {
  if (a.shadow.empty()) {
    a.shadow.resize(a.bytes);
    if (a.host_wrote_all)
      for (Cell& c : a.shadow) c.written_launch = kByHost;
  }
  return a.shadow;
}

}  // namespace cudasim::detail
