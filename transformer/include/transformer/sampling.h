#pragma once
// Chapter 12 — generating text: greedy decoding and sampling with temperature, top-k and top-p, with or
// without the KV cache. Read docs/12_modern_lm.md beside this file.
#include <cstdint>
#include <vector>

#include "autograd/random.h"
#include "transformer/language_model.h"

namespace stepformer::transformer {

struct SamplingOptions {
  double temperature = 1.0;  // 0: greedy (argmax); < 1 sharpens the distribution, > 1 flattens it
  std::int64_t top_k = 0;    // keep the k most likely tokens (Fan et al. 2018); 0 keeps all
  double top_p = 1.0;  // keep the fewest most likely tokens whose probabilities sum to >= p (Holtzman et al. 2020)
};

// The probabilities next_token draws from: softmax(logits / temperature), cut to top-k and then to the nucleus
// top-p, renormalised (float64, [V]). Greedy (temperature 0) is all mass on the first largest logit.
std::vector<double> sampling_distribution(const std::vector<double>& logits, const SamplingOptions& o);

// How many of the likeliest tokens survive: `sorted` holds the (unnormalised) probabilities most likely first;
// top-k keeps the first top_k of them (all when top_k is 0 or at least their number), then top-p keeps the
// fewest leading ones whose mass reaches top_p times what top-k kept (the one that crosses it included).
std::size_t nucleus_size(const std::vector<double>& sorted, std::int64_t top_k, double top_p);

// One token from logits [V] (any device and float dtype). Reproducible: one uniform draw from `gen`, inverted
// through the cumulative distribution, so the same seed and offset give the same token.
std::int64_t next_token(const Tensor& logits, const SamplingOptions& o, Generator& gen);

// `count` tokens after `prompt` (ids), in eval mode without a graph. With the cache, the prompt is run once and
// then each step runs one token; without, each step runs the whole sequence so far (the loop a cache removes).
// Both give the same tokens. The sequence may not outgrow the model's max_len (sinusoidal or learned positions).
std::vector<std::int64_t> generate(LanguageModel& model, const std::vector<std::int64_t>& prompt, std::int64_t count,
                                   const SamplingOptions& o, Generator& gen, bool use_cache = true);

}  // namespace stepformer::transformer
