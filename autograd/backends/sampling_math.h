#pragma once
// Drawing one token from logits (chapter 12: temperature, top-k, top-p), written once for every backend as
// elementwise_math.h is. Each backend's sample_token runs these steps, with the same additions in the same order, so
// the reference, the CPU and cuda-sim compute the same probabilities to the bit and draw the same token for the
// same logits and u (a GPU's exp may differ from the CPU's in the last bit, which changes a token only where u
// falls within that of a boundary of the cumulative distribution):
//   1. weights w_v = exp((l_v - l_max) / T), l_max the first largest logit (`first_max`, `sampling_weight`);
//      T = 0 puts weight 1 on that token and 0 on the rest (greedy);
//   2. the ids ordered likeliest first, ties by id (`likelier`): each backend sorts its own way;
//   3. how many of them survive top-k and top-p (`nucleus_size`, `cut`), renormalised to probabilities;
//   4. the inverse of the cumulative distribution, summed in id order, at u (`draw`).
// The additions (the kept mass, the cumulative sum) run on one thread even on a GPU: a parallel sum would round
// differently and, at a tie with u, pick another token.
#include <cstddef>
#include <cstdint>

#include "autograd/random.h"  // token_uniform
#include "elementwise_math.h"

namespace stepformer {

template <class T>
STEPFORMER_MATH_FN std::size_t first_max(const T* logits, std::size_t n) {
  std::size_t best = 0;
  for (std::size_t v = 1; v < n; ++v)
    if (logits[v] > logits[best]) best = v;
  return best;
}

STEPFORMER_MATH_FN double sampling_weight(double logit, double max_logit, bool is_max, double temperature) {
  if (temperature == 0) return is_max ? 1.0 : 0.0;
  return exp_((logit - max_logit) / temperature);
}

// Whether id a comes before id b in the order of step 2.
STEPFORMER_MATH_FN bool likelier(const double* w, std::int64_t a, std::int64_t b) {
  return w[a] > w[b] || (w[a] == w[b] && a < b);
}

// How many of the likeliest tokens survive: `sorted` holds n (unnormalised) probabilities most likely first;
// top-k keeps the first top_k of them (all when top_k is 0 or at least n), then top-p keeps the fewest leading
// ones whose mass reaches top_p times what top-k kept (the one that crosses it included).
STEPFORMER_MATH_FN std::size_t nucleus_size(const double* sorted, std::size_t n, std::int64_t top_k, double top_p) {
  // EXERCISE 12.5: the first top_k (0 or too many: all), then the fewest whose mass reaches top_p of it
  const std::size_t keep = top_k > 0 && static_cast<std::size_t>(top_k) < n ? static_cast<std::size_t>(top_k) : n;
  double total = 0;
  for (std::size_t i = 0; i < keep; ++i) total += sorted[i];
  double mass = 0;
  for (std::size_t i = 0; i < keep; ++i) {
    mass += sorted[i];
    if (mass >= top_p * total) return i + 1;  // the token that crosses p is kept: the nucleus is never empty
  }
  return keep;
  // END EXERCISE
}

// Step 3's cut, after the gather sorted[i] = p[order[i]]: how many survive (`nucleus_size`) and their mass, summed
// in order.
struct Cut {
  std::size_t keep;
  double kept;
};
STEPFORMER_MATH_FN Cut cut(const double* sorted, std::size_t n, const SamplingConfig& cfg) {
  const std::size_t keep = nucleus_size(sorted, n, cfg.top_k, cfg.top_p);
  double kept = 0;
  for (std::size_t i = 0; i < keep; ++i) kept += sorted[i];
  return {keep, kept};
}

// Step 3's renormalisation of the id of rank i: its kept weight over the kept mass, or 0.
STEPFORMER_MATH_FN double renormalised(const double* sorted, std::size_t i, const Cut& c) {
  return i < c.keep ? sorted[i] / c.kept : 0.0;
}

// Step 4 on the distribution p [n]: the first id whose cumulative probability exceeds u; a u within rounding of 1
// gets the last kept id.
STEPFORMER_MATH_FN std::int64_t draw(const double* p, std::size_t n, double u) {
  double cumulative = 0;
  std::int64_t last = 0;
  for (std::size_t v = 0; v < n; ++v) {
    if (p[v] <= 0) continue;
    last = static_cast<std::int64_t>(v);
    cumulative += p[v];
    if (u < cumulative) return last;
  }
  return last;
}

// Steps 3 and 4 on the weights p [n] (step 1) and `order` (step 2), one after the other: p becomes the distribution
// drawn from, and the token is returned. `sorted` is scratch for n values. (The CUDA kernel runs the same steps with
// the gather and the renormalisation spread over its threads.)
STEPFORMER_MATH_FN std::int64_t cut_and_draw(double* p, const std::int64_t* order, double* sorted, std::size_t n,
                                             const SamplingConfig& cfg, double u) {
  for (std::size_t i = 0; i < n; ++i) sorted[i] = p[order[i]];
  const Cut c = cut(sorted, n, cfg);
  for (std::size_t i = 0; i < n; ++i) p[order[i]] = renormalised(sorted, i, c);
  return draw(p, n, u);
}

}  // namespace stepformer
