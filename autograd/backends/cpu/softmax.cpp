// Row softmax and log-softmax over contiguous rows, max-subtracted for stability.
#include <cmath>

#include "cpu_backend.h"
#include "strided.h"

namespace stepformer::cpu {

void CpuBackend::softmax_forward(const TensorDesc& out, const TensorDesc& in, bool log) {
  const std::int64_t C = in.ndim ? in.shape[in.ndim - 1] : 1;
  const std::int64_t rows = C ? in.numel() / C : 0;
  dispatch_floating(in.dtype, "softmax", [&](auto t) {
    using T = decltype(t);
#pragma omp parallel for schedule(static) if (rows * C >= kParallelGrain)
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* x = ptr<T>(in) + r * C;
      T* y = ptr<T>(out) + r * C;
      T mx = x[0];
      for (std::int64_t c = 1; c < C; ++c) mx = std::max(mx, x[c]);
      double total = 0;
      for (std::int64_t c = 0; c < C; ++c) total += std::exp(static_cast<double>(x[c] - mx));
      if (log) {
        const T lse = static_cast<T>(std::log(total));
        for (std::int64_t c = 0; c < C; ++c) y[c] = x[c] - mx - lse;
      } else {
        const double inv = 1.0 / total;
        for (std::int64_t c = 0; c < C; ++c) y[c] = static_cast<T>(std::exp(static_cast<double>(x[c] - mx)) * inv);
      }
    }
  });
}

void CpuBackend::softmax_backward(const TensorDesc& grad_in, const TensorDesc& grad_out, const TensorDesc& out,
                                  bool log) {
  const std::int64_t C = out.ndim ? out.shape[out.ndim - 1] : 1;
  const std::int64_t rows = C ? out.numel() / C : 0;
  dispatch_floating(out.dtype, "softmax_backward", [&](auto t) {
    using T = decltype(t);
#pragma omp parallel for schedule(static) if (rows * C >= kParallelGrain)
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* g = ptr<T>(grad_out) + r * C;
      const T* y = ptr<T>(out) + r * C;
      T* gi = ptr<T>(grad_in) + r * C;
      double dot = 0;  // softmax: sum(g * y); log_softmax: sum(g)
      for (std::int64_t c = 0; c < C; ++c) dot += log ? g[c] : g[c] * y[c];
      const T s = static_cast<T>(dot);
      for (std::int64_t c = 0; c < C; ++c) gi[c] = log ? g[c] - std::exp(y[c]) * s : y[c] * (g[c] - s);
    }
  });
}

}  // namespace stepformer::cpu
