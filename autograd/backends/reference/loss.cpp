// Cross-entropy over rows of C logits, with label smoothing s (autograd/src/ops/loss.cpp has the formula):
//   log p_c = x_c - logsumexp(x),  loss = -(1 - s) log p_t - (s / C) sum_c log p_c
//   dloss/dx_c = p_c - (1 - s) [c == t] - s / C,  p_c = exp(x_c - lse) with the forward's logsumexp
// A row whose target is ignore_index has loss 0 and gradient 0.
#include <algorithm>
#include <cmath>

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
                                                     std::int64_t ignore_index, double smoothing) {
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
      if (t == ignore_index) {
        flat<T>(loss, i) = T(0);
        continue;
      }
      double sum_log_p = 0;
      for (std::int64_t c = 0; c < C; ++c) sum_log_p += x[c] - lse;
      flat<T>(loss, i) =
          static_cast<T>(-(1 - smoothing) * (x[t] - lse) - smoothing / static_cast<double>(C) * sum_log_p);
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
      for (std::int64_t c = 0; c < C; ++c) {
        const double target = (c == t ? 1 - smoothing : 0.0) + smoothing / static_cast<double>(C);
        d[c] = t == ignore_index ? T(0) : static_cast<T>(g * (std::exp(x[c] - lse) - target));
      }
    }
  });
}

}  // namespace stepformer::reference
