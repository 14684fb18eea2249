// rotate_pairs over rows of D: x read through its strides (a permuted view of the heads needs no copy first), y
// written contiguous, each pair by ../elementwise_math.h's rotate_pair. With `half` pairing both halves of a row
// are unit-stride, so the row vectorises; `adjacent` pairs interleave. Rows are independent: one per thread at a
// time, so the result does not depend on the thread count.
#include "../elementwise_math.h"
#include "cpu_backend.h"
#include "strided.h"
#include "vmath.h"

namespace stepformer::cpu {

namespace {

template <class T>
[[gnu::always_inline]] inline void rotate_row(const T* x, T* y, const T* cos, const T* sin, std::int64_t pairs,
                                              bool half, T sign) {
  if (half)
    for (std::int64_t i = 0; i < pairs; ++i) rotate_pair(x[i], x[i + pairs], cos[i], sign * sin[i], y[i], y[i + pairs]);
  else
    for (std::int64_t i = 0; i < pairs; ++i)
      rotate_pair(x[2 * i], x[2 * i + 1], cos[i], sign * sin[i], y[2 * i], y[2 * i + 1]);
}

STEPFORMER_SIMD_CLONES void rotate(const float* x, float* y, const float* cos, const float* sin, std::int64_t pairs,
                                   bool half, float sign) {
  rotate_row(x, y, cos, sin, pairs, half, sign);
}
void rotate(const double* x, double* y, const double* cos, const double* sin, std::int64_t pairs, bool half,
            double sign) {
  rotate_row(x, y, cos, sin, pairs, half, sign);
}

}  // namespace

void CpuBackend::rotate_pairs(const TensorDesc& y, const TensorDesc& x, const TensorDesc& cos, const TensorDesc& sin,
                              RopePairing pairing, bool inverse) {
  const std::int64_t D = x.shape[x.ndim - 1], T = x.shape[x.ndim - 2], pairs = D / 2;
  if (D == 0) return;
  dispatch_floating(x.dtype, "rotate_pairs", [&](auto t) {
    using E = decltype(t);
    const E sign = inverse ? E(-1) : E(1);
    // y is contiguous, so its row offset over D is the row's index, and the index modulo T its position.
    for_each_row<2>({&y, &x}, [&](const std::array<std::int64_t, 2>& base, const auto&, std::int64_t) {
      const std::int64_t position = (base[0] / D) % T;
      rotate(ptr<E>(x) + base[1], ptr<E>(y) + base[0], ptr<E>(cos) + position * pairs, ptr<E>(sin) + position * pairs,
             pairs, pairing == RopePairing::half, sign);
    });
  });
}

}  // namespace stepformer::cpu
