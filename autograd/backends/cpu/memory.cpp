// Host memory for the CPU device: 64-byte aligned (a cache line; what AVX-512 loads like best).
#include <fmt/format.h>

#include <bit>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "autograd/errors.h"
#include "cpu_backend.h"

namespace stepformer {
namespace cpu {

// A caching allocator, as PyTorch's CUDA one: a freed block goes to a free list of its size class and
// the next allocation of that class takes it back, so a training loop, which asks for the same shapes at
// every step, stops calling malloc (and stops the kernel zeroing fresh pages) after its first step.
// Size classes: 64-byte multiples up to 4 KB, then powers of two (size_class).
// At most kMaxCached bytes wait in the lists; beyond that, blocks go back to the system. A failed
// allocation empties the cache and tries once more. Under AddressSanitizer the cache is off, so that
// every use after free is still caught.
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCache = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kCache = false;
#else
constexpr bool kCache = true;
#endif
#else
constexpr bool kCache = true;
#endif

constexpr std::size_t kMaxCached = std::size_t{1} << 30;

}  // namespace

// Above 4 KB a class is a whole power of two, though up to half of a block may go unused: the pages of a block
// become resident only as far as the requests it served have written, so the unused half costs address space,
// not memory. What costs memory is a freed block that no later request fits: a training step's backward asks for
// sizes its forward did not, and with 8 classes per power of two 343 MiB of the base step's peak were such blocks
// (docs/performance.md, "Peak memory of the base step").
std::size_t size_class(std::size_t bytes) {
  if (bytes <= 4096) return (bytes + 63) / 64 * 64;
  return std::bit_ceil(bytes);
}

void* CpuBackend::allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  const std::size_t size = size_class(bytes);
  if (kCache) {
    std::lock_guard lock(cache_mutex_);
    auto it = cache_.find(size);
    if (it != cache_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      cached_bytes_ -= size;
      bytes_in_use_ += bytes;
      return p;
    }
  }
  void* p = std::aligned_alloc(64, size);
  if (p == nullptr && kCache) {
    release_cache();
    p = std::aligned_alloc(64, size);
  }
  if (p == nullptr)
    throw ResourceError(fmt::format("cpu: out of memory allocating {} bytes ({} in use)", bytes, bytes_in_use()));
  bytes_in_use_ += bytes;
  return p;
}

void CpuBackend::deallocate(void* ptr, std::size_t bytes) {
  if (ptr == nullptr) return;
  bytes_in_use_ -= bytes;
  const std::size_t size = size_class(bytes);
  if (kCache) {
    std::lock_guard lock(cache_mutex_);
    if (cached_bytes_ + size <= kMaxCached) {
      cache_[size].push_back(ptr);
      cached_bytes_ += size;
      return;
    }
  }
  std::free(ptr);
}

void CpuBackend::release_cache() {
  std::lock_guard lock(cache_mutex_);
  for (auto& [size, blocks] : cache_)
    for (void* p : blocks) std::free(p);
  cache_.clear();
  cached_bytes_ = 0;
}

void CpuBackend::copy_from_host(void* dst, const void* src, std::size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}
void CpuBackend::copy_to_host(void* dst, const void* src, std::size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}

}  // namespace cpu

Backend& cpu_backend() {
  // Never destroyed: tensors in static objects may free their memory during static destruction.
  static auto* backend = new cpu::CpuBackend;
  return *backend;
}

}  // namespace stepformer
