// Fused cross-entropy over contiguous rows of C logits (see autograd/src/ops/loss.cpp for the formula).
#include <cmath>

#include "cpu_backend.h"
#include "strided.h"
#include "vmath.h"

namespace stepformer::cpu {

namespace {

template <class T>
[[gnu::always_inline]] inline double log_sum_exp(const T* x, std::int64_t C) {
  T mx = x[0];
#pragma omp simd reduction(max : mx)
  for (std::int64_t c = 1; c < C; ++c) mx = std::max(mx, x[c]);
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (std::int64_t c = 0; c < C; ++c) s += exp_of(x[c] - mx);
  return mx + std::log(s);
}

// One row's loss: (1 - eps) * nll + eps * mean over classes of -log p (label smoothing).
template <class T>
[[gnu::always_inline]] inline double loss_row(const T* x, std::int64_t C, std::int64_t target, double smoothing) {
  const double lse = log_sum_exp(x, C);
  // EXERCISE 7.2 (4 points, needs 0.4): the row's loss: (1-s) * -log p[target] + s * mean of -log p over classes
  double sum_x = 0;
  if (smoothing != 0) {
#pragma omp simd reduction(+ : sum_x)
    for (std::int64_t c = 0; c < C; ++c) sum_x += x[c];
  }
  const double nll = -(x[target] - lse);
  return (1 - smoothing) * nll - smoothing / static_cast<double>(C) * (sum_x - static_cast<double>(C) * lse);
  // END EXERCISE
}

// d loss / d x = g * (softmax(x) - smoothed one-hot target).
template <class T>
[[gnu::always_inline]] inline void grad_row(const T* x, T* d, std::int64_t C, std::int64_t target, double g,
                                            double smoothing) {
  const T lse = static_cast<T>(log_sum_exp(x, C));
  // EXERCISE 7.2 (continued)
  const T gt = static_cast<T>(g), uniform = static_cast<T>(smoothing / static_cast<double>(C));
  for (std::int64_t c = 0; c < C; ++c) d[c] = gt * (exp_of(x[c] - lse) - uniform);
  d[target] -= gt * static_cast<T>(1 - smoothing);
  // END EXERCISE
}

STEPFORMER_SIMD_CLONES double loss_rows(const float* x, std::int64_t C, std::int64_t target, double smoothing) {
  return loss_row(x, C, target, smoothing);
}
double loss_rows(const double* x, std::int64_t C, std::int64_t target, double smoothing) {
  return loss_row(x, C, target, smoothing);
}
STEPFORMER_SIMD_CLONES void grad_rows(const float* x, float* d, std::int64_t C, std::int64_t target, double g,
                                      double smoothing) {
  grad_row(x, d, C, target, g, smoothing);
}
void grad_rows(const double* x, double* d, std::int64_t C, std::int64_t target, double g, double smoothing) {
  grad_row(x, d, C, target, g, smoothing);
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
    parallel_for_rethrow(n, n * C >= kParallelGrain, [&](std::int64_t i) {
      ptr<T>(loss)[i] =
          tgt[i] == ignore_index ? T(0) : static_cast<T>(loss_rows(ptr<T>(logits) + i * C, C, tgt[i], smoothing));
    });
  });
  return -1;
}

void CpuBackend::cross_entropy_backward(const TensorDesc& dlogits, const TensorDesc& logits, const TensorDesc& targets,
                                        const TensorDesc& grad_loss, std::int64_t ignore_index, double smoothing) {
  const std::int64_t n = logits.shape[0], C = logits.shape[1];
  const std::int64_t* tgt = ptr<std::int64_t>(targets);
  dispatch_floating(logits.dtype, "cross_entropy_backward", [&](auto t) {
    using T = decltype(t);
    parallel_for_rethrow(n, n * C >= kParallelGrain, [&](std::int64_t i) {
      T* d = ptr<T>(dlogits) + i * C;
      if (tgt[i] == ignore_index)
        for (std::int64_t c = 0; c < C; ++c) d[c] = T(0);
      else
        grad_rows(ptr<T>(logits) + i * C, d, C, tgt[i], ptr<T>(grad_loss)[i * grad_loss.strides[0]], smoothing);
    });
  });
}

}  // namespace stepformer::cpu
