// Reductions. Float sums accumulate in double, each output element's terms added in the input's index
// order, so the three paths below give bit-identical results and none depends on the thread count:
//  - a dense input reduced over its leading dims ([R, K] -> [K], a bias gradient): rows are added to a
//    row of accumulators, unit stride, threads splitting the columns;
//  - a dense input reduced over its trailing dims ([K, R] -> [K], a per-row sum): one run per output;
//  - anything else: each output element walks the reduced sub-space of the input by its strides.
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

  // Dense input, and are the reduced dims (ignoring size-1 dims) all before, or all after, the kept ones?
  bool dense = true, reduced_first = true, reduced_last = true;
  for (std::int64_t d = in.ndim - 1, expect = 1; d >= 0; --d) {
    if (in.shape[d] != 1 && in.strides[d] != expect) dense = false;
    expect *= in.shape[d];
  }
  bool out_dense = true;
  for (std::int64_t d = out.ndim - 1, expect = 1; d >= 0; --d) {
    if (out.shape[d] != 1 && out.strides[d] != expect) out_dense = false;
    expect *= out.shape[d];
  }
  for (int d : kept)
    for (int e : reduced)
      if (in.shape[d] != 1) (e < d ? reduced_last : reduced_first) = false;

  dispatch_all(in.dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, bool>) {
      throw DTypeError("cpu backend: cannot reduce a bool tensor");
    } else {
      using Acc = std::conditional_t<std::is_floating_point_v<T>, double, std::int64_t>;
      const bool sum = op == ReduceOp::sum;
      const Acc init = sum ? Acc(0) : static_cast<Acc>(std::numeric_limits<T>::lowest());
      auto combine = [sum](Acc acc, T x) { return sum ? acc + static_cast<Acc>(x) : std::max(acc, static_cast<Acc>(x)); };
      const T* x = ptr<T>(in);
      T* y = ptr<T>(out);
      if (dense && out_dense && n_out > 1 && count > 1 && (reduced_first || reduced_last)) {
        if (reduced_first) {  // [count, n_out] -> [n_out]
          constexpr std::int64_t kColumns = 512;
#pragma omp parallel for schedule(static) if (n_out * count >= kParallelGrain)
          for (std::int64_t j0 = 0; j0 < n_out; j0 += kColumns) {
            const std::int64_t width = std::min(kColumns, n_out - j0);
            Acc acc[kColumns];
            bool nan[kColumns] = {};
            std::fill(acc, acc + width, init);
            for (std::int64_t i = 0; i < count; ++i) {
              const T* row = x + i * n_out + j0;
              for (std::int64_t j = 0; j < width; ++j) {
                if (!sum) nan[j] |= row[j] != row[j];
                acc[j] = combine(acc[j], row[j]);
              }
            }
            for (std::int64_t j = 0; j < width; ++j)
              y[j0 + j] = nan[j] ? std::numeric_limits<T>::quiet_NaN() : static_cast<T>(acc[j]);
          }
        } else {  // [n_out, count] -> [n_out]
#pragma omp parallel for schedule(static) if (n_out * count >= kParallelGrain)
          for (std::int64_t o = 0; o < n_out; ++o) {
            Acc acc = init;
            bool nan = false;
            for (std::int64_t j = 0; j < count; ++j) {
              if (!sum) nan |= x[o * count + j] != x[o * count + j];
              acc = combine(acc, x[o * count + j]);
            }
            y[o] = nan ? std::numeric_limits<T>::quiet_NaN() : static_cast<T>(acc);
          }
        }
        return;
      }
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
