// Reductions: each output element walks the reduced sub-space of the input. Float sums accumulate in
// double, so the result does not depend on the order a faster kernel may choose later.
#include <algorithm>
#include <limits>
#include <vector>

#include "cpu_backend.h"
#include "strided.h"

namespace stepformer::cpu {

void CpuBackend::reduce(ReduceOp op, const TensorDesc& out, const TensorDesc& in) {
  // Split the dims into kept (out.shape == in.shape) and reduced (out.shape == 1 < in.shape).
  std::vector<int> kept, reduced;
  for (int d = 0; d < in.ndim; ++d) (out.shape[d] == 1 && in.shape[d] != 1 ? reduced : kept).push_back(d);
  std::int64_t count = 1;
  for (int d : reduced) count *= in.shape[d];
  const std::int64_t n_out = out.numel();

  dispatch_all(in.dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, bool>) {
      throw DTypeError("cpu backend: cannot reduce a bool tensor");
    } else {
      using Acc = std::conditional_t<std::is_floating_point_v<T>, double, std::int64_t>;
#pragma omp parallel for schedule(static) if (n_out * count >= kParallelGrain)
      for (std::int64_t o = 0; o < n_out; ++o) {
        std::int64_t in_base = 0, out_off = 0, r = o;
        for (auto it = kept.rbegin(); it != kept.rend(); ++it) {
          const std::int64_t i = r % in.shape[*it];
          r /= in.shape[*it];
          in_base += i * in.strides[*it];
          out_off += i * out.strides[*it];
        }
        Acc acc = op == ReduceOp::sum ? Acc(0) : static_cast<Acc>(std::numeric_limits<T>::lowest());
        bool nan = false;
        for (std::int64_t j = 0; j < count; ++j) {
          std::int64_t off = in_base, q = j;
          for (auto it = reduced.rbegin(); it != reduced.rend(); ++it) {
            off += (q % in.shape[*it]) * in.strides[*it];
            q /= in.shape[*it];
          }
          const T x = ptr<T>(in)[off];
          if (op == ReduceOp::sum) {
            acc += static_cast<Acc>(x);
          } else {
            nan |= x != x;  // max propagates NaN, as torch.amax
            acc = std::max(acc, static_cast<Acc>(x));
          }
        }
        ptr<T>(out)[out_off] = nan ? std::numeric_limits<T>::quiet_NaN() : static_cast<T>(acc);
      }
    }
  });
}

}  // namespace stepformer::cpu
