// Random fills of a contiguous tensor: element i takes the bits random_bits(seed, offset, i), whichever
// thread computes it, so the result does not depend on the thread count. One loop per distribution, in
// multi-versioned functions, so that the Philox rounds run 8 or 16 elements at a time.
#include <cmath>

#include "autograd/random.h"
#include "cpu_backend.h"
#include "strided.h"
#include "vmath.h"

namespace stepformer::cpu {

namespace {

template <class T>
[[gnu::always_inline]] inline void fill_range(T* o, std::int64_t i0, std::int64_t i1, Distribution dist, double a,
                                              double b, std::uint64_t seed, std::uint64_t offset) {
  switch (dist) {
    case Distribution::uniform:
      for (std::int64_t i = i0; i < i1; ++i) {
        T v = static_cast<T>(a + (b - a) * uniform01(random_bits(seed, offset, static_cast<std::uint64_t>(i))));
        if (v >= static_cast<T>(b) && a < b) v = std::nextafter(static_cast<T>(b), static_cast<T>(a));  // [a, b)
        o[i] = v;
      }
      break;
    case Distribution::normal:
      for (std::int64_t i = i0; i < i1; ++i)
        o[i] = static_cast<T>(a + b * standard_normal(random_bits(seed, offset, static_cast<std::uint64_t>(i))));
      break;
    case Distribution::dropout: {
      const T scale = static_cast<T>(1.0 / (1.0 - a));
      for (std::int64_t i = i0; i < i1; ++i)
        o[i] = uniform01(random_bits(seed, offset, static_cast<std::uint64_t>(i))) < a ? T(0) : scale;
      break;
    }
  }
}

STEPFORMER_SIMD_CLONES void fill_chunk(float* o, std::int64_t i0, std::int64_t i1, Distribution dist, double a,
                                       double b, std::uint64_t seed, std::uint64_t offset) {
  fill_range(o, i0, i1, dist, a, b, seed, offset);
}
void fill_chunk(double* o, std::int64_t i0, std::int64_t i1, Distribution dist, double a, double b, std::uint64_t seed,
                std::uint64_t offset) {
  fill_range(o, i0, i1, dist, a, b, seed, offset);
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
