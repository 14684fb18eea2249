// Random tensors and dropout, from the counter-based generator (autograd/random.h).
#include "common.h"

namespace stepformer {

namespace {
// A new tensor filled from the counters [offset, ...) of `seed`: the same numbers however often it is drawn.
Tensor fill_from_counters(const Shape& shape, Distribution dist, double a, double b, std::uint64_t seed,
                          std::uint64_t offset, Options o) {
  Tensor t = empty(shape, o);
  t.backend().random_fill(t.desc(), dist, a, b, seed, offset);
  return t;
}

Tensor random_tensor(const char* op, const Shape& shape, Distribution dist, double a, double b, Generator& gen,
                     Options o) {
  if (o.dtype != DType::float32 && o.dtype != DType::float64)
    throw DTypeError(fmt::format("{}: random tensors must be float32 or float64, got {}", op, dtype_name(o.dtype)));
  const bool rg = o.requires_grad;
  o.requires_grad = false;
  const std::uint64_t offset = gen.take(static_cast<std::uint64_t>(numel(shape)));  // numel checks the shape
  Tensor t = fill_from_counters(shape, dist, a, b, gen.seed(), offset, o);
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
// evaluation is the identity. The mask (0 or 1 / (1 - p)) is not kept for backward, which draws it again
// from the same counters: the generator is counter-based, so the second draw is the first, bit for bit.
// FlashAttention replays its dropout the same way. A kept mask is a float tensor as large as the input at
// every dropout: 151 MB of the base model's bf16 step's peak memory, against one more fill (docs/performance.md).
Tensor dropout(const Tensor& a, double p, bool training, Generator& gen) {
  detail::check_operands("dropout", {&a});
  detail::check_full_precision("dropout", a);
  if (!(p >= 0 && p <= 1)) throw ValueError(fmt::format("dropout: p must be in [0, 1], got {}", p));
  if (!training || p == 0) return a;
  if (p == 1) return a * 0.0;
  const std::uint64_t seed = gen.seed(), offset = gen.take(static_cast<std::uint64_t>(a.numel()));
  const auto mask = [shape = a.shape(), p, seed, offset, o = Options{a.dtype(), a.device()}] {
    return fill_from_counters(shape, Distribution::dropout, p, 0.0, seed, offset, o);
  };
  Tensor out;
  {
    NoGradGuard no_grad;
    out = mul(a, mask());
  }
  record(Op::dropout, out, {a}, [mask](const Tensor& g) -> Gradients { return {mul(g, mask())}; });
  return out;
}

SampledToken sample_token(const Tensor& logits, const SamplingConfig& cfg, Generator& gen, const Tensor& into,
                          const Tensor& counter, std::int64_t counter_base) {
  detail::check_operands("sample_token", {&logits});
  if (logits.dim() != 1 || logits.numel() == 0)
    throw ShapeError(fmt::format("sample_token expected logits [V] with V > 0, got {}", to_string(logits.shape())));
  detail::check_floating("sample_token", logits);
  if (!(cfg.temperature >= 0) || cfg.top_k < 0 || !(cfg.top_p > 0 && cfg.top_p <= 1))
    throw ValueError(fmt::format("sample_token: temperature {} must be >= 0, top_k {} >= 0, top_p {} in (0, 1]",
                                 cfg.temperature, cfg.top_k, cfg.top_p));
  if (into.defined()) {
    detail::check_operands("sample_token", {&logits, &into}, false);
    if (into.shape() != Shape{1})
      throw ShapeError(fmt::format("sample_token: into must be [1], got {}", to_string(into.shape())));
    if (into.dtype() != DType::int64)
      throw DTypeError(fmt::format("sample_token: into must be int64, got {}", dtype_name(into.dtype())));
  }
  if (counter.defined()) {
    detail::check_operands("sample_token", {&logits, &counter}, false);
    if (counter.shape() != Shape{1} || counter.dtype() != DType::int64)
      throw ShapeError(fmt::format("sample_token: the counter must be int64 [1], got {} {}",
                                   dtype_name(counter.dtype()), to_string(counter.shape())));
  }
  const NoGradGuard no_grad;
  // The backends read float32 and float64; a bfloat16 logit converts to float32 exactly.
  const Tensor l = contiguous(logits.dtype() == DType::bfloat16 ? logits.to(DType::float32) : logits);
  SampledToken s{into.defined() ? into : empty({1}, {DType::int64, logits.device()}),
                 empty(logits.shape(), {DType::float64, logits.device()})};
  const std::uint64_t seed = gen.seed(), offset = gen.take(1);
  const TokenDraw draw{token_uniform(seed, offset, 0), counter.defined() ? counter.desc() : TensorDesc{}, seed, offset,
                       counter_base};
  l.backend().sample_token(s.token.desc(), s.probs.desc(), l.desc(), cfg, draw);
  return s;
}

}  // namespace stepformer
