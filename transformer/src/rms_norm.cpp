// Chapter 12. Shape legend in transformer/config.h.
#include "transformer/rms_norm.h"

#include <fmt/format.h>

#include "autograd/errors.h"
#include "autograd/ops.h"

namespace stepformer::transformer {

RMSNorm::RMSNorm(std::int64_t d, double e) : dim(d), eps(e) {
  if (d < 1 || !(e > 0))
    throw ValueError(fmt::format("RMSNorm: dim must be positive and eps > 0, got {} and {}", d, e));
  weight = register_parameter("weight", ones({d}));
}

Tensor RMSNorm::forward(const Tensor& x) {
  if (x.dim() < 1 || x.size(-1) != dim)
    throw ShapeError(fmt::format("RMSNorm expected [*, {}], got {}", dim, to_string(x.shape())));
  // One fused op (ops.h's rms_norm): a row's statistic and its gradient in one pass each, where the composite
  // x * rsqrt(mean(x * x) + eps) * weight launches six element-wise kernels and a reduction forward, and saves
  // four tensors for the backward.
  return rms_norm(x, weight, eps);
}

SumAndNorm add_then_norm(nn::UnaryModule& norm, const Tensor& x, const Tensor& residual) {
  auto* rms = dynamic_cast<RMSNorm*>(&norm);
  if (rms == nullptr) {
    Tensor sum = x + residual;
    return {sum, norm(sum)};
  }
  const ScopeGuard scope = rms->enter_scope();  // as calling the module would
  return add_rms_norm(x, residual, rms->weight, rms->eps);
}

std::shared_ptr<nn::UnaryModule> make_norm(NormKind kind, std::int64_t dim) {
  if (kind == NormKind::rms) return std::make_shared<RMSNorm>(dim);
  return std::make_shared<nn::LayerNorm>(dim);
}

}  // namespace stepformer::transformer
