// Chapter 12. Shape legend in transformer/config.h.
#include "transformer/sampling.h"

#include <fmt/format.h>

#include <algorithm>

#include "autograd/device_graph.h"
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
  // On a CUDA device the cached step of one token is recorded once as a device graph and replayed for each next
  // token (docs/09_cuda.md, "Graphs"): one launch a token. Its position and its draw's number are read on the device,
  // where the step advances them. The first token after the prompt runs eagerly, and so does the first step at a
  // device position (PyTorch's advice: caches and tables are made before a recording, which may copy nothing).
  const bool replay =
      use_cache && count > 2 && (device.type == DeviceType::cuda || device.type == DeviceType::cuda_sim);
  const std::int64_t eager = replay ? 2 : count;
  for (std::int64_t i = 0; i < eager; ++i) {
    if (replay && i == 1) cache.keep_position_on_device(device);
    const Tensor logits = use_cache ? model(feed, &cache) : model(sequence);  // [1, t, V]
    const Tensor last = view(narrow(logits, 1, logits.size(1) - 1, 1), {logits.size(2)});
    feed = view(sample_token(last, o, gen, narrow(tokens, 0, i, 1)).token, {1, 1});
    if (!use_cache) sequence = cat({sequence, feed}, 1);
  }
  if (replay) {
    // The step's input and output: one token, in memory the graph keeps. Token i is drawn at the position after
    // the one it is fed at, as draw number i - 2 of the run the recording's gen.take(1) starts.
    Tensor token = empty({1}, {DType::int64, device});
    copy_(token, view(feed, {1}));
    const std::int64_t first_drawn = cache.length() + 1;
    DeviceGraph step(device, [&] {
      const Tensor logits = model(view(token, {1, 1}), &cache);
      sample_token(view(logits, {logits.size(2)}), o, gen, token, cache.position->tensor(), first_drawn);
    });
    for (std::int64_t i = 2; i < count; ++i) {
      if (i > 2) gen.take(1);  // the recording took draw 2's; the generator ends where the eager loop's would
      step.replay();
      Tensor slot = narrow(tokens, 0, i, 1);
      copy_(slot, token);
    }
  }
  model.train(was_training);
  return tokens.to_vector<std::int64_t>();
}

}  // namespace stepformer::transformer
