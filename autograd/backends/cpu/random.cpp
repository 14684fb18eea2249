// Random fills of a contiguous tensor: element i takes the bits random_bits(seed, offset, i), whichever
// thread computes it, so the result does not depend on the thread count.
#include <cmath>

#include "autograd/random.h"
#include "cpu_backend.h"
#include "strided.h"

namespace stepformer::cpu {

void CpuBackend::random_fill(const TensorDesc& out, Distribution dist, double a, double b, std::uint64_t seed,
                             std::uint64_t offset) {
  const std::int64_t n = out.numel();
  dispatch_floating(out.dtype, "random_fill", [&](auto t) {
    using T = decltype(t);
    T* o = ptr<T>(out);
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
    for (std::int64_t i = 0; i < n; ++i) {
      const std::uint64_t bits = random_bits(seed, offset, static_cast<std::uint64_t>(i));
      T v{};
      switch (dist) {
        case Distribution::uniform:
          v = static_cast<T>(a + (b - a) * uniform01(bits));
          if (v >= static_cast<T>(b) && a < b) v = std::nextafter(static_cast<T>(b), static_cast<T>(a));  // [a, b)
          break;
        case Distribution::normal: v = static_cast<T>(a + b * standard_normal(bits)); break;
        case Distribution::dropout: v = static_cast<T>(uniform01(bits) < a ? 0.0 : 1.0 / (1.0 - a)); break;
      }
      o[i] = v;
    }
  });
}

}  // namespace stepformer::cpu
