// layer_norm over each row of D elements (Ba, Kiros & Hinton 2016), as torch.nn.functional.layer_norm:
// biased variance, eps inside the square root.
//   mean = sum x / D,  var = sum (x - mean)^2 / D,  rstd = 1 / sqrt(var + eps)
//   xhat = (x - mean) rstd,  y = xhat gamma + beta
// Backward, with gx = dy gamma (docs/00_autograd.md derives it):
//   dx = rstd (gx - mean(gx) - xhat mean(gx xhat)),  dgamma = sum over rows dy xhat,  dbeta = sum over rows dy
// gamma and beta may be absent (data == nullptr): then gamma = 1 and beta = 0; so may dgamma and dbeta.
//
// rms_norm: the same rows without the mean (and without beta), through ../elementwise_math.h's rms_norm_rstd and
// rms_norm_dx, in double.
#include <cmath>
#include <vector>

#include "../elementwise_math.h"
#include "reference_backend.h"
#include "strided.h"

namespace stepformer::reference {

void ReferenceBackend::layer_norm_forward(const TensorDesc& y, const TensorDesc& mean, const TensorDesc& rstd,
                                          const TensorDesc& x, const TensorDesc& gamma, const TensorDesc& beta,
                                          double eps) {
  const std::int64_t rows = row_count(x), D = row_length(x);
  dispatch_floating(x.dtype, "layer_norm_forward", [&](auto t) {
    using T = decltype(t);
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* xr = &flat<T>(x, r * D);
      double sum = 0;
      for (std::int64_t j = 0; j < D; ++j) sum += xr[j];
      const double mu = sum / static_cast<double>(D);
      double squares = 0;
      for (std::int64_t j = 0; j < D; ++j) squares += (xr[j] - mu) * (xr[j] - mu);
      const double rs = 1.0 / std::sqrt(squares / static_cast<double>(D) + eps);
      for (std::int64_t j = 0; j < D; ++j) {
        const double g = gamma.data ? static_cast<double>(flat<T>(gamma, j)) : 1.0;
        const double b = beta.data ? static_cast<double>(flat<T>(beta, j)) : 0.0;
        flat<T>(y, r * D + j) = static_cast<T>((xr[j] - mu) * rs * g + b);
      }
      flat<T>(mean, r) = static_cast<T>(mu);
      flat<T>(rstd, r) = static_cast<T>(rs);
    }
  });
}

void ReferenceBackend::layer_norm_backward(const TensorDesc& dx, const TensorDesc& dgamma, const TensorDesc& dbeta,
                                           const TensorDesc& dy, const TensorDesc& x, const TensorDesc& mean,
                                           const TensorDesc& rstd, const TensorDesc& gamma) {
  const std::int64_t rows = row_count(x), D = row_length(x);
  dispatch_floating(x.dtype, "layer_norm_backward", [&](auto t) {
    using T = decltype(t);
    std::vector<double> dg(static_cast<std::size_t>(D), 0.0), db(static_cast<std::size_t>(D), 0.0);
    for (std::int64_t r = 0; r < rows; ++r) {
      const double mu = flat<T>(mean, r), rs = flat<T>(rstd, r);
      auto xhat = [&](std::int64_t j) { return (flat<T>(x, r * D + j) - mu) * rs; };
      auto gx = [&](std::int64_t j) {
        return static_cast<double>(flat<T>(dy, r * D + j)) *
               (gamma.data ? static_cast<double>(flat<T>(gamma, j)) : 1.0);
      };
      double mean_gx = 0, mean_gx_xhat = 0;
      for (std::int64_t j = 0; j < D; ++j) {
        mean_gx += gx(j) / static_cast<double>(D);
        mean_gx_xhat += gx(j) * xhat(j) / static_cast<double>(D);
      }
      for (std::int64_t j = 0; j < D; ++j) {
        flat<T>(dx, r * D + j) = static_cast<T>(rs * (gx(j) - mean_gx - xhat(j) * mean_gx_xhat));
        dg[static_cast<std::size_t>(j)] += flat<T>(dy, r * D + j) * xhat(j);
        db[static_cast<std::size_t>(j)] += flat<T>(dy, r * D + j);
      }
    }
    for (std::int64_t j = 0; j < D; ++j) {
      if (dgamma.data) flat<T>(dgamma, j) = static_cast<T>(dg[static_cast<std::size_t>(j)]);
      if (dbeta.data) flat<T>(dbeta, j) = static_cast<T>(db[static_cast<std::size_t>(j)]);
    }
  });
}

void ReferenceBackend::rms_norm_forward(const TensorDesc& y, const TensorDesc& rstd, const TensorDesc& sum,
                                        const TensorDesc& x, const TensorDesc& residual, const TensorDesc& gamma,
                                        double eps) {
  const std::int64_t rows = row_count(x), D = row_length(x);
  dispatch_floating(x.dtype, "rms_norm_forward", [&](auto t) {
    using T = decltype(t);
    const TensorDesc& in = residual.data ? sum : x;  // the rows normalised
    for (std::int64_t r = 0; r < rows; ++r) {
      if (residual.data)  // the sum rounded to T, as an add's
        for (std::int64_t j = 0; j < D; ++j)
          flat<T>(sum, r * D + j) = static_cast<T>(flat<T>(x, r * D + j) + flat<T>(residual, r * D + j));
      double squares = 0;
      for (std::int64_t j = 0; j < D; ++j)
        squares += static_cast<double>(flat<T>(in, r * D + j)) * flat<T>(in, r * D + j);
      const double rs = rms_norm_rstd(squares, D, eps);
      for (std::int64_t j = 0; j < D; ++j) {
        const double g = gamma.data ? static_cast<double>(flat<T>(gamma, j)) : 1.0;
        flat<T>(y, r * D + j) = static_cast<T>(flat<T>(in, r * D + j) * rs * g);
      }
      flat<T>(rstd, r) = static_cast<T>(rs);
    }
  });
}

void ReferenceBackend::rms_norm_backward(const TensorDesc& dx, const TensorDesc& dgamma, const TensorDesc& dy,
                                         const TensorDesc& x, const TensorDesc& rstd, const TensorDesc& gamma) {
  const std::int64_t rows = row_count(x), D = row_length(x);
  dispatch_floating(x.dtype, "rms_norm_backward", [&](auto t) {
    using T = decltype(t);
    std::vector<double> dg(static_cast<std::size_t>(D), 0.0);
    for (std::int64_t r = 0; r < rows; ++r) {
      const double rs = flat<T>(rstd, r);
      auto xhat = [&](std::int64_t j) { return flat<T>(x, r * D + j) * rs; };
      auto gx = [&](std::int64_t j) {
        return static_cast<double>(flat<T>(dy, r * D + j)) *
               (gamma.data ? static_cast<double>(flat<T>(gamma, j)) : 1.0);
      };
      double mean_gx_xhat = 0;
      for (std::int64_t j = 0; j < D; ++j) mean_gx_xhat += gx(j) * xhat(j) / static_cast<double>(D);
      for (std::int64_t j = 0; j < D; ++j) {
        flat<T>(dx, r * D + j) = static_cast<T>(rms_norm_dx(gx(j), xhat(j), rs, mean_gx_xhat));
        dg[static_cast<std::size_t>(j)] += flat<T>(dy, r * D + j) * xhat(j);
      }
    }
    if (dgamma.data)
      for (std::int64_t j = 0; j < D; ++j) flat<T>(dgamma, j) = static_cast<T>(dg[static_cast<std::size_t>(j)]);
  });
}

}  // namespace stepformer::reference
