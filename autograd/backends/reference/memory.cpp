// Host memory from malloc, handed back to the system at once on free.
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

#include "autograd/errors.h"
#include "reference_backend.h"

namespace stepformer::reference {

void* ReferenceBackend::allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = std::malloc(bytes);
  if (p == nullptr) throw ResourceError(fmt::format("reference: out of memory allocating {} bytes", bytes));
  bytes_in_use_ += bytes;
  return p;
}

void ReferenceBackend::deallocate(void* ptr, std::size_t bytes) {
  if (ptr == nullptr) return;
  bytes_in_use_ -= bytes;
  std::free(ptr);
}

void ReferenceBackend::copy_from_host(void* dst, const void* src, std::size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}
void ReferenceBackend::copy_to_host(void* dst, const void* src, std::size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}

}  // namespace stepformer::reference

namespace stepformer {
Backend& reference_backend() {
  static auto* instance = new reference::ReferenceBackend;  // never destroyed: static tensors may free memory at exit
  return *instance;
}
}  // namespace stepformer
