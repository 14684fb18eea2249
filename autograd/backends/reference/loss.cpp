// Cross-entropy over rows of C logits, with label smoothing s: the row's log-sum-exp and sum in double, plainly,
// then ../elementwise_math.h's smoothed_cross_entropy(_grad) (the formulas every backend shares), in double.
#include <algorithm>
#include <cmath>

#include "../elementwise_math.h"
#include "reference_backend.h"
#include "strided.h"

namespace stepformer::reference {

namespace {
template <class T>
double log_sum_exp(const T* x, std::int64_t C) {
  double m = x[0];
  for (std::int64_t c = 1; c < C; ++c) m = std::max(m, static_cast<double>(x[c]));
  double s = 0;
  for (std::int64_t c = 0; c < C; ++c) s += std::exp(x[c] - m);
  return m + std::log(s);
}
}  // namespace

std::int64_t ReferenceBackend::cross_entropy_forward(const TensorDesc& loss, const TensorDesc& lse_out,
                                                     const TensorDesc& logits, const TensorDesc& targets,
                                                     std::int64_t ignore_index, double smoothing,
                                                     const DescribeBadIndex& /*reported by the op*/) {
  const std::int64_t rows = row_count(logits), C = row_length(logits);
  for (std::int64_t i = 0; i < rows; ++i) {
    const std::int64_t t = flat<std::int64_t>(targets, i);
    if (t != ignore_index && (t < 0 || t >= C)) return i;
  }
  dispatch_floating(logits.dtype, "cross_entropy_forward", [&](auto tag) {
    using T = decltype(tag);
    for (std::int64_t i = 0; i < rows; ++i) {
      const std::int64_t t = flat<std::int64_t>(targets, i);
      const T* x = &flat<T>(logits, i * C);
      const double lse = log_sum_exp(x, C);
      flat<T>(lse_out, i) = static_cast<T>(lse);
      double sum_x = 0;
      for (std::int64_t c = 0; c < C; ++c) sum_x += x[c];
      const double x_target = t >= 0 && t < C ? static_cast<double>(x[t]) : 0.0;  // ignore_index may be any number
      flat<T>(loss, i) = static_cast<T>(
          smoothed_cross_entropy(t == ignore_index, x_target, sum_x, lse, static_cast<double>(C), smoothing));
    }
  });
  return -1;
}

void ReferenceBackend::cross_entropy_backward(const TensorDesc& dlogits, const TensorDesc& logits,
                                              const TensorDesc& lse_in, const TensorDesc& targets,
                                              const TensorDesc& grad_loss, std::int64_t ignore_index,
                                              double smoothing) {
  const std::int64_t rows = row_count(logits), C = row_length(logits);
  dispatch_floating(logits.dtype, "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    for (std::int64_t i = 0; i < rows; ++i) {
      const std::int64_t t = flat<std::int64_t>(targets, i);
      const T* x = &flat<T>(logits, i * C);
      T* d = &flat<T>(dlogits, i * C);
      Index at_i;
      at_i.i[0] = i;
      const double g = at<T>(grad_loss, at_i);  // grad_loss may be a broadcast (stride 0)
      const double lse = flat<T>(lse_in, i);
      for (std::int64_t c = 0; c < C; ++c)
        d[c] = static_cast<T>(
            smoothed_cross_entropy_grad(t == ignore_index, std::exp(x[c] - lse), g, smoothing, static_cast<double>(C)) -
            (c == t ? smoothed_cross_entropy_target_grad(t == ignore_index, g, smoothing) : 0.0));
    }
  });
}

}  // namespace stepformer::reference
