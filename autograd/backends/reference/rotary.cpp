// rotate_pairs, one output element at a time: element j of row t is one coordinate of pair p, rotated with its
// partner by ../elementwise_math.h's rotate_pair, in double.
#include "../elementwise_math.h"
#include "reference_backend.h"
#include "strided.h"

namespace stepformer::reference {

void ReferenceBackend::rotate_pairs(const TensorDesc& y, const TensorDesc& x, const TensorDesc& cos,
                                    const TensorDesc& sin, RopePairing pairing, bool inverse) {
  const int last = x.ndim - 1;
  const std::int64_t pairs = x.shape[last] / 2;
  const bool half = pairing == RopePairing::half;
  dispatch_floating(x.dtype, "rotate_pairs", [&](auto t) {
    using T = decltype(t);
    for_each_index(x, [&](const Index& i) {
      const std::int64_t row = i.i[last - 1], j = i.i[last];
      const std::int64_t p = half ? j % pairs : j / 2;
      Index first = i, second = i;
      first.i[last] = half ? p : 2 * p;
      second.i[last] = half ? p + pairs : 2 * p + 1;
      const double c = flat<T>(cos, row * pairs + p), s = flat<T>(sin, row * pairs + p);
      double ra = 0, rb = 0;
      rotate_pair<double>(at<T>(x, first), at<T>(x, second), c, inverse ? -s : s, ra, rb);
      at<T>(y, i) = static_cast<T>(j == first.i[last] ? ra : rb);
    });
  });
}

}  // namespace stepformer::reference
