// Chapter 12. Shape legend in transformer/config.h.
#include "transformer/sampling.h"

#include <fmt/format.h>

#include <algorithm>

#include "autograd/errors.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"

namespace stepformer::transformer {

std::vector<double> sampling_distribution(const std::vector<double>& logits, const SamplingOptions& o) {
  Generator unused(0);  // the distribution does not depend on the draw
  const auto V = static_cast<std::int64_t>(logits.size());
  return sample_token(from_vector(logits, {V}, {DType::float64}), o, unused).probs.to_vector<double>();
}

std::int64_t next_token(const Tensor& logits, const SamplingOptions& o, Generator& gen) {
  return sample_token(logits, o, gen).token.to_vector<std::int64_t>()[0];
}

std::vector<std::int64_t> generate(LanguageModel& model, const std::vector<std::int64_t>& prompt, std::int64_t count,
                                   const SamplingOptions& o, Generator& gen, bool use_cache) {
  if (prompt.empty() || count < 0)
    throw ValueError(
        fmt::format("generate: needs a prompt and count >= 0, got {} tokens and count {}", prompt.size(), count));
  const NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  const Device device = model.tokens->weight.device();
  const auto ids_tensor = [&](std::vector<std::int64_t> ids) {
    const std::int64_t T = static_cast<std::int64_t>(ids.size());
    return from_vector(ids, {1, T}, {DType::int64, device});
  };
  // The last token sampled is never fed back: the cache holds at most the prompt and count - 1 more.
  KVCache cache = model.make_cache(static_cast<std::int64_t>(prompt.size()) + std::max<std::int64_t>(count - 1, 0));
  Tensor sequence = ids_tensor(prompt), feed = sequence;         // the tokens so far; what the next forward reads
  const Tensor tokens = empty({count}, {DType::int64, device});  // written on the device, read once at the end
  for (std::int64_t i = 0; i < count; ++i) {
    const Tensor logits = use_cache ? model(feed, &cache) : model(sequence);  // [1, t, V]
    const Tensor last = view(narrow(logits, 1, logits.size(1) - 1, 1), {logits.size(2)});
    feed = view(sample_token(last, o, gen, narrow(tokens, 0, i, 1)).token, {1, 1});
    if (!use_cache) sequence = cat({sequence, feed}, 1);
  }
  model.train(was_training);
  return tokens.to_vector<std::int64_t>();
}

}  // namespace stepformer::transformer
