// Random fills of a contiguous tensor: element i takes the bits random_bits(seed, offset, i), whichever
// thread computes it, so the result does not depend on the thread count. One loop per distribution, in
// multi-versioned functions, so that the Philox rounds run 8 or 16 elements at a time; dropout's mask, on a CPU with
// AVX-512F, in random_avx512.cpp's own loop (the same bits, twice the speed). And sampling a token.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "../sampling_math.h"
#include "autograd/random.h"
#include "cpu_backend.h"
#include "random_fill.h"
#include "strided.h"
#include "vmath.h"

namespace stepformer::cpu {

namespace {

template <class T>
[[gnu::always_inline]] inline void fill_range(T* o, std::int64_t i0, std::int64_t i1, Distribution dist, double a,
                                              double b, std::uint64_t seed, std::uint64_t offset) {
  switch (dist) {
    case Distribution::uniform:
      fill_pairs(o, i0, i1, seed, offset, [&](std::uint64_t bits) {
        const T v = static_cast<T>(a + (b - a) * uniform01(bits));
        return v >= static_cast<T>(b) && a < b ? std::nextafter(static_cast<T>(b), static_cast<T>(a)) : v;  // [a, b)
      });
      break;
    case Distribution::normal:
      fill_pairs(o, i0, i1, seed, offset,
                 [&](std::uint64_t bits) { return static_cast<T>(a + b * standard_normal(bits)); });
      break;
    case Distribution::dropout: {
      const T scale = static_cast<T>(1.0 / (1.0 - a));
      fill_pairs(o, i0, i1, seed, offset, [&](std::uint64_t bits) { return uniform01(bits) < a ? T(0) : scale; });
      break;
    }
  }
}

STEPFORMER_SIMD_CLONES void fill_chunk(float* o, std::int64_t i0, std::int64_t i1, Distribution dist, double a,
                                       double b, std::uint64_t seed, std::uint64_t offset) {
#if defined(__x86_64__)
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (dist == Distribution::dropout && a >= 0 && a < 1 && avx512) {  // i0 is even (a multiple of kChunk)
    const std::int64_t rest = dropout_mask_avx512(o + i0, i0, i1, a, seed, offset);
    return fill_range(o + rest, rest, i1, dist, a, b, seed, offset);
  }
#endif
  fill_range(o + i0, i0, i1, dist, a, b, seed, offset);
}
void fill_chunk(double* o, std::int64_t i0, std::int64_t i1, Distribution dist, double a, double b, std::uint64_t seed,
                std::uint64_t offset) {
  fill_range(o + i0, i0, i1, dist, a, b, seed, offset);
}

}  // namespace

void CpuBackend::random_fill(const TensorDesc& out, Distribution dist, double a, double b, std::uint64_t seed,
                             std::uint64_t offset) {
  const std::int64_t n = out.numel();
  dispatch_floating(out.dtype, "random_fill", [&](auto t) {
    using T = decltype(t);
    constexpr std::int64_t kChunk = 4096;
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
    for (std::int64_t i = 0; i < n; i += kChunk)
      fill_chunk(ptr<T>(out), i, std::min(n, i + kChunk), dist, a, b, seed, offset);
  });
}

// Sampling (sampling_math.h's steps): a sort of V ids, tiny next to the model's forward; on one thread.
void CpuBackend::sample_token(const TensorDesc& token, const TensorDesc& probs, const TensorDesc& logits,
                              const SamplingConfig& cfg, const TokenDraw& d) {
  const auto n = static_cast<std::size_t>(logits.numel());
  double* p = ptr<double>(probs);
  dispatch_floating(logits.dtype, "sample_token", [&](auto t) {
    const auto* l = ptr<decltype(t)>(logits);
    const std::size_t best = first_max(l, n);
    const auto max_logit = static_cast<double>(l[best]);
    for (std::size_t v = 0; v < n; ++v)
      p[v] = sampling_weight(static_cast<double>(l[v]), max_logit, v == best, cfg.temperature);
  });
  std::vector<std::int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [p](std::int64_t a, std::int64_t b) { return likelier(p, a, b); });
  std::vector<double> sorted(n);
  const double u =
      d.counter.data ? token_uniform(d.seed, d.offset, *ptr<std::int64_t>(d.counter) - d.counter_base) : d.u;
  *ptr<std::int64_t>(token) = cut_and_draw(p, order.data(), sorted.data(), n, cfg, u);
}

}  // namespace stepformer::cpu
