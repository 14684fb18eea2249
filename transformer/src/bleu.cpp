// Chapter 07: corpus BLEU.
#include "transformer/bleu.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "autograd/errors.h"

namespace stepformer::transformer {

namespace {

using Counts = std::map<std::vector<std::string>, std::size_t>;

Counts ngrams(const std::vector<std::string>& words, std::size_t n) {
  Counts counts;
  for (std::size_t i = 0; i + n <= words.size(); ++i) ++counts[{words.begin() + i, words.begin() + i + n}];
  return counts;
}

}  // namespace

BleuScore corpus_bleu(const std::vector<std::vector<std::string>>& hypotheses,
                      const std::vector<std::vector<std::string>>& references) {
  if (hypotheses.size() != references.size())
    throw ValueError(fmt::format("corpus_bleu: {} hypotheses but {} references", hypotheses.size(), references.size()));
  std::array<std::size_t, 4> matched{}, total{};
  BleuScore s;
  for (std::size_t i = 0; i < hypotheses.size(); ++i) {
    s.hypothesis_length += hypotheses[i].size();
    s.reference_length += references[i].size();
    for (std::size_t n = 1; n <= 4; ++n) {
      const Counts ref = ngrams(references[i], n);
      for (const auto& [gram, count] : ngrams(hypotheses[i], n)) {
        const auto it = ref.find(gram);
        matched[n - 1] += std::min(count, it == ref.end() ? 0 : it->second);  // clipped by the reference
        total[n - 1] += count;
      }
    }
  }
  double log_sum = 0;
  for (std::size_t n = 0; n < 4; ++n) {
    s.precisions[n] = total[n] ? static_cast<double>(matched[n]) / static_cast<double>(total[n]) : 0.0;
    log_sum += s.precisions[n] > 0 ? std::log(s.precisions[n]) : -INFINITY;
  }
  const double c = static_cast<double>(s.hypothesis_length), r = static_cast<double>(s.reference_length);
  s.brevity_penalty = c == 0 ? 0.0 : c < r ? std::exp(1.0 - r / c) : 1.0;
  s.bleu = std::isinf(log_sum) ? 0.0 : 100.0 * s.brevity_penalty * std::exp(log_sum / 4.0);
  return s;
}

}  // namespace stepformer::transformer
