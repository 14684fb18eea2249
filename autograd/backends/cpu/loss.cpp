// Fused cross-entropy over contiguous rows of C logits: the formulas are ../elementwise_math.h's
// smoothed_cross_entropy(_grad); the CPU's own is the row loop, vectorised through SIMD clones.
#include <cmath>

#include "../elementwise_math.h"
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
  return mx + std::log(block_sum<T>(C, [&](std::int64_t c) { return exp_of(x[c] - mx); }));
}

// One row's loss (../elementwise_math.h's smoothed_cross_entropy); the sum of the logits only where smoothing
// uses it, and the target's logit only where the target is a class (ignore_index may be any number).
template <class T>
[[gnu::always_inline]] inline double loss_row(const T* x, std::int64_t C, std::int64_t target, double smoothing,
                                              bool ignored, double lse) {
  const double sum_x = smoothing != 0 ? block_sum<T>(C, [&](std::int64_t c) { return x[c]; }) : 0.0;
  const double x_target = target >= 0 && target < C ? static_cast<double>(x[target]) : 0.0;
  return smoothed_cross_entropy(ignored, x_target, sum_x, lse, static_cast<double>(C), smoothing);
}

// The row's gradient (smoothed_cross_entropy_grad, then the target's part), p_c = exp(x_c - lse) by the
// vectorised exp_of.
template <class T>
[[gnu::always_inline]] inline void grad_row(const T* x, T* d, std::int64_t C, std::int64_t target, double g,
                                            double smoothing, bool ignored, T lse) {
  const T gt = static_cast<T>(g);
  const double classes = static_cast<double>(C);
  // One loop per value of `ignored`, each with a constant flag: g++ vectorises that, not the loop that tests it.
  const auto row = [&](bool ignored_row) {
    for (std::int64_t c = 0; c < C; ++c)
      d[c] = smoothed_cross_entropy_grad(ignored_row, exp_of(x[c] - lse), gt, smoothing, classes);
  };
  if (ignored)
    row(true);
  else
    row(false);
  if (target >= 0 && target < C) d[target] -= smoothed_cross_entropy_target_grad(ignored, gt, smoothing);
}

// Writes the row's log-sum-exp to *lse; returns its loss (0 for an ignored row).
STEPFORMER_SIMD_CLONES double loss_rows(const float* x, std::int64_t C, std::int64_t target, double smoothing,
                                        bool ignored, float* lse) {
  const double l = log_sum_exp(x, C);
  *lse = static_cast<float>(l);
  return loss_row(x, C, target, smoothing, ignored, l);
}
double loss_rows(const double* x, std::int64_t C, std::int64_t target, double smoothing, bool ignored, double* lse) {
  const double l = log_sum_exp(x, C);
  *lse = l;
  return loss_row(x, C, target, smoothing, ignored, l);
}
STEPFORMER_SIMD_CLONES void grad_rows(const float* x, float* d, std::int64_t C, std::int64_t target, double g,
                                      double smoothing, bool ignored, float lse) {
  grad_row(x, d, C, target, g, smoothing, ignored, lse);
}
void grad_rows(const double* x, double* d, std::int64_t C, std::int64_t target, double g, double smoothing,
               bool ignored, double lse) {
  grad_row(x, d, C, target, g, smoothing, ignored, lse);
}

}  // namespace

std::int64_t CpuBackend::cross_entropy_forward(const TensorDesc& loss, const TensorDesc& lse, const TensorDesc& logits,
                                               const TensorDesc& targets, std::int64_t ignore_index, double smoothing,
                                               const DescribeBadIndex& /*reported by the op*/) {
  const std::int64_t n = logits.shape[0], C = logits.shape[1];
  const std::int64_t* tgt = ptr<std::int64_t>(targets);
  for (std::int64_t i = 0; i < n; ++i)
    if (tgt[i] != ignore_index && (tgt[i] < 0 || tgt[i] >= C)) return i;
  dispatch_floating(logits.dtype, "cross_entropy", [&](auto t) {
    using T = decltype(t);
    parallel_for_rethrow(n, n * C >= kParallelGrain, [&](std::int64_t i) {
      ptr<T>(loss)[i] = static_cast<T>(
          loss_rows(ptr<T>(logits) + i * C, C, tgt[i], smoothing, tgt[i] == ignore_index, ptr<T>(lse) + i));
    });
  });
  return -1;
}

void CpuBackend::cross_entropy_backward(const TensorDesc& dlogits, const TensorDesc& logits, const TensorDesc& lse,
                                        const TensorDesc& targets, const TensorDesc& grad_loss,
                                        std::int64_t ignore_index, double smoothing) {
  const std::int64_t n = logits.shape[0], C = logits.shape[1];
  const std::int64_t* tgt = ptr<std::int64_t>(targets);
  dispatch_floating(logits.dtype, "cross_entropy_backward", [&](auto t) {
    using T = decltype(t);
    parallel_for_rethrow(n, n * C >= kParallelGrain, [&](std::int64_t i) {
      grad_rows(ptr<T>(logits) + i * C, ptr<T>(dlogits) + i * C, C, tgt[i], ptr<T>(grad_loss)[i * grad_loss.strides[0]],
                smoothing, tgt[i] == ignore_index, ptr<T>(lse)[i]);
    });
  });
}

}  // namespace stepformer::cpu
