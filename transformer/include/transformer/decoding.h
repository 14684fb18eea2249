#pragma once
// Chapter 07 — turning a trained model into translations: greedy and beam search, with the KV cache.
#include <cstdint>
#include <vector>

#include "transformer/model.h"

namespace stepformer::transformer {

struct DecodeOptions {
  std::int64_t pad = 0, bos = 1, eos = 2;  // PAD and BOS are never generated
  std::int64_t unk = 3;                    // nor UNK; -1 allows it
  std::int64_t max_len = 50;               // tokens generated at most (EOS included); capped by the model's max_len - 1
  bool use_cache = true;                   // false recomputes the whole prefix every step (for tests and teaching)
};

// The most likely token of one row of V scores (logits or log-probabilities) that decoding may generate:
// never PAD or BOS, nor UNK unless o.unk < 0.
std::int64_t best_token(const float* row, std::int64_t V, const DecodeOptions& o = {});

// Greedy: at every step the single most likely next token, for the whole batch at once; a sequence stops
// at its EOS (later steps leave it alone). src [B, S] -> B token lists, each without BOS, ending at EOS
// (included) or at max_len.
std::vector<std::vector<std::int64_t>> greedy_decode(Transformer& model, const Tensor& src,
                                                     const DecodeOptions& o = {});

// What beam search ranks a finished hypothesis by: its summed log-probability `score` over GNMT's length
// penalty lp = ((5 + length) / 6)^alpha (Wu et al. 2016, section 7), `length` counting its tokens after BOS,
// EOS included. A sum of log-probabilities only falls as a hypothesis grows, so without it beam search
// prefers short outputs; alpha = 0 gives lp = 1, the raw score.
double length_normalised(double score, std::size_t length, double alpha);

// Beam search, one source sentence at a time: keep the `width` best prefixes by summed log-probability;
// a prefix that emits EOS is finished; stop when `width` prefixes have finished or max_len is reached.
// The winner maximises length_normalised(score, length, alpha). Width 1 equals greedy decoding.
std::vector<std::vector<std::int64_t>> beam_decode(Transformer& model, const Tensor& src, std::int64_t width,
                                                   double alpha = 0.6, const DecodeOptions& o = {});

}  // namespace stepformer::transformer
