#pragma once
// Shape legend for every file in transformer/:
//   B batch, S source length, T target length, D d_model, H heads, Dh = D / H head size, F d_ff, V vocab.
#include <cstdint>

namespace stepformer::transformer {

// Hyperparameters are arguments, never globals (the seeds read globals inside classes). The defaults are
// the paper's base model (Vaswani et al. 2017, Table 3): N = 6, d_model = 512, d_ff = 2048, h = 8,
// P_drop = 0.1.
struct Config {
  std::int64_t src_vocab = 0;
  std::int64_t tgt_vocab = 0;
  std::int64_t n_layers = 6;
  std::int64_t d_model = 512;
  std::int64_t d_ff = 2048;
  std::int64_t n_heads = 8;
  double dropout = 0.1;
  std::int64_t max_len = 5000;  // longest sequence the positional-encoding table covers
  std::int64_t pad_id = 0;      // the PAD token's id in both vocabularies
  bool pre_norm = false;        // false: the paper's post-norm, LayerNorm(x + Sublayer(x))
};

}  // namespace stepformer::transformer
