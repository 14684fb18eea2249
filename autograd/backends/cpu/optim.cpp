// Fused Adam / AdamW update (Kingma & Ba 2015, Algorithm 1; Loshchilov & Hutter 2019 for decoupled
// decay), with the same operation order as torch.optim.Adam/AdamW (foreach=False), in double per element.
#include <algorithm>
#include <cmath>

#include "cpu_backend.h"
#include "strided.h"
#include "vmath.h"

namespace stepformer::cpu {

namespace {

struct Step {
  double lr, beta1, beta2, eps, weight_decay, bc1, bc2;
  bool decoupled;
};

template <class T>
[[gnu::always_inline]] inline void update(T* p, const T* g, T* m, T* v, std::int64_t n, const Step& s) {
  for (std::int64_t i = 0; i < n; ++i) {
    double gi = g[i];
    double pi = p[i];
    if (s.decoupled)
      pi *= 1.0 - s.lr * s.weight_decay;  // AdamW: decay the weight itself
    else
      gi += s.weight_decay * pi;  // Adam: L2 term in the gradient
    const double mi = s.beta1 * m[i] + (1 - s.beta1) * gi;
    const double vi = s.beta2 * v[i] + (1 - s.beta2) * gi * gi;
    pi -= s.lr * (mi / s.bc1) / (std::sqrt(vi / s.bc2) + s.eps);
    m[i] = static_cast<T>(mi);
    v[i] = static_cast<T>(vi);
    p[i] = static_cast<T>(pi);
  }
}

STEPFORMER_SIMD_CLONES void update_range(float* p, const float* g, float* m, float* v, std::int64_t n, const Step& s) {
  update(p, g, m, v, n, s);
}
void update_range(double* p, const double* g, double* m, double* v, std::int64_t n, const Step& s) {
  update(p, g, m, v, n, s);
}

}  // namespace

void CpuBackend::adam_update(const TensorDesc& param, const TensorDesc& grad, const TensorDesc& m, const TensorDesc& v,
                             const AdamConfig& cfg) {
  const std::int64_t n = param.numel();
  const Step s{cfg.lr,
               cfg.beta1,
               cfg.beta2,
               cfg.eps,
               cfg.weight_decay,
               1.0 - std::pow(cfg.beta1, static_cast<double>(cfg.step)),
               1.0 - std::pow(cfg.beta2, static_cast<double>(cfg.step)),
               cfg.decoupled};
  dispatch_floating(param.dtype, "adam_update", [&](auto t) {
    using T = decltype(t);
    constexpr std::int64_t kChunk = 4096;
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
    for (std::int64_t i = 0; i < n; i += kChunk)
      update_range(ptr<T>(param) + i, ptr<T>(grad) + i, ptr<T>(m) + i, ptr<T>(v) + i, std::min(kChunk, n - i), s);
  });
}

}  // namespace stepformer::cpu
