// Fused Adam / AdamW update (Kingma & Ba 2015, Algorithm 1; Loshchilov & Hutter 2019), the same
// operation order as backends/cpu/optim.cpp and torch.optim.Adam(W) (foreach=False), in double per element.
//
// Mapping: one thread per parameter element, grid-stride. Each thread reads p, g, m, v once and writes
// p, m, v once: one pass over memory instead of the ~10 an unfused update would make.
#include <cmath>

#include "cuda_backend.h"
#include "device_utils.cuh"

namespace stepformer::STEPFORMER_CUDA_NS {

namespace {

struct Step {
  double lr, beta1, beta2, eps, weight_decay, bc1, bc2;
  bool decoupled;
};

template <class T>
__global__ void adam_kernel(T* p, const T* g, T* m, T* v, std::int64_t n, Step s) {
  for (std::int64_t i = global_thread(); i < n; i += grid_threads()) {
    double gi = g[i];
    double pi = p[i];
    if (s.decoupled)
      pi *= 1.0 - s.lr * s.weight_decay;  // AdamW: decay the weight itself
    else
      gi += s.weight_decay * pi;  // Adam: L2 term in the gradient
    const double mi = s.beta1 * m[i] + (1 - s.beta1) * gi;
    const double vi = s.beta2 * v[i] + (1 - s.beta2) * gi * gi;
    pi -= s.lr * (mi / s.bc1) / (sqrt_(vi / s.bc2) + s.eps);
    m[i] = static_cast<T>(mi);
    v[i] = static_cast<T>(vi);
    p[i] = static_cast<T>(pi);
  }
}

}  // namespace

void CudaBackend::adam_update(const TensorDesc& param, const TensorDesc& grad, const TensorDesc& m, const TensorDesc& v,
                              const AdamConfig& cfg) {
  const std::int64_t n = param.numel();
  if (n == 0) return;
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
    launch(adam_kernel<T>, blocks_for(n, 256), 256u, 0, static_cast<T*>(param.data), static_cast<const T*>(grad.data),
           static_cast<T*>(m.data), static_cast<T*>(v.data), n, s);
  });
}

}  // namespace stepformer::STEPFORMER_CUDA_NS
