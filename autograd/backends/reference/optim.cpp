// One Adam / AdamW step (Kingma & Ba 2015, Algorithm 1; Loshchilov & Hutter 2019 for the decoupled decay),
// in double per element, in the operation order of torch.optim.Adam / AdamW:
//   Adam:  g += wd p            AdamW: p *= 1 - lr wd
//   m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g^2
//   p -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
#include <cmath>

#include "reference_backend.h"
#include "strided.h"

namespace stepformer::reference {

void ReferenceBackend::adam_update(const TensorDesc& param, const TensorDesc& grad, const TensorDesc& m,
                                   const TensorDesc& v, const AdamConfig& cfg) {
  const double bc1 = 1.0 - std::pow(cfg.beta1, static_cast<double>(cfg.step));
  const double bc2 = 1.0 - std::pow(cfg.beta2, static_cast<double>(cfg.step));
  dispatch_floating(param.dtype, "adam_update", [&](auto t) {
    using T = decltype(t);
    for (std::int64_t i = 0; i < param.numel(); ++i) {
      double g = flat<T>(grad, i), p = flat<T>(param, i);
      if (cfg.decoupled)
        p *= 1.0 - cfg.lr * cfg.weight_decay;
      else
        g += cfg.weight_decay * p;
      const double mi = cfg.beta1 * flat<T>(m, i) + (1 - cfg.beta1) * g;
      const double vi = cfg.beta2 * flat<T>(v, i) + (1 - cfg.beta2) * g * g;
      p -= cfg.lr * (mi / bc1) / (std::sqrt(vi / bc2) + cfg.eps);
      flat<T>(m, i) = static_cast<T>(mi);
      flat<T>(v, i) = static_cast<T>(vi);
      flat<T>(param, i) = static_cast<T>(p);
    }
  });
}

}  // namespace stepformer::reference
