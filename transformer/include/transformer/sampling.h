#pragma once
// Chapter 12 — generating text: greedy decoding and sampling with temperature, top-k and top-p, with or
// without the KV cache. Read docs/12_modern_lm.md beside this file.
#include <cstdint>
#include <vector>

#include "autograd/random.h"
#include "transformer/language_model.h"

namespace stepformer::transformer {

// temperature, top_k, top_p (backend.h). The rule itself, exercise 12.5's nucleus_size among it, is written once
// for every backend in autograd/backends/sampling_math.h; the op sample_token (autograd/ops.h) runs it.
using SamplingOptions = SamplingConfig;

// The probabilities next_token draws from: softmax(logits / temperature), cut to top-k and then to the nucleus
// top-p, renormalised (float64, [V]). Greedy (temperature 0) is all mass on the first largest logit.
std::vector<double> sampling_distribution(const std::vector<double>& logits, const SamplingOptions& o);

// One token from logits [V] (any device and float dtype), read back to the host. Reproducible: one uniform draw
// from `gen`, inverted through the cumulative distribution, so the same seed and offset give the same token.
std::int64_t next_token(const Tensor& logits, const SamplingOptions& o, Generator& gen);

// `count` tokens after `prompt` (ids), in eval mode without a graph. With the cache, the prompt is run once and
// then each step runs one token; without, each step runs the whole sequence so far (the loop a cache removes).
// Both give the same tokens. Each token is drawn and fed back on the model's device; the host reads them once,
// at the end. On a CUDA device the cached step is recorded once as a device graph and replayed from the third token
// on, its position kept on the device (KVCache::keep_position_on_device): the same tokens, one launch a step. The
// sequence may not outgrow the model's max_len (sinusoidal or learned positions).
std::vector<std::int64_t> generate(LanguageModel& model, const std::vector<std::int64_t>& prompt, std::int64_t count,
                                   const SamplingOptions& o, Generator& gen, bool use_cache = true);

}  // namespace stepformer::transformer
