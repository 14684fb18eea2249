// Fused Adam / AdamW update (Kingma & Ba 2015, Algorithm 1; Loshchilov & Hutter 2019 for decoupled
// decay), with the same operation order as torch.optim.Adam/AdamW (foreach=False).
#include <cmath>

#include "cpu_backend.h"
#include "strided.h"

namespace stepformer::cpu {

void CpuBackend::adam_update(const TensorDesc& param, const TensorDesc& grad, const TensorDesc& m, const TensorDesc& v,
                             const AdamConfig& cfg) {
  const std::int64_t n = param.numel();
  const double bc1 = 1.0 - std::pow(cfg.beta1, static_cast<double>(cfg.step));
  const double bc2 = 1.0 - std::pow(cfg.beta2, static_cast<double>(cfg.step));
  dispatch_floating(param.dtype, "adam_update", [&](auto t) {
    using T = decltype(t);
    T *p = ptr<T>(param), *mm = ptr<T>(m), *vv = ptr<T>(v);
    const T* g = ptr<T>(grad);
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
    for (std::int64_t i = 0; i < n; ++i) {
      double gi = g[i];
      double pi = p[i];
      if (cfg.decoupled)
        pi *= 1.0 - cfg.lr * cfg.weight_decay;  // AdamW: decay the weight itself
      else
        gi += cfg.weight_decay * pi;  // Adam: L2 term in the gradient
      const double mi = cfg.beta1 * mm[i] + (1 - cfg.beta1) * gi;
      const double vi = cfg.beta2 * vv[i] + (1 - cfg.beta2) * gi * gi;
      pi -= cfg.lr * (mi / bc1) / (std::sqrt(vi / bc2) + cfg.eps);
      mm[i] = static_cast<T>(mi);
      vv[i] = static_cast<T>(vi);
      p[i] = static_cast<T>(pi);
    }
  });
}

}  // namespace stepformer::cpu
