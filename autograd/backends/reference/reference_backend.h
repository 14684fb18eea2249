#pragma once
// The reference backend: every kernel of the Backend interface (autograd/backend.h) as the plainest loop
// that is correct. No intrinsics, no OpenMP, no blocking, no multi-versioning; libm for every function;
// floating sums accumulated in double. Read it first: a kernel here is the definition of what the fast
// CPU kernel (backends/cpu) and the CUDA kernel (backends/cuda) of the same name must compute, and the
// tests hold both to it (tests/autograd/test_backend_oracle.cpp).
//
// It is also a device, `reference` (`--device reference` on every demo): the whole Transformer runs on
// these loops, slowly, and a debugger steps through kernels a learner can read in one screen each.
// Host memory, no caching allocator: a freed block goes straight back to the system.
#include <atomic>

#include "autograd/backend.h"

namespace stepformer::reference {

class ReferenceBackend final : public Backend {
 public:
  Device device() const override { return Device{DeviceType::reference, 0}; }

  STEPFORMER_BACKEND_KERNELS
  std::size_t bytes_in_use() const override { return bytes_in_use_.load(); }

 private:
  std::atomic<std::size_t> bytes_in_use_{0};
};

}  // namespace stepformer::reference
