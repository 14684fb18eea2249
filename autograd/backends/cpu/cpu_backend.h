#pragma once
// The CPU backend: every kernel of the Backend interface, simple and correct, OpenMP on the obvious
// loops. One file per kernel family; the CUDA backend uses the same file names.
#include <atomic>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "autograd/backend.h"

namespace stepformer::cpu {

// The size of the cached block that serves a request of `bytes` (memory.cpp).
std::size_t size_class(std::size_t bytes);

class CpuBackend final : public Backend {
 public:
  Device device() const override { return kCPU; }

  STEPFORMER_BACKEND_KERNELS
  std::size_t bytes_in_use() const override { return bytes_in_use_.load(); }
  void release_cache();  // memory.cpp: gives every cached free block back to the system

 private:
  std::atomic<std::size_t> bytes_in_use_{0};
  std::mutex cache_mutex_;
  std::unordered_map<std::size_t, std::vector<void*>> cache_;  // size class -> free blocks
  std::size_t cached_bytes_ = 0;
};

}  // namespace stepformer::cpu
