// Chapter 12. Shape legend in transformer/config.h.
#include "transformer/sampling.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "autograd/errors.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"

namespace stepformer::transformer {

std::vector<double> sampling_distribution(const std::vector<double>& logits, const SamplingOptions& o) {
  const std::size_t V = logits.size();
  if (V == 0) throw ValueError("sampling: no logits");
  if (!(o.temperature >= 0) || o.top_k < 0 || !(o.top_p > 0 && o.top_p <= 1))
    throw ValueError(fmt::format("sampling: temperature {} must be >= 0, top_k {} >= 0, top_p {} in (0, 1]",
                                 o.temperature, o.top_k, o.top_p));
  std::vector<double> p(V, 0.0);
  const std::size_t best = static_cast<std::size_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  if (o.temperature == 0) {
    p[best] = 1.0;
    return p;
  }
  for (std::size_t v = 0; v < V; ++v) p[v] = std::exp((logits[v] - logits[best]) / o.temperature);
  std::vector<std::size_t> order(V);  // most likely first; ties by id, so the cut is deterministic
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return p[a] > p[b]; });
  std::vector<double> sorted(V);
  for (std::size_t i = 0; i < V; ++i) sorted[i] = p[order[i]];
  const std::size_t keep = nucleus_size(sorted, o.top_k, o.top_p);
  double kept = 0;
  for (std::size_t i = 0; i < keep; ++i) kept += p[order[i]];
  for (std::size_t i = 0; i < V; ++i) p[order[i]] = i < keep ? p[order[i]] / kept : 0.0;
  return p;
}

std::size_t nucleus_size(const std::vector<double>& sorted, std::int64_t top_k, double top_p) {
  // EXERCISE 12.5: the first top_k (0 or too many: all), then the fewest whose mass reaches top_p of it
  std::size_t keep = top_k > 0 ? std::min(sorted.size(), static_cast<std::size_t>(top_k)) : sorted.size();
  const double total = std::accumulate(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(keep), 0.0);
  double mass = 0;
  for (std::size_t i = 0; i < keep; ++i) {
    mass += sorted[i];
    if (mass >= top_p * total) return i + 1;  // the token that crosses p is kept: the nucleus is never empty
  }
  return keep;
  // END EXERCISE
}

std::int64_t next_token(const Tensor& logits, const SamplingOptions& o, Generator& gen) {
  if (logits.dim() != 1)
    throw ShapeError(fmt::format("next_token expected logits [V], got {}", to_string(logits.shape())));
  const std::vector<double> p = sampling_distribution(logits.cpu().to_vector<double>(), o);
  const double u = uniform01(random_bits(gen.seed(), gen.take(1), 0));
  double cumulative = 0;
  std::int64_t last = 0;
  for (std::size_t v = 0; v < p.size(); ++v) {
    if (p[v] <= 0) continue;
    last = static_cast<std::int64_t>(v);
    cumulative += p[v];
    if (u < cumulative) return last;
  }
  return last;  // u within rounding of 1
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
  std::vector<std::int64_t> sequence = prompt, out;
  // The last token sampled is never fed back: the cache holds at most the prompt and count - 1 more.
  KVCache cache = model.make_cache(static_cast<std::int64_t>(prompt.size()) + std::max<std::int64_t>(count - 1, 0));
  Tensor feed = ids_tensor(prompt);  // what the next forward reads
  for (std::int64_t i = 0; i < count; ++i) {
    const Tensor logits = use_cache ? model(feed, &cache) : model(ids_tensor(sequence));  // [1, t, V]
    const Tensor last = view(narrow(logits, 1, logits.size(1) - 1, 1), {logits.size(2)});
    const std::int64_t token = next_token(last, o, gen);
    sequence.push_back(token);
    out.push_back(token);
    // Written by a fill kernel, whose argument carries the id: a copy to a GPU would wait for its queue (docs/09).
    feed = full({1, 1}, static_cast<double>(token), {DType::int64, device});
  }
  model.train(was_training);
  return out;
}

}  // namespace stepformer::transformer
