// Random fills: element i of the fill gets the bits random_bits(seed, offset, i) (autograd/random.h), so
// the reference, the CPU and the CUDA kernels all draw exactly the same numbers.
#include <cmath>

#include "../elementwise_math.h"
#include "autograd/random.h"
#include "reference_backend.h"
#include "strided.h"

namespace stepformer::reference {

void ReferenceBackend::random_fill(const TensorDesc& out, Distribution dist, double a, double b, std::uint64_t seed,
                                   std::uint64_t offset) {
  dispatch_floating(out.dtype, "random_fill", [&](auto t) {
    using T = decltype(t);
    for (std::int64_t i = 0; i < out.numel(); ++i) {
      const std::uint64_t bits = random_bits(seed, offset, static_cast<std::uint64_t>(i));
      T& o = flat<T>(out, i);
      switch (dist) {
        case Distribution::uniform:  // U[a, b): a value that rounds up to b is moved just below it
          o = static_cast<T>(a + (b - a) * uniform01(bits));
          if (o >= static_cast<T>(b) && a < b) o = nextafter_(static_cast<T>(b), static_cast<T>(a));
          break;
        case Distribution::normal: o = static_cast<T>(a + b * standard_normal(bits)); break;
        case Distribution::dropout:  // zero with probability a, else 1 / (1 - a) (inverted dropout)
          o = uniform01(bits) < a ? T(0) : static_cast<T>(1.0 / (1.0 - a));
          break;
      }
    }
  });
}

}  // namespace stepformer::reference
