// LayerNorm over contiguous rows of D, statistics in double.
//   forward:  mean, rstd = 1/sqrt(var + eps) (biased var), y = (x - mean) * rstd * gamma + beta
//   backward: xhat = (x - mean) * rstd, gx = dy * gamma,
//             dx = rstd * (gx - mean(gx) - xhat * mean(gx * xhat)),
//             dgamma = sum_rows(dy * xhat), dbeta = sum_rows(dy)
// Rows are independent (one per thread at a time). dgamma and dbeta sum over rows: fixed blocks of
// kRowBlock rows each sum their rows in order, unit stride, and the block sums are added in block order,
// so the result does not depend on the thread count.
//
// RMSNorm is the same without the mean and without beta: rstd and dx through ../elementwise_math.h's
// rms_norm_rstd and rms_norm_dx (the formulas every backend shares), row sums in double, dgamma as above. Its
// rows run through parallel_for_rethrow: the formulas are an exercise, and an unsolved stub throws from a row. With a
// residual, a row is summed first (x + residual, written out) and normalised from there, in the same pass.
#include <cmath>
#include <vector>

#include "../elementwise_math.h"
#include "cpu_backend.h"
#include "rows.h"
#include "strided.h"
#include "vmath.h"

namespace stepformer::cpu {

namespace {

constexpr std::int64_t kRowBlock = 64;

template <class T>
[[gnu::always_inline]] inline void forward_row(const T* x, T* y, const T* g, const T* b, std::int64_t D, double eps,
                                               T* mean, T* rstd) {
  double mu = 0;
#pragma omp simd reduction(+ : mu)
  for (std::int64_t i = 0; i < D; ++i) mu += x[i];
  mu /= static_cast<double>(D);
  double var = 0;
#pragma omp simd reduction(+ : var)
  for (std::int64_t i = 0; i < D; ++i) var += (x[i] - mu) * (x[i] - mu);
  var /= static_cast<double>(D);
  const double rs = 1.0 / std::sqrt(var + eps);
  const T m = static_cast<T>(mu), r = static_cast<T>(rs);
  if (g && b)
    for (std::int64_t i = 0; i < D; ++i) y[i] = (x[i] - m) * r * g[i] + b[i];
  else
    for (std::int64_t i = 0; i < D; ++i) y[i] = (x[i] - m) * r * (g ? g[i] : T(1)) + (b ? b[i] : T(0));
  *mean = m;
  *rstd = r;
}

template <class T>
[[gnu::always_inline]] inline void backward_row(const T* x, const T* dy, T* dx, const T* g, std::int64_t D, T mean,
                                                T rstd) {
  double sum_gx = 0, sum_gx_xhat = 0;
#pragma omp simd reduction(+ : sum_gx, sum_gx_xhat)
  for (std::int64_t i = 0; i < D; ++i) {
    const T gx = g ? dy[i] * g[i] : dy[i];
    sum_gx += gx;
    sum_gx_xhat += gx * (x[i] - mean) * rstd;
  }
  const T a = static_cast<T>(sum_gx / static_cast<double>(D)), c = static_cast<T>(sum_gx_xhat / static_cast<double>(D));
  for (std::int64_t i = 0; i < D; ++i) {
    const T gx = g ? dy[i] * g[i] : dy[i];
    dx[i] = rstd * (gx - a - (x[i] - mean) * rstd * c);
  }
}

// Adds dy * xhat and dy of rows [r0, r1) into dg and db (length D), row by row.
template <class T>
[[gnu::always_inline]] inline void param_grads_rows(const T* x, const T* dy, const T* mean, const T* rstd,
                                                    std::int64_t r0, std::int64_t r1, std::int64_t D, double* dg,
                                                    double* db) {
  for (std::int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * D;
    const T* dyr = dy + r * D;
    const T m = mean[r], s = rstd[r];
    for (std::int64_t i = 0; i < D; ++i) {
      dg[i] += static_cast<double>(dyr[i] * (xr[i] - m) * s);
      db[i] += static_cast<double>(dyr[i]);
    }
  }
}

STEPFORMER_SIMD_CLONES void forward_rows(const float* x, float* y, const float* g, const float* b, std::int64_t D,
                                         double eps, float* mean, float* rstd) {
  forward_row(x, y, g, b, D, eps, mean, rstd);
}
void forward_rows(const double* x, double* y, const double* g, const double* b, std::int64_t D, double eps,
                  double* mean, double* rstd) {
  forward_row(x, y, g, b, D, eps, mean, rstd);
}
STEPFORMER_SIMD_CLONES void backward_rows(const float* x, const float* dy, float* dx, const float* g, std::int64_t D,
                                          float mean, float rstd) {
  backward_row(x, dy, dx, g, D, mean, rstd);
}
void backward_rows(const double* x, const double* dy, double* dx, const double* g, std::int64_t D, double mean,
                   double rstd) {
  backward_row(x, dy, dx, g, D, mean, rstd);
}
STEPFORMER_SIMD_CLONES void param_grads(const float* x, const float* dy, const float* mean, const float* rstd,
                                        std::int64_t r0, std::int64_t r1, std::int64_t D, double* dg, double* db) {
  param_grads_rows(x, dy, mean, rstd, r0, r1, D, dg, db);
}
void param_grads(const double* x, const double* dy, const double* mean, const double* rstd, std::int64_t r0,
                 std::int64_t r1, std::int64_t D, double* dg, double* db) {
  param_grads_rows(x, dy, mean, rstd, r0, r1, D, dg, db);
}

// The row sums of RMSNorm, in double: sum x^2 forward, sum gx xhat backward (gx = dy g, xhat = x rstd).
template <class T>
[[gnu::always_inline]] inline double sum_of_squares_row(const T* x, std::int64_t D) {
  double squares = 0;
#pragma omp simd reduction(+ : squares)
  for (std::int64_t i = 0; i < D; ++i) squares += static_cast<double>(x[i]) * x[i];
  return squares;
}
template <class T>
[[gnu::always_inline]] inline double sum_gx_xhat_row(const T* x, const T* dy, const T* g, std::int64_t D, T rstd) {
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (std::int64_t i = 0; i < D; ++i) sum += (g ? dy[i] * g[i] : dy[i]) * x[i] * rstd;
  return sum;
}
template <class T>
[[gnu::always_inline]] inline void scale_row(const T* x, T* y, const T* g, std::int64_t D, T rstd) {
  if (g)
    for (std::int64_t i = 0; i < D; ++i) y[i] = x[i] * rstd * g[i];
  else
    for (std::int64_t i = 0; i < D; ++i) y[i] = x[i] * rstd;
}
// Not a SIMD clone, unlike its neighbours: rms_norm_dx is an exercise whose stub throws, and an exception out of a
// target_clones function is std::terminate (g++ 12 takes a call through the clones' dispatcher as nothrow). For the
// same reason rms_norm_rstd is called in the row loop's own body, between two clones.
template <class T>
void rms_dx_row(const T* x, const T* dy, T* dx, const T* g, std::int64_t D, T rstd, T mean_gx_xhat) {
  for (std::int64_t i = 0; i < D; ++i) dx[i] = rms_norm_dx(g ? dy[i] * g[i] : dy[i], x[i] * rstd, rstd, mean_gx_xhat);
}

// Adds dy * xhat of rows [r0, r1) into dg (length D), row by row.
template <class T>
[[gnu::always_inline]] inline void rms_gain_grad_rows(const T* x, const T* dy, const T* rstd, std::int64_t r0,
                                                      std::int64_t r1, std::int64_t D, double* dg) {
  for (std::int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * D;
    const T* dyr = dy + r * D;
    const T s = rstd[r];
    for (std::int64_t i = 0; i < D; ++i) dg[i] += static_cast<double>(dyr[i] * (xr[i] * s));
  }
}

// A residual sum's row in float64 (float32 rows: rows.h's add_row, the element-wise add's own).
void add_row(const double* x, const double* r, double* s, std::int64_t D) {
  for (std::int64_t i = 0; i < D; ++i) s[i] = x[i] + r[i];
}
STEPFORMER_SIMD_CLONES double sum_of_squares(const float* x, std::int64_t D) { return sum_of_squares_row(x, D); }
double sum_of_squares(const double* x, std::int64_t D) { return sum_of_squares_row(x, D); }
STEPFORMER_SIMD_CLONES double sum_gx_xhat(const float* x, const float* dy, const float* g, std::int64_t D, float rstd) {
  return sum_gx_xhat_row(x, dy, g, D, rstd);
}
double sum_gx_xhat(const double* x, const double* dy, const double* g, std::int64_t D, double rstd) {
  return sum_gx_xhat_row(x, dy, g, D, rstd);
}
STEPFORMER_SIMD_CLONES void scale(const float* x, float* y, const float* g, std::int64_t D, float rstd) {
  scale_row(x, y, g, D, rstd);
}
void scale(const double* x, double* y, const double* g, std::int64_t D, double rstd) { scale_row(x, y, g, D, rstd); }
STEPFORMER_SIMD_CLONES void rms_gain_grad(const float* x, const float* dy, const float* rstd, std::int64_t r0,
                                          std::int64_t r1, std::int64_t D, double* dg) {
  rms_gain_grad_rows(x, dy, rstd, r0, r1, D, dg);
}
void rms_gain_grad(const double* x, const double* dy, const double* rstd, std::int64_t r0, std::int64_t r1,
                   std::int64_t D, double* dg) {
  rms_gain_grad_rows(x, dy, rstd, r0, r1, D, dg);
}

}  // namespace

void CpuBackend::layer_norm_forward(const TensorDesc& y, const TensorDesc& mean, const TensorDesc& rstd,
                                    const TensorDesc& x, const TensorDesc& gamma, const TensorDesc& beta, double eps) {
  const std::int64_t D = x.shape[x.ndim - 1];
  const std::int64_t rows = D ? x.numel() / D : 0;
  dispatch_floating(x.dtype, "layer_norm", [&](auto t) {
    using T = decltype(t);
#pragma omp parallel for schedule(static) if (rows * D >= kParallelGrain)
    for (std::int64_t r = 0; r < rows; ++r)
      forward_rows(ptr<T>(x) + r * D, ptr<T>(y) + r * D, ptr<T>(gamma), ptr<T>(beta), D, eps, ptr<T>(mean) + r,
                   ptr<T>(rstd) + r);
  });
}

void CpuBackend::layer_norm_backward(const TensorDesc& dx, const TensorDesc& dgamma, const TensorDesc& dbeta,
                                     const TensorDesc& dy, const TensorDesc& x, const TensorDesc& mean,
                                     const TensorDesc& rstd, const TensorDesc& gamma) {
  const std::int64_t D = x.shape[x.ndim - 1];
  const std::int64_t rows = D ? x.numel() / D : 0;
  dispatch_floating(x.dtype, "layer_norm_backward", [&](auto t) {
    using T = decltype(t);
#pragma omp parallel for schedule(static) if (rows * D >= kParallelGrain)
    for (std::int64_t r = 0; r < rows; ++r)
      backward_rows(ptr<T>(x) + r * D, ptr<T>(dy) + r * D, ptr<T>(dx) + r * D, ptr<T>(gamma), D, ptr<T>(mean)[r],
                    ptr<T>(rstd)[r]);
    if (!dgamma.data && !dbeta.data) return;
    const std::int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
    std::vector<double> dg(static_cast<std::size_t>(blocks * D), 0.0), db(dg.size(), 0.0);
#pragma omp parallel for schedule(static) if (rows * D >= kParallelGrain)
    for (std::int64_t k = 0; k < blocks; ++k)
      param_grads(ptr<T>(x), ptr<T>(dy), ptr<T>(mean), ptr<T>(rstd), k * kRowBlock, std::min(rows, (k + 1) * kRowBlock),
                  D, dg.data() + k * D, db.data() + k * D);
    for (std::int64_t i = 0; i < D; ++i) {
      double sg = 0, sb = 0;
      for (std::int64_t k = 0; k < blocks; ++k)
        sg += dg[static_cast<std::size_t>(k * D + i)], sb += db[static_cast<std::size_t>(k * D + i)];
      if (dgamma.data) ptr<T>(dgamma)[i] = static_cast<T>(sg);
      if (dbeta.data) ptr<T>(dbeta)[i] = static_cast<T>(sb);
    }
  });
}

void CpuBackend::rms_norm_forward(const TensorDesc& y, const TensorDesc& rstd, const TensorDesc& sum,
                                  const TensorDesc& x, const TensorDesc& residual, const TensorDesc& gamma,
                                  double eps) {
  const std::int64_t D = x.shape[x.ndim - 1];
  const std::int64_t rows = D ? x.numel() / D : 0;
  dispatch_floating(x.dtype, "rms_norm", [&](auto t) {
    using T = decltype(t);
    parallel_for_rethrow(rows, rows * D >= kParallelGrain, [&](std::int64_t r) {
      const T* in = ptr<T>(x) + r * D;
      if (residual.data) {
        add_row(in, ptr<T>(residual) + r * D, ptr<T>(sum) + r * D, D);
        in = ptr<T>(sum) + r * D;
      }
      const T rs = static_cast<T>(rms_norm_rstd(sum_of_squares(in, D), D, eps));
      scale(in, ptr<T>(y) + r * D, ptr<T>(gamma), D, rs);
      ptr<T>(rstd)[r] = rs;
    });
  });
}

void CpuBackend::rms_norm_backward(const TensorDesc& dx, const TensorDesc& dgamma, const TensorDesc& dy,
                                   const TensorDesc& x, const TensorDesc& rstd, const TensorDesc& gamma) {
  const std::int64_t D = x.shape[x.ndim - 1];
  const std::int64_t rows = D ? x.numel() / D : 0;
  dispatch_floating(x.dtype, "rms_norm_backward", [&](auto t) {
    using T = decltype(t);
    parallel_for_rethrow(rows, rows * D >= kParallelGrain, [&](std::int64_t r) {
      const T* xr = ptr<T>(x) + r * D;
      const T* dyr = ptr<T>(dy) + r * D;
      const T rs = ptr<T>(rstd)[r];
      const T c = static_cast<T>(sum_gx_xhat(xr, dyr, ptr<T>(gamma), D, rs) / static_cast<double>(D));
      rms_dx_row(xr, dyr, ptr<T>(dx) + r * D, ptr<T>(gamma), D, rs, c);
    });
    if (!dgamma.data) return;
    const std::int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
    std::vector<double> dg(static_cast<std::size_t>(blocks * D), 0.0);
#pragma omp parallel for schedule(static) if (rows * D >= kParallelGrain)
    for (std::int64_t k = 0; k < blocks; ++k)
      rms_gain_grad(ptr<T>(x), ptr<T>(dy), ptr<T>(rstd), k * kRowBlock, std::min(rows, (k + 1) * kRowBlock), D,
                    dg.data() + k * D);
    for (std::int64_t i = 0; i < D; ++i) {
      double sg = 0;
      for (std::int64_t k = 0; k < blocks; ++k) sg += dg[static_cast<std::size_t>(k * D + i)];
      ptr<T>(dgamma)[i] = static_cast<T>(sg);
    }
  });
}

}  // namespace stepformer::cpu
