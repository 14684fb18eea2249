// LayerNorm over contiguous rows of D, statistics in double.
//   forward:  mean, rstd = 1/sqrt(var + eps) (biased var), y = (x - mean) * rstd * gamma + beta
//   backward: xhat = (x - mean) * rstd, gx = dy * gamma,
//             dx = rstd * (gx - mean(gx) - xhat * mean(gx * xhat)),
//             dgamma = sum_rows(dy * xhat), dbeta = sum_rows(dy)
#include <cmath>

#include "cpu_backend.h"
#include "strided.h"

namespace stepformer::cpu {

void CpuBackend::layer_norm_forward(const TensorDesc& y, const TensorDesc& mean, const TensorDesc& rstd,
                                    const TensorDesc& x, const TensorDesc& gamma, const TensorDesc& beta, double eps) {
  const std::int64_t D = x.shape[x.ndim - 1];
  const std::int64_t rows = D ? x.numel() / D : 0;
  dispatch_floating(x.dtype, "layer_norm", [&](auto t) {
    using T = decltype(t);
    const T* g = ptr<T>(gamma);
    const T* b = ptr<T>(beta);
#pragma omp parallel for schedule(static) if (rows * D >= kParallelGrain)
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* xr = ptr<T>(x) + r * D;
      T* yr = ptr<T>(y) + r * D;
      double mu = 0;
      for (std::int64_t i = 0; i < D; ++i) mu += xr[i];
      mu /= static_cast<double>(D);
      double var = 0;
      for (std::int64_t i = 0; i < D; ++i) var += (xr[i] - mu) * (xr[i] - mu);
      var /= static_cast<double>(D);
      const double rs = 1.0 / std::sqrt(var + eps);
      for (std::int64_t i = 0; i < D; ++i) {
        double v = (xr[i] - mu) * rs;
        if (g) v *= g[i];
        if (b) v += b[i];
        yr[i] = static_cast<T>(v);
      }
      ptr<T>(mean)[r] = static_cast<T>(mu);
      ptr<T>(rstd)[r] = static_cast<T>(rs);
    }
  });
}

void CpuBackend::layer_norm_backward(const TensorDesc& dx, const TensorDesc& dgamma, const TensorDesc& dbeta,
                                     const TensorDesc& dy, const TensorDesc& x, const TensorDesc& mean,
                                     const TensorDesc& rstd, const TensorDesc& gamma) {
  const std::int64_t D = x.shape[x.ndim - 1];
  const std::int64_t rows = D ? x.numel() / D : 0;
  dispatch_floating(x.dtype, "layer_norm_backward", [&](auto t) {
    using T = decltype(t);
    const T* g = ptr<T>(gamma);
#pragma omp parallel for schedule(static) if (rows * D >= kParallelGrain)
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* xr = ptr<T>(x) + r * D;
      const T* dyr = ptr<T>(dy) + r * D;
      T* dxr = ptr<T>(dx) + r * D;
      const double mu = ptr<T>(mean)[r], rs = ptr<T>(rstd)[r];
      double mean_gx = 0, mean_gx_xhat = 0;
      for (std::int64_t i = 0; i < D; ++i) {
        const double gx = g ? dyr[i] * g[i] : dyr[i];
        mean_gx += gx;
        mean_gx_xhat += gx * (xr[i] - mu) * rs;
      }
      mean_gx /= static_cast<double>(D);
      mean_gx_xhat /= static_cast<double>(D);
      for (std::int64_t i = 0; i < D; ++i) {
        const double gx = g ? dyr[i] * g[i] : dyr[i];
        dxr[i] = static_cast<T>(rs * (gx - mean_gx - (xr[i] - mu) * rs * mean_gx_xhat));
      }
    }
    if (!dgamma.data && !dbeta.data) return;
#pragma omp parallel for schedule(static) if (rows * D >= kParallelGrain)
    for (std::int64_t i = 0; i < D; ++i) {  // one column per iteration: no two threads write one element
      double dg = 0, db = 0;
      for (std::int64_t r = 0; r < rows; ++r) {
        const double d = ptr<T>(dy)[r * D + i];
        dg += d * (ptr<T>(x)[r * D + i] - ptr<T>(mean)[r]) * ptr<T>(rstd)[r];
        db += d;
      }
      if (dgamma.data) ptr<T>(dgamma)[i] = static_cast<T>(dg);
      if (dbeta.data) ptr<T>(dbeta)[i] = static_cast<T>(db);
    }
  });
}

}  // namespace stepformer::cpu
