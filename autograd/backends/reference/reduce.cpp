// Reductions: out has in's ndim, with size 1 in every reduced dim. Each input element is added into (or
// compared with) the output element at its own index with the reduced dims set to 0. Float sums in double,
// int64 sums in int64 (exact); max lets NaN win, as torch.max.
#include <cmath>
#include <limits>
#include <vector>

#include "reference_backend.h"
#include "strided.h"

namespace stepformer::reference {

void ReferenceBackend::reduce(ReduceOp op, const TensorDesc& out, const TensorDesc& in) {
  dispatch_all(in.dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, bool>) {
      throw DTypeError("reference backend: cannot reduce a bool tensor");
    } else {
      using Acc = std::conditional_t<std::is_floating_point_v<T>, double, std::int64_t>;
      // One accumulator per output element, found by its flat (row-major) position in out's shape.
      auto flat_position = [&](const Index& i) {
        std::int64_t pos = 0;
        for (int k = 0; k < out.ndim; ++k) pos = pos * out.shape[k] + (out.shape[k] == 1 ? 0 : i.i[k]);
        return pos;
      };
      const bool sum = op == ReduceOp::sum;
      std::vector<Acc> acc(static_cast<std::size_t>(out.numel()),
                           sum ? Acc(0) : static_cast<Acc>(std::numeric_limits<T>::lowest()));
      std::vector<bool> nan(acc.size(), false);
      for_each_index(in, [&](const Index& i) {
        const auto pos = static_cast<std::size_t>(flat_position(i));
        const T x = at<T>(in, i);
        if constexpr (std::is_floating_point_v<T>)
          if (std::isnan(x)) nan[pos] = true;
        acc[pos] = sum ? acc[pos] + static_cast<Acc>(x) : std::max(acc[pos], static_cast<Acc>(x));
      });
      std::size_t pos = 0;
      for_each_index(out, [&](const Index& i) {
        at<T>(out, i) = nan[pos] && !sum ? std::numeric_limits<T>::quiet_NaN() : static_cast<T>(acc[pos]);
        ++pos;
      });
    }
  });
}

}  // namespace stepformer::reference
