#pragma once
// Counter-based random values for a run of elements, for the CPU kernels that draw them (random fills, the
// dropout of flash attention): Philox blocks computed once per pair of elements, in a loop that the
// multi-versioned callers vectorise.
#include <cstdint>

#include "autograd/random.h"

namespace stepformer::cpu {

// o[i - i0] = make(random_bits(seed, offset, i)) for i in [i0, i1). Elements 2j and 2j+1 take the two halves of
// one Philox block (random_bits, autograd/random.h): the block is computed once for both, not once each.
template <class T, class Make>
[[gnu::always_inline]] inline void fill_pairs(T* o, std::int64_t i0, std::int64_t i1, std::uint64_t seed,
                                              std::uint64_t offset, Make make) {
  std::int64_t i = i0;
  if (i < i1 && i % 2) o[i - i0] = make(random_bits(seed, offset, static_cast<std::uint64_t>(i))), ++i;
  for (; i + 1 < i1; i += 2) {
    const Philox4x32 r = philox4x32_10(offset / 4 + static_cast<std::uint64_t>(i) / 2, seed);
    o[i - i0] = make((std::uint64_t{r.v[0]} << 32) | r.v[1]);
    o[i + 1 - i0] = make((std::uint64_t{r.v[2]} << 32) | r.v[3]);
  }
  if (i < i1) o[i - i0] = make(random_bits(seed, offset, static_cast<std::uint64_t>(i)));
}

#if defined(__x86_64__)
// Dropout's mask (0 with probability p, else 1 / (1 - p)) of elements [i, i1) into o[0, ...), i even, 0 <= p < 1:
// fill_pairs' values, 16 at a time, on a CPU with AVX-512F (random_avx512.cpp). Returns the first element it did not
// write (fewer than 16 are left).
std::int64_t dropout_mask_avx512(float* o, std::int64_t i, std::int64_t i1, double p, std::uint64_t seed,
                                 std::uint64_t offset);
#endif

}  // namespace stepformer::cpu
