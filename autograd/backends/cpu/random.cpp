// Random fills of a contiguous tensor: element i takes the bits random_bits(seed, offset, i), whichever
// thread computes it, so the result does not depend on the thread count. One loop per distribution, in
// multi-versioned functions, so that the Philox rounds run 8 or 16 elements at a time; dropout's mask, on a CPU with
// AVX-512F, in random_avx512.cpp's own loop (the same bits, twice the speed).
#include <cmath>

#include "autograd/random.h"
#include "cpu_backend.h"
#include "random_fill.h"
#include "strided.h"
#include "vmath.h"

namespace stepformer::cpu {

namespace {

template <class T>
[[gnu::always_inline]] inline void fill_range(T* o, std::int64_t i0, std::int64_t i1, Distribution dist, double a,
                                              double b, std::uint64_t seed, std::uint64_t offset) {
  switch (dist) {
    case Distribution::uniform:
      fill_pairs(o, i0, i1, seed, offset, [&](std::uint64_t bits) {
        const T v = static_cast<T>(a + (b - a) * uniform01(bits));
        return v >= static_cast<T>(b) && a < b ? std::nextafter(static_cast<T>(b), static_cast<T>(a)) : v;  // [a, b)
      });
      break;
    case Distribution::normal:
      fill_pairs(o, i0, i1, seed, offset,
                 [&](std::uint64_t bits) { return static_cast<T>(a + b * standard_normal(bits)); });
      break;
    case Distribution::dropout: {
      const T scale = static_cast<T>(1.0 / (1.0 - a));
      fill_pairs(o, i0, i1, seed, offset, [&](std::uint64_t bits) { return uniform01(bits) < a ? T(0) : scale; });
      break;
    }
  }
}

STEPFORMER_SIMD_CLONES void fill_chunk(float* o, std::int64_t i0, std::int64_t i1, Distribution dist, double a,
                                       double b, std::uint64_t seed, std::uint64_t offset) {
#if defined(__x86_64__)
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (dist == Distribution::dropout && a >= 0 && a < 1 && avx512) {  // i0 is even (a multiple of kChunk)
    const std::int64_t rest = dropout_mask_avx512(o + i0, i0, i1, a, seed, offset);
    return fill_range(o + rest, rest, i1, dist, a, b, seed, offset);
  }
#endif
  fill_range(o + i0, i0, i1, dist, a, b, seed, offset);
}
void fill_chunk(double* o, std::int64_t i0, std::int64_t i1, Distribution dist, double a, double b, std::uint64_t seed,
                std::uint64_t offset) {
  fill_range(o + i0, i0, i1, dist, a, b, seed, offset);
}

}  // namespace

void CpuBackend::random_fill(const TensorDesc& out, Distribution dist, double a, double b, std::uint64_t seed,
                             std::uint64_t offset) {
  const std::int64_t n = out.numel();
  dispatch_floating(out.dtype, "random_fill", [&](auto t) {
    using T = decltype(t);
    constexpr std::int64_t kChunk = 4096;
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
    for (std::int64_t i = 0; i < n; i += kChunk)
      fill_chunk(ptr<T>(out), i, std::min(n, i + kChunk), dist, a, b, seed, offset);
  });
}

}  // namespace stepformer::cpu
