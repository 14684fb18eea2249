#pragma once
// 64-byte aligned memory (a cache line) for the CPU backend's working buffers: new[] and std::vector give 16 bytes,
// and AMX's tile loads run at a third of their speed on rows that straddle two cache lines (docs/performance.md,
// "AMX"). The tensors' own storage is aligned the same way (memory.cpp).
#include <cstdlib>
#include <memory>
#include <new>

namespace stepformer::cpu {

struct FreeAligned {
  void operator()(void* p) const { std::free(p); }
};
template <class T>
using AlignedArray = std::unique_ptr<T[], FreeAligned>;

// n values of a trivial T, not initialised; null for n == 0.
template <class T>
AlignedArray<T> aligned_array(std::size_t n) {
  if (n == 0) return nullptr;
  void* p = std::aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64);
  if (!p) throw std::bad_alloc();
  return AlignedArray<T>(static_cast<T*>(p));
}

// A buffer kept between calls that grows to the largest size asked of it (what it held is not kept when it grows).
template <class T>
class AlignedBuffer {
 public:
  T* get(std::size_t n) {
    if (n > size_) data_ = aligned_array<T>(n), size_ = n;
    return data_.get();
  }

 private:
  AlignedArray<T> data_;
  std::size_t size_ = 0;
};

}  // namespace stepformer::cpu
