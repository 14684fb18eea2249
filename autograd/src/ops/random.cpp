// Random tensors and dropout, from the counter-based generator (autograd/random.h).
#include "common.h"

namespace stepformer {

namespace {
Tensor random_tensor(const char* op, const Shape& shape, Distribution dist, double a, double b, Generator& gen,
                     Options o) {
  if (o.dtype != DType::float32 && o.dtype != DType::float64)
    throw DTypeError(fmt::format("{}: random tensors must be float32 or float64, got {}", op, dtype_name(o.dtype)));
  const bool rg = o.requires_grad;
  o.requires_grad = false;
  Tensor t = empty(shape, o);
  const std::uint64_t offset = gen.take(static_cast<std::uint64_t>(t.numel()));
  t.backend().random_fill(t.desc(), dist, a, b, gen.seed(), offset);
  if (rg) t.set_requires_grad(true);
  return t;
}
}  // namespace

Tensor rand(const Shape& shape, Generator& gen, Options o) { return uniform(shape, 0.0, 1.0, gen, o); }
Tensor randn(const Shape& shape, Generator& gen, Options o) { return normal(shape, 0.0, 1.0, gen, o); }

Tensor uniform(const Shape& shape, double low, double high, Generator& gen, Options o) {
  if (!(low <= high)) throw ValueError(fmt::format("uniform: low {} must not exceed high {}", low, high));
  return random_tensor("uniform", shape, Distribution::uniform, low, high, gen, o);
}

Tensor normal(const Shape& shape, double mean, double std, Generator& gen, Options o) {
  if (!(std >= 0)) throw ValueError(fmt::format("normal: std must be >= 0, got {}", std));
  return random_tensor("normal", shape, Distribution::normal, mean, std, gen, o);
}

// Srivastava et al. (2014), in the "inverted" form PyTorch uses: scale at training time so that
// evaluation is the identity.
Tensor dropout(const Tensor& a, double p, bool training, Generator& gen) {
  detail::check_operands("dropout", {&a});
  detail::check_full_precision("dropout", a);
  if (!(p >= 0 && p <= 1)) throw ValueError(fmt::format("dropout: p must be in [0, 1], got {}", p));
  if (!training || p == 0) return a;
  if (p == 1) return a * 0.0;
  Tensor mask = random_tensor("dropout", a.shape(), Distribution::dropout, p, 0.0, gen, {a.dtype(), a.device()});
  Tensor out;
  {
    NoGradGuard no_grad;
    out = mul(a, mask);
  }
  record(Op::dropout, out, {a}, {mask},
         [](const Tensor& g, const Tensor& mask) -> Gradients { return {mul(g, mask)}; });
  return out;
}

}  // namespace stepformer
