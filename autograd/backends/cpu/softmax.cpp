// Row softmax and log-softmax over contiguous rows, max-subtracted for stability. Sums run in double over
// float blocks (block_sum, vmath.h), vectorised in a lane-wise order that is the same on every run.
#include <cmath>

#include "cpu_backend.h"
#include "strided.h"
#include "vmath.h"

namespace stepformer::cpu {

namespace {

template <class T>
[[gnu::always_inline]] inline void forward_row(const T* x, T* y, std::int64_t C, bool log) {
  T mx = x[0];
#pragma omp simd reduction(max : mx)
  for (std::int64_t c = 1; c < C; ++c) mx = std::max(mx, x[c]);
  if (log) {
    const double total = block_sum<T>(C, [&](std::int64_t c) { return exp_of(x[c] - mx); });
    const T lse = static_cast<T>(std::log(total));
    for (std::int64_t c = 0; c < C; ++c) y[c] = x[c] - mx - lse;
  } else {  // exp once: y holds exp(x - max) until it is scaled
    const double total = block_sum<T>(C, [&](std::int64_t c) { return y[c] = exp_of(x[c] - mx); });
    const T inv = static_cast<T>(1.0 / total);
    for (std::int64_t c = 0; c < C; ++c) y[c] *= inv;
  }
}

template <class T>
[[gnu::always_inline]] inline void backward_row(const T* g, const T* y, T* gi, std::int64_t C, bool log) {
  if (log) {  // two loops, not a select inside one: each vectorises
    const T s = static_cast<T>(block_sum<T>(C, [&](std::int64_t c) { return g[c]; }));
    for (std::int64_t c = 0; c < C; ++c) gi[c] = g[c] - exp_of(y[c]) * s;
  } else {
    const T s = static_cast<T>(block_sum<T>(C, [&](std::int64_t c) { return g[c] * y[c]; }));
    for (std::int64_t c = 0; c < C; ++c) gi[c] = y[c] * (g[c] - s);
  }
}

STEPFORMER_SIMD_CLONES void forward_rows(const float* x, float* y, std::int64_t C, bool log) {
  forward_row(x, y, C, log);
}
void forward_rows(const double* x, double* y, std::int64_t C, bool log) { forward_row(x, y, C, log); }
STEPFORMER_SIMD_CLONES void backward_rows(const float* g, const float* y, float* gi, std::int64_t C, bool log) {
  backward_row(g, y, gi, C, log);
}
void backward_rows(const double* g, const double* y, double* gi, std::int64_t C, bool log) {
  backward_row(g, y, gi, C, log);
}

}  // namespace

void CpuBackend::softmax_forward(const TensorDesc& out, const TensorDesc& in, bool log) {
  const std::int64_t C = in.ndim ? in.shape[in.ndim - 1] : 1;
  const std::int64_t rows = C ? in.numel() / C : 0;
  dispatch_floating(in.dtype, "softmax", [&](auto t) {
    using T = decltype(t);
#pragma omp parallel for schedule(static) if (rows * C >= kParallelGrain)
    for (std::int64_t r = 0; r < rows; ++r) forward_rows(ptr<T>(in) + r * C, ptr<T>(out) + r * C, C, log);
  });
}

void CpuBackend::softmax_backward(const TensorDesc& grad_in, const TensorDesc& grad_out, const TensorDesc& out,
                                  bool log) {
  const std::int64_t C = out.ndim ? out.shape[out.ndim - 1] : 1;
  const std::int64_t rows = C ? out.numel() / C : 0;
  dispatch_floating(out.dtype, "softmax_backward", [&](auto t) {
    using T = decltype(t);
#pragma omp parallel for schedule(static) if (rows * C >= kParallelGrain)
    for (std::int64_t r = 0; r < rows; ++r)
      backward_rows(ptr<T>(grad_out) + r * C, ptr<T>(out) + r * C, ptr<T>(grad_in) + r * C, C, log);
  });
}

}  // namespace stepformer::cpu
