// Host memory for the CPU device: 64-byte aligned (a cache line; what AVX-512 loads like best).
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

#include "autograd/errors.h"
#include "cpu_backend.h"

namespace stepformer {
namespace cpu {

void* CpuBackend::allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  const std::size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (p == nullptr)
    throw ResourceError(fmt::format("cpu: out of memory allocating {} bytes ({} in use)", bytes, bytes_in_use()));
  bytes_in_use_ += bytes;
  return p;
}

void CpuBackend::deallocate(void* ptr, std::size_t bytes) {
  if (ptr == nullptr) return;
  std::free(ptr);
  bytes_in_use_ -= bytes;
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
