// Random fills: element i of the fill gets the bits random_bits(seed, offset, i) (autograd/random.h), so
// the reference, the CPU and the CUDA kernels all draw exactly the same numbers. And sampling a token.
#include <cmath>
#include <vector>

#include "../elementwise_math.h"
#include "../sampling_math.h"
#include "autograd/random.h"
#include "reference_backend.h"
#include "strided.h"

namespace stepformer::reference {

void ReferenceBackend::random_fill(const TensorDesc& out, Distribution dist, double a, double b, std::uint64_t seed,
                                   std::uint64_t offset) {
  dispatch_floating(out.dtype, "random_fill", [&](auto t) {
    using T = decltype(t);
    for (std::int64_t i = 0; i < out.numel(); ++i) {
      const std::uint64_t bits = random_bits(seed, offset, static_cast<std::uint64_t>(i));
      T& o = flat<T>(out, i);
      switch (dist) {
        case Distribution::uniform:  // U[a, b): a value that rounds up to b is moved just below it
          o = static_cast<T>(a + (b - a) * uniform01(bits));
          if (o >= static_cast<T>(b) && a < b) o = nextafter_(static_cast<T>(b), static_cast<T>(a));
          break;
        case Distribution::normal: o = static_cast<T>(a + b * standard_normal(bits)); break;
        case Distribution::dropout:  // zero with probability a, else 1 / (1 - a) (inverted dropout)
          o = uniform01(bits) < a ? T(0) : static_cast<T>(1.0 / (1.0 - a));
          break;
      }
    }
  });
}

// Sampling by sampling_math.h's steps; the order by counting, for each id, the ids likelier than it.
void ReferenceBackend::sample_token(const TensorDesc& token, const TensorDesc& probs, const TensorDesc& logits,
                                    const SamplingConfig& cfg, const TokenDraw& d) {
  const auto n = static_cast<std::size_t>(logits.numel());
  std::vector<double> l(n), p(n), sorted(n);
  dispatch_floating(logits.dtype, "sample_token", [&](auto t) {
    for (std::size_t v = 0; v < n; ++v)
      l[v] = static_cast<double>(flat<decltype(t)>(logits, static_cast<std::int64_t>(v)));
  });
  const std::size_t best = first_max(l.data(), n);
  for (std::size_t v = 0; v < n; ++v) p[v] = sampling_weight(l[v], l[best], v == best, cfg.temperature);
  std::vector<std::int64_t> order(n);
  for (std::size_t v = 0; v < n; ++v) {
    std::size_t rank = 0;
    for (std::size_t w = 0; w < n; ++w)
      rank += likelier(p.data(), static_cast<std::int64_t>(w), static_cast<std::int64_t>(v));
    order[rank] = static_cast<std::int64_t>(v);
  }
  const double u =
      d.counter.data ? token_uniform(d.seed, d.offset, flat<std::int64_t>(d.counter, 0) - d.counter_base) : d.u;
  flat<std::int64_t>(token, 0) = cut_and_draw(p.data(), order.data(), sorted.data(), n, cfg, u);
  for (std::size_t v = 0; v < n; ++v) flat<double>(probs, static_cast<std::int64_t>(v)) = p[v];
}

}  // namespace stepformer::reference
