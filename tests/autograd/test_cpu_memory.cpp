// The CPU device's caching allocator (autograd/backends/cpu/memory.cpp): which cached block serves a request.
#include "../helpers.h"
#include "cpu_backend.h"

using stepformer::cpu::size_class;

TEST_CASE("the CPU allocator's classes: 64-byte steps to 4 KB, then powers of two", "[tensor]") {
  CHECK(size_class(1) == 64);
  CHECK(size_class(64) == 64);
  CHECK(size_class(65) == 128);
  CHECK(size_class(4096) == 4096);
  CHECK(size_class(4097) == 8192);
  // A backward's request between two of its forward's sizes takes the forward's freed block: one class
  // from just above 4 MiB to 8 MiB (the base step's [1024, 2048] float32 hidden units are 8 MiB).
  constexpr std::size_t MiB = std::size_t{1} << 20;
  CHECK(size_class(4 * MiB + 1) == 8 * MiB);
  CHECK(size_class(5 * MiB) == size_class(6 * MiB + 12345));
  CHECK(size_class(8 * MiB) == 8 * MiB);
  CHECK(size_class(8 * MiB + 1) == 16 * MiB);
}
