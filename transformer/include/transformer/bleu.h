#pragma once
// Chapter 07 — corpus BLEU (Papineni et al. 2002), the score section 6.1 of the paper reports.
#include <array>
#include <string>
#include <vector>

namespace stepformer::transformer {

struct BleuScore {
  double bleu = 0;                     // 0..100
  std::array<double, 4> precisions{};  // modified n-gram precisions, n = 1..4, in 0..1
  double brevity_penalty = 0;
  std::size_t hypothesis_length = 0, reference_length = 0;
};

// BLEU-4 over a corpus with one reference per sentence: n-gram counts are clipped by the reference's
// counts and summed over the corpus before dividing (not averaged per sentence), the geometric mean of
// the four precisions is multiplied by the brevity penalty exp(1 - r/c) when c < r. No smoothing: a
// corpus without a single matching 4-gram scores 0, as in sacreBLEU's default. Scores depend on the
// tokenization, so compare them only between runs that tokenize alike.
BleuScore corpus_bleu(const std::vector<std::vector<std::string>>& hypotheses,
                      const std::vector<std::vector<std::string>>& references);

}  // namespace stepformer::transformer
