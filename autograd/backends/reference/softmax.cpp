// softmax and log_softmax over each row (the last dim of a contiguous tensor), stable: the row's max is
// subtracted before exp, which changes nothing mathematically (softmax(x) = softmax(x - c)) and keeps exp
// from overflowing.
//   softmax:     y_j = exp(x_j - m) / s,          s = sum_k exp(x_k - m)
//   log_softmax: y_j = x_j - m - log(s)
// Backward (g = dL/dy):
//   softmax:     dx_j = y_j (g_j - sum_k g_k y_k)
//   log_softmax: dx_j = g_j - exp(y_j) sum_k g_k
#include <algorithm>
#include <cmath>

#include "reference_backend.h"
#include "strided.h"

namespace stepformer::reference {

void ReferenceBackend::softmax_forward(const TensorDesc& out, const TensorDesc& in, bool log) {
  const std::int64_t rows = row_count(in), n = row_length(in);
  dispatch_floating(in.dtype, "softmax_forward", [&](auto t) {
    using T = decltype(t);
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* x = &flat<T>(in, r * n);
      T* y = &flat<T>(out, r * n);
      double m = x[0];
      for (std::int64_t j = 1; j < n; ++j) m = std::max(m, static_cast<double>(x[j]));
      double s = 0;
      for (std::int64_t j = 0; j < n; ++j) s += std::exp(x[j] - m);
      for (std::int64_t j = 0; j < n; ++j) y[j] = static_cast<T>(log ? x[j] - m - std::log(s) : std::exp(x[j] - m) / s);
    }
  });
}

void ReferenceBackend::softmax_backward(const TensorDesc& grad_in, const TensorDesc& grad_out, const TensorDesc& out,
                                        bool log) {
  const std::int64_t rows = row_count(out), n = row_length(out);
  dispatch_floating(out.dtype, "softmax_backward", [&](auto t) {
    using T = decltype(t);
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* g = &flat<T>(grad_out, r * n);
      const T* y = &flat<T>(out, r * n);
      T* dx = &flat<T>(grad_in, r * n);
      double s = 0;  // sum g y (softmax) or sum g (log_softmax)
      for (std::int64_t j = 0; j < n; ++j) s += log ? static_cast<double>(g[j]) : static_cast<double>(g[j]) * y[j];
      for (std::int64_t j = 0; j < n; ++j)
        dx[j] = static_cast<T>(log ? g[j] - std::exp(static_cast<double>(y[j])) * s : y[j] * (g[j] - s));
    }
  });
}

}  // namespace stepformer::reference
