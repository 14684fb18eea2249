// Fused Adam / AdamW: the per-element formula is ../elementwise_math.h's adam_element; the CPU's own is the
// loop, in chunks over threads, each chunk one pass over p, g, m and v (vectorised through SIMD clones).
#include <algorithm>

#include "../elementwise_math.h"
#include "cpu_backend.h"
#include "strided.h"
#include "vmath.h"

namespace stepformer::cpu {

namespace {

STEPFORMER_SIMD_CLONES void update_range(float* p, const float* g, float* m, float* v, std::int64_t n,
                                         const AdamStep& s) {
  for (std::int64_t i = 0; i < n; ++i) adam_element(p[i], g[i], m[i], v[i], s);
}
void update_range(double* p, const double* g, double* m, double* v, std::int64_t n, const AdamStep& s) {
  for (std::int64_t i = 0; i < n; ++i) adam_element(p[i], g[i], m[i], v[i], s);
}

}  // namespace

void CpuBackend::adam_update(const TensorDesc& param, const TensorDesc& grad, const TensorDesc& m, const TensorDesc& v,
                             const AdamConfig& cfg) {
  const std::int64_t n = param.numel();
  const AdamStep s = at_step_values(adam_step(cfg), static_cast<const double*>(cfg.step_values.data));
  dispatch_floating(param.dtype, "adam_update", [&](auto t) {
    using T = decltype(t);
    constexpr std::int64_t kChunk = 4096;
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
    for (std::int64_t i = 0; i < n; i += kChunk)
      update_range(ptr<T>(param) + i, ptr<T>(grad) + i, ptr<T>(m) + i, ptr<T>(v) + i, std::min(kChunk, n - i), s);
  });
}

}  // namespace stepformer::cpu
