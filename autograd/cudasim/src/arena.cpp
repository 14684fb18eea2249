// cuda-sim's device memory: device_allocate, device_free and copy_to_device (cudasim.h). The checking build
// takes it from the Arena (arena.h), so that memcheck knows every allocation's bounds; the plain build from
// aligned_alloc, as cudaMalloc aligns.
#include <cstdlib>
#include <cstring>

#include "arena.h"
#include "cudasim/cudasim.h"

namespace cudasim {

using namespace detail;

#if defined(CUDASIM_CHECK)
void* device_allocate(std::size_t bytes) { return arena().allocate(bytes); }
void device_free(void* ptr) {
  if (ptr) arena().free(ptr);
}
void copy_to_device(void* dst, const void* host_src, std::size_t bytes) {
  if (bytes == 0) return;
  std::memcpy(dst, host_src, bytes);
  const auto a = reinterpret_cast<std::uintptr_t>(dst);
  const auto [start, found] = arena().find(a, nullptr);
  if (found == nullptr || found->freed || a + bytes > start + found->bytes)
    fail(fmt::format("copy_to_device: {} bytes at {} are not inside one live device allocation", bytes, dst));
  if (a == start && bytes == found->bytes && found->shadow.empty()) {
    found->host_wrote_all = true;
    return;
  }
  std::vector<Cell>& cells = shadow_of(*found);
  for (std::size_t k = a - start; k < a - start + bytes; ++k) cells[k].written_launch = kByHost;
}
#else
void* device_allocate(std::size_t bytes) {
  const std::size_t size = (bytes + 255) / 256 * 256;  // cudaMalloc's alignment
  void* p = std::aligned_alloc(256, size == 0 ? 256 : size);
  if (p) std::memset(p, 0xFF, size);  // fresh device memory is garbage: make a read-before-write show up as NaN
  return p;
}
void device_free(void* ptr) { std::free(ptr); }
void copy_to_device(void* dst, const void* host_src, std::size_t bytes) {
  if (bytes) std::memcpy(dst, host_src, bytes);
}
#endif

}  // namespace cudasim
