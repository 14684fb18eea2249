// Fused cross-entropy over contiguous rows of C logits (see autograd/src/ops/loss.cpp for the formula).
#include <cmath>

#include "cpu_backend.h"
#include "strided.h"

namespace stepformer::cpu {

namespace {
template <class T>
double log_sum_exp(const T* x, std::int64_t C) {
  T mx = x[0];
  for (std::int64_t c = 1; c < C; ++c) mx = std::max(mx, x[c]);
  double s = 0;
  for (std::int64_t c = 0; c < C; ++c) s += std::exp(static_cast<double>(x[c] - mx));
  return mx + std::log(s);
}
}  // namespace

std::int64_t CpuBackend::cross_entropy_forward(const TensorDesc& loss, const TensorDesc& logits,
                                               const TensorDesc& targets, std::int64_t ignore_index, double smoothing) {
  const std::int64_t n = logits.shape[0], C = logits.shape[1];
  const std::int64_t* tgt = ptr<std::int64_t>(targets);
  for (std::int64_t i = 0; i < n; ++i)
    if (tgt[i] != ignore_index && (tgt[i] < 0 || tgt[i] >= C)) return i;
  dispatch_floating(logits.dtype, "cross_entropy", [&](auto t) {
    using T = decltype(t);
#pragma omp parallel for schedule(static) if (n * C >= kParallelGrain)
    for (std::int64_t i = 0; i < n; ++i) {
      if (tgt[i] == ignore_index) {
        ptr<T>(loss)[i] = T(0);
        continue;
      }
      const T* x = ptr<T>(logits) + i * C;
      const double lse = log_sum_exp(x, C);
      double sum_logp = 0;
      if (smoothing != 0)
        for (std::int64_t c = 0; c < C; ++c) sum_logp += x[c] - lse;
      const double nll = -(x[tgt[i]] - lse);
      ptr<T>(loss)[i] = static_cast<T>((1 - smoothing) * nll - smoothing / static_cast<double>(C) * sum_logp);
    }
  });
  return -1;
}

void CpuBackend::cross_entropy_backward(const TensorDesc& dlogits, const TensorDesc& logits, const TensorDesc& targets,
                                        const TensorDesc& grad_loss, std::int64_t ignore_index, double smoothing) {
  const std::int64_t n = logits.shape[0], C = logits.shape[1];
  const std::int64_t* tgt = ptr<std::int64_t>(targets);
  dispatch_floating(logits.dtype, "cross_entropy_backward", [&](auto t) {
    using T = decltype(t);
#pragma omp parallel for schedule(static) if (n * C >= kParallelGrain)
    for (std::int64_t i = 0; i < n; ++i) {
      T* d = ptr<T>(dlogits) + i * C;
      if (tgt[i] == ignore_index) {
        for (std::int64_t c = 0; c < C; ++c) d[c] = T(0);
        continue;
      }
      const T* x = ptr<T>(logits) + i * C;
      const double lse = log_sum_exp(x, C);
      const double g = ptr<T>(grad_loss)[i * grad_loss.strides[0]];
      const double uniform = smoothing / static_cast<double>(C);
      for (std::int64_t c = 0; c < C; ++c) {
        const double target = (c == tgt[i] ? 1 - smoothing : 0) + uniform;
        d[c] = static_cast<T>(g * (std::exp(x[c] - lse) - target));
      }
    }
  });
}

}  // namespace stepformer::cpu
